"""Automatic flush of the runtime stream builder against TVM's rule: test after each instruction call.

TVM's runtime tests for a full instruction buffer at the end of every load, store and GEMM/ALU push
and synchronises at once; dependence calls never test.  So the dependence calls after the crossing
call land in the next launch.  The expected launches come from replaying the recorded runtime calls
in an independent model of TVM's runtime (``tvm_runtime_model``), or from a listing derived by hand;
the builder's barriers are TVM's launches without their FINISH.
"""

import itertools

import numpy as np
import pytest

import vtasim.compiler.lowering.build
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.tuning.knobs import fallback_knobs
from vtasim.compiler.ops import workload_program
from vtasim.compiler.runtime import CommandQueue
from vtasim.compiler.tuning.workloads import parse_workload
from vtasim.hw.config import MEM_INP, MEM_OUT, MEM_WGT
from vtasim.sim import functional
from tvm_runtime_model import CallLog, listing, tvm_launches


def barrier_ends(queue):
    """Index of the last instruction of each flush barrier (the builder labels them "flush")."""
    o = queue.origins
    return [i for i, x in enumerate(o) if x == "flush" and (i + 1 == len(o) or o[i + 1] != "flush")]


def check_against_tvm(log: CallLog, image, max_insns: int):
    """The image is TVM's launches for the same calls, each but the last without its FINISH, and
    the builder's barriers end where TVM's launches do.  Returns TVM's crossings."""
    q = log.queue
    launches, crossings = tvm_launches(log.calls, log.kernel_size, max_insns, q.cfg.uop_depth)
    assert len(launches) >= 2, "the case does not flush"
    assert listing(image) == [row for launch in launches[:-1] for row in launch[:-1]] + launches[-1]
    ends = list(itertools.accumulate(len(launch) - 1 for launch in launches[:-1]))
    assert barrier_ends(q) == [e - 1 for e in ends]
    assert q.stats["flushes"] == len(launches) - 1
    return crossings


# ---- by hand -------------------------------------------------------------------------------------


def one_block_gemm(cfg, max_insns):
    """C = A @ B^T for one INP and one WGT block, with the tokens of a one-step lowered GEMM."""
    rng = np.random.default_rng(5)
    a = rng.integers(-8, 8, size=(cfg.batch, cfg.block_in), dtype=np.int8)
    b = rng.integers(-8, 8, size=(cfg.block_out, cfg.block_in), dtype=np.int8)
    c = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int8)
    log = CallLog(CommandQueue(cfg, max_insns=max_insns, name="one"))
    q = log.queue
    A, B, C = q.alloc_input("A", a), q.alloc_input("B", b), q.alloc_output("C", c.nbytes)
    q.expect("C", c)

    def reset(k):
        k.push(0, 1, 0, 0, 0)

    def gemm(k):
        k.push(0, 0, 0, 0, 0)
    log.push_gemm_op("reset", reset)
    log.dep_push(2, 1)
    log.dep_pop(2, 1)
    log.load_buffer_2d(A, 0, 1, 1, 1, 0, 0, 0, 0, 0, MEM_INP)
    log.load_buffer_2d(B, 0, 1, 1, 1, 0, 0, 0, 0, 0, MEM_WGT)
    log.dep_push(1, 2)
    log.dep_pop(1, 2)
    log.push_gemm_op("gemm", gemm)
    log.dep_push(2, 3)
    log.dep_pop(2, 3)
    log.store_buffer_2d(0, MEM_OUT, C, 0, 1, 1, 1)
    log.synchronize()
    return log


