"""Operators written as DSL schedules, and ``compile_workload`` for the catalogue.

::

    from compiler.ops import compile_workload
    c = compile_workload("resnet18.C8", cfg)                 # TopHub knobs where there is a record
    c = compile_workload("dense.16x512x1008", cfg, knobs={"tile_co": [21, 3]})
    c.image.save("out")

Inputs are random (seeded) in the ranges of TVM's tests: activations and weights in [-128, 128),
a bias in [-2^14, 2^14), ALU vectors small enough that no step overflows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.build import build
from compiler.environment import Environment
from compiler.knobs import check_knobs, fallback_knobs, tophub_knobs
from compiler.ops.alu import alu_chain, schedule_alu, vector_add
from compiler.ops.conv2d import fused_conv2d, schedule_conv2d_packed
from compiler.ops.dense import fused_dense, plain_gemm, schedule_dense_packed
from compiler.workloads import Conv2d, Dense, Gemm, VAdd, check_seed, parse_workload

__all__ = ["compile_workload", "Compiled", "workload_program", "default_knobs", "alu_chain"]


@dataclass
class Compiled:
    workload: object
    knobs: dict
    image: object
    stats: dict
    built: object


def default_knobs(wl, cfg) -> dict:
    """TopHub where it has a record for this layer and config, else the fallback."""
    return tophub_knobs(wl, cfg) or fallback_knobs(wl, cfg)


def _int(rng, lo, hi, shape, dtype):
    return rng.integers(lo, hi, size=shape).astype(dtype)


def workload_program(env, wl, knobs: dict, seed: int = 0):
    """``(schedule, args, inputs)`` of catalogue workload ``wl`` with ``knobs``."""
    rng = np.random.default_rng(check_seed(seed))
    if isinstance(wl, Conv2d):
        data, kernel, bias, out = fused_conv2d(env, wl)
        b = rng.integers(-(1 << 14), 1 << 14, size=(1, bias.shape[1], 1, 1, 1, bias.shape[5]))
        inputs = {"data": _int(rng, -128, 128, data.shape, np.int8),
                  "kernel": _int(rng, -128, 128, kernel.shape, np.int8),
                  "bias": np.broadcast_to(b, bias.shape).astype(np.int32)}
        return schedule_conv2d_packed(env, out, knobs), [data, kernel, bias, out], inputs
    if isinstance(wl, Dense):
        data, weight, out = (plain_gemm if isinstance(wl, Gemm) else fused_dense)(env, wl)
        inputs = {"data": _int(rng, -128, 128, data.shape, np.int8),
                  "weight": _int(rng, -128, 128, weight.shape, np.int8)}
        return schedule_dense_packed(env, out, knobs), [data, weight, out], inputs
    if isinstance(wl, VAdd):
        m = wl.n // (env.BATCH * env.BLOCK_OUT)
        (a, b), out, copies, stages = vector_add(env, m)
        inputs = {"A": _int(rng, -64, 64, a.shape, np.int32), "B": _int(rng, -64, 64, b.shape, np.int32)}
        return schedule_alu(env, m, out, copies, stages), [a, b, out], inputs
    raise TypeError(f"no operator for workload {wl!r}")


def compile_workload(name: str, cfg, knobs: dict | None = None, reduce: int = 1, seed: int = 0,
                     dump_ir=None, with_expected: bool = True) -> Compiled:
    """Compile catalogue workload ``name`` on ``cfg`` (knobs default to :func:`default_knobs`)."""
    wl = parse_workload(name, cfg, reduce=reduce)
    knobs = check_knobs(wl, cfg, default_knobs(wl, cfg) if knobs is None else knobs)
    with Environment(cfg) as env:
        sch, args, inputs = workload_program(env, wl, knobs, seed)
        built = build(sch, args, inputs, cfg, name=wl.name.replace("/", "_").replace(".", "_"),
                      dump_ir=dump_ir, expected=with_expected)
    return Compiled(wl, knobs, built.image, built.stats, built)

