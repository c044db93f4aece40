"""Operators written as DSL schedules, and ``compile_workload`` for the catalogue.

::

    from vtasim.compiler.ops import compile_workload
    c = compile_workload("resnet18.C8", cfg)                 # TopHub knobs where there is a record
    c = compile_workload("dense.16x512x1008", cfg, knobs={"tile_co": [21, 3]})
    c.image.save("out")

Inputs are random (seeded) under the data rule of :mod:`vtasim.compiler.ops.data`: activations and weights
in [-128, 128), the conv/dense shift derived from the reduction length and a bias a small fraction of
the shifted spread, so the outputs depend on the data (TVM's tests shift by 8 and draw the bias from
+-2^14, which puts nearly every output at a clip bound); ALU vectors small enough that no step
overflows.  ``Compiled.shift`` is the epilogue's shift (None without one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.tuning.knobs import check_knobs, fallback_knobs, fitting_knobs, tophub_knobs
from vtasim.compiler.ops import data as rule
from vtasim.compiler.ops.alu import alu_chain, schedule_alu, vector_add
from vtasim.compiler.ops.conv2d import fused_conv2d, schedule_conv2d_packed
from vtasim.compiler.ops.dense import fused_dense, plain_gemm, schedule_dense_packed
from vtasim.compiler.ops.conv2d_transpose import transpose_program
from vtasim.compiler.ops.group_conv2d import group_program
from vtasim.compiler.tuning.workloads import Conv2d, Conv2dTranspose, Dense, Gemm, GroupConv2d, VAdd, check_seed, parse_workload

__all__ = ["compile_workload", "Compiled", "workload_program", "workload_shift", "default_knobs", "alu_chain"]


@dataclass
class Compiled:
    workload: object
    knobs: dict
    image: object
    stats: dict
    built: object

    @property
    def shift(self) -> int | None:
        return workload_shift(self.workload)

    def output_fractions(self) -> str | None:
        """``outputs: ... % at 127, ... % at 0, ... % between`` of the expected output (None without one)."""
        out = self.built.expected.get(self.built.func.args[-1].name)
        return None if out is None else rule.format_fractions(out, *self.workload.out_bounds)


def default_knobs(wl, cfg) -> dict:
    """TopHub where it has a record for this layer and config; for grouped and transposed convolutions
    the largest tiles that fit (:func:`fitting_knobs`); else the fallback."""
    if isinstance(wl, (GroupConv2d, Conv2dTranspose)):
        return fitting_knobs(wl, cfg)
    return tophub_knobs(wl, cfg) or fallback_knobs(wl, cfg)


def workload_shift(wl) -> int | None:
    """The right shift of ``wl``'s requantising epilogue (conv2d, dense), None for gemm and vadd."""
    if isinstance(wl, Conv2d) or (isinstance(wl, Dense) and not isinstance(wl, Gemm)):
        return rule.requant_shift(wl.reduction)
    return None


def workload_program(env, wl, knobs: dict, seed: int = 0):
    """``(schedule, args, inputs)`` of catalogue workload ``wl`` with ``knobs``."""
    seed = check_seed(seed)
    if isinstance(wl, GroupConv2d):
        return group_program(env, wl, knobs, seed)
    if isinstance(wl, Conv2dTranspose):
        return transpose_program(env, wl, knobs, seed)
    rng = np.random.default_rng(seed)
    if isinstance(wl, Conv2d):
        data, kernel, bias, out = fused_conv2d(env, wl, workload_shift(wl))
        b = rule.draw_bias(rng, (1, bias.shape[1], 1, 1, 1, bias.shape[5]))
        inputs = {"data": rule.draw(rng, data.shape), "kernel": rule.draw(rng, kernel.shape),
                  "bias": np.broadcast_to(b, bias.shape).astype(np.int32)}
        return schedule_conv2d_packed(env, out, knobs), [data, kernel, bias, out], inputs
    if isinstance(wl, Dense):
        data, weight, out = plain_gemm(env, wl) if isinstance(wl, Gemm) else fused_dense(env, wl, workload_shift(wl))
        inputs = {"data": rule.draw(rng, data.shape), "weight": rule.draw(rng, weight.shape)}
        return schedule_dense_packed(env, out, knobs), [data, weight, out], inputs
    if isinstance(wl, VAdd):
        m = wl.n // (env.BATCH * env.BLOCK_OUT)
        (a, b), out, copies, stages = vector_add(env, m)
        inputs = {"A": rule.draw(rng, a.shape, np.int32, -64, 64), "B": rule.draw(rng, b.shape, np.int32, -64, 64)}
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