def test_dep_push_after_the_crossing_load_starts_the_next_launch(default_cfg):
    # max_insns 9: the WGT load is the 4th instruction and 4 + 6 > 9, so TVM synchronises right
    # after it; the dep_push(1, 2) that follows finds an empty buffer and becomes a NOP there
    # instead of setting push_next on the load (derived by hand from runtime.cc's rules)
    log = one_block_gemm(default_cfg, 9)
    image = log.queue.build()
    closing = [("NOP-MEM", "u"), ("NOP-COMPUTE", "Pp")]
    assert listing(image) == [
        ("LD-UOP", ""), ("GEMM", "U"), ("LD-INP", "p"), ("LD-WGT", ""),       # the WGT load crosses
        ("NOP-STORE", "U"), *closing,                                          # barrier 1
        ("NOP-MEM", "u"),                                                      # dep_push(1, 2)
        ("LD-UOP", "P"), ("GEMM", "u"),                                        # kernel reloaded
        ("ST", "PU"), *closing,                                                # the store crosses: barrier 2
        ("NOP-STORE", "U"), *closing, ("FINISH", "")]                          # synchronize
    assert barrier_ends(log.queue) == [6, 12]
    crossings = check_against_tvm(log, image, 9)
    assert [log.calls[n + 1][0] for n in crossings] == ["dep_push", "sync"]
    r = functional.run_image(image)
    assert r.outputs["C"] == image.expected["C"] and r.leftover_tokens == {}


def test_one_more_slot_moves_the_flush_to_the_gemm(default_cfg):
    # max_insns 10: the WGT load passes (4 + 6 = 10) and the dep_push merges onto it; the GEMM
    # crosses, so the dep_push(2, 3) after it is a compute NOP of the next launch
    log = one_block_gemm(default_cfg, 10)
    image = log.queue.build()
    assert listing(image) == [
        ("LD-UOP", ""), ("GEMM", "U"), ("LD-INP", "p"), ("LD-WGT", "u"), ("LD-UOP", "P"), ("GEMM", ""),
        ("NOP-STORE", "U"), ("NOP-MEM", "u"), ("NOP-COMPUTE", "Pp"),          # barrier
        ("NOP-COMPUTE", "u"), ("ST", "PU"),                                     # dep_push(2, 3), store
        ("NOP-MEM", "u"), ("NOP-COMPUTE", "Pp"), ("FINISH", "")]
    assert barrier_ends(log.queue) == [8]
    check_against_tvm(log, image, 10)
    r = functional.run_image(image)
    assert r.outputs["C"] == image.expected["C"] and r.leftover_tokens == {}


# ---- compiled layers -----------------------------------------------------------------------------


def compile_logged(monkeypatch, cfg, name, reduce, max_insns, expected=False):
    """Reduced ``name`` with fallback knobs, every runtime call of its program recorded."""
    logs = []
    real_emit = vtasim.compiler.lowering.build.emit

    def logged_emit(func, queue, buffers):
        logs.append(CallLog(queue))
        real_emit(func, logs[-1], buffers)
    monkeypatch.setattr(vtasim.compiler.lowering.build, "emit", logged_emit)
    wl = parse_workload(name, cfg, reduce=reduce)
    with Environment(cfg) as env:
        sch, args, inputs = workload_program(env, wl, fallback_knobs(wl, cfg))
        built = build(sch, args, inputs, cfg, expected=expected, max_insns=max_insns)
    return built, logs[0]


@pytest.mark.parametrize("max_insns", [97, 500])
@pytest.mark.parametrize("layer", ["resnet18.C2", "resnet18.C5", "resnet18.C8", "resnet18.C11"])
def test_flushed_layer_is_tvms_launches(monkeypatch, default_cfg, layer, max_insns):
    built, log = compile_logged(monkeypatch, default_cfg, layer, 7, max_insns)
    crossings = check_against_tvm(log, built.image, max_insns)
    # the case the two rules tell apart: a dep_push right after the crossing call
    assert any(log.calls[n + 1][0] == "dep_push" for n in crossings)


def test_flushed_layer_computes_the_reference(monkeypatch, default_cfg):
    built, log = compile_logged(monkeypatch, default_cfg, "resnet18.C5", 7, 97, expected=True)
    assert log.queue.stats["flushes"] > 10
    r = functional.run_image(built.image)
    assert r.outputs == built.image.expected and r.leftover_tokens == {}
