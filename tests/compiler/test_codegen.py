"""Codegen: the final IR's runtime calls, and the tutorials end to end on the functional model and the
cycle engine against numpy, with counters derived by hand from the schedules (spec 3.2-3.5, 5.5).
"""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.compiler.lowering import ir
from vtasim.compiler.lowering.codegen import emit, to_python
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.ir import Attr, Evaluate, For, Var
from vtasim.compiler.lowering.passes import Func, run_passes
from vtasim.hw.config import default_config_path, load_config
from phase0_programs import build_image, conv2d_vt, gemm_blocked, gemm_simple, vadd, vadd_nested_vt

PRESETS = ["default", "2x16x16", "1x32x32", "1x8x8"]


def _cfg(name):
    if name == "default":
        return load_config()
    return load_config(default_config_path().parent / "presets" / f"{name}.json")


class FakeQueue:
    """Records the runtime calls (and replays each kernel once per distinct key, as the runtime)."""

    def __init__(self):
        self.calls = []
        self.kernels = {}

    def load_buffer_2d(self, *a):
        self.calls.append(("load",) + a)

    def store_buffer_2d(self, *a):
        self.calls.append(("store",) + a)

    def _op(self, kind, key, record):
        if key not in self.kernels:
            rec = _Recorder()
            record(rec)
            self.kernels[key] = rec.items
        self.calls.append((kind, key))

    def push_gemm_op(self, key, record):
        self._op("gemm", key, record)

    def push_alu_op(self, key, record):
        self._op("alu", key, record)

    def dep_push(self, a, b):
        self.calls.append(("push", a, b))

    def dep_pop(self, a, b):
        self.calls.append(("pop", a, b))

    def synchronize(self):
        self.calls.append(("sync",))


class _Recorder:
    def __init__(self):
        self.items = []

    def loop_begin(self, *a):
        self.items.append(("loop",) + a)

    def loop_end(self):
        self.items.append(("end",))

    def push(self, *a):
        self.items.append(("uop",) + a)


def _run_fake(builder, cfg, **kw):
    func, _, _ = builder(cfg, **kw)
    q = FakeQueue()
    emit(run_passes(func, cfg), q, {a: a.name for a in func.args})
    return q


def test_simple_gemm_calls(cfg):
    q = _run_fake(gemm_simple, cfg)
    c = q.calls
    assert c[:2] == [("gemm", (0, None)), ("push", 2, 1)]
    loop = c[2:2 + 7 * 16]
    for ko in range(16):
        it = loop[7 * ko: 7 * ko + 7]
        assert it == [("pop", 2, 1), ("load", "A", ko, 1, 1, 1, 0, 0, 0, 0, 0, 2),
                      ("load", "B", ko, 1, 16, 16, 0, 0, 0, 0, 0, 1), ("push", 1, 2), ("pop", 1, 2),
                      ("gemm", (1, None)), ("push", 2, 1)]
    assert c[2 + 7 * 16:] == [("push", 2, 3), ("pop", 2, 1), ("pop", 2, 3),
                              ("store", 0, 4, "C", 0, 16, 1, 16), ("sync",)]
    assert q.kernels[(0, None)] == [("loop", 16, 1, 0, 0), ("uop", 0, 1, 0, 0, 0, 0, 0, 0), ("end",)]
    assert q.kernels[(1, None)] == [("loop", 16, 1, 0, 1), ("uop", 0, 0, 0, 0, 0, 0, 0, 0), ("end",)]


def test_conv_kernels_are_keyed_by_the_thread(cfg):
    q = _run_fake(conv2d_vt, cfg)
    keys = sorted(q.kernels, key=str)
    # reset, compute and three ALU kernels, each recorded once per virtual thread
    assert sorted({k[0] for k in keys}) == [0, 1, 2, 3, 4] and {k[1] for k in keys} == {0, 1}
    compute = q.kernels[(1, 1)]
    assert compute[:2] == [("loop", 8, 98, 0, 9), ("loop", 7, 14, 16, 0)]
    uops = [x for x in compute if x[0] == "uop"]
    assert len(uops) == 126 and uops[0] == ("uop", 0, 0, 784, 144, 72, 0, 0, 0)
    # thread 1's data load lands at 144, both rows blocks padded at the image border only
    loads = [x for x in q.calls if x[0] == "load" and x[1] == "data"]
    assert len(loads) == 2 * 16 * 2
    assert {(x[6], x[7], x[8], x[9]) for x in loads} == {(1, 1, 1, 0), (1, 0, 1, 1)}     # x/y pads
    assert {x[10] for x in loads} == {0, 144}
    assert q.calls[-1] == ("sync",) and q.calls[-3:-1] == [("pop", 3, 2), ("pop", 3, 2)]


def test_kernel_with_two_free_variables_is_refused():
    i, j = Var("i"), Var("j")
    push = Evaluate(ir.Call("VTAUopPush", tuple(ir.const(x) for x in (0, 0, 0, 0, 0, 0, 0, 0))[:2]
                            + (i + j,) + tuple(ir.const(x) for x in (0, 0, 0, 0, 0))))
    body = For(i, 2, For(j, 2, Attr("coproc_uop_scope", "VTAPushGEMMOp", push, 0)))
    with pytest.raises(CompileError, match=r"^codegen: uop kernel 0 depends on 2 outer variables \(i, j\)"):
        to_python(Func("k2", (), body))


def test_missing_dram_buffer_is_named(cfg):
    func, _, _ = vadd(cfg)
    with pytest.raises(CompileError, match="no DRAM buffer given for `B`"):
        emit(run_passes(func, cfg), FakeQueue(), {"A": "A", "C": "C"})


def test_uop_kernel_over_the_uop_buffer():
    small = load_config().replace(LOG_UOP_BUFF_SIZE=8)                     # 64 uops
    func, _, _ = conv2d_vt(small)
    with pytest.raises(CompileError, match=r"^fold_uop_loop/runtime: uop kernel 1 \(VTAPushGEMMOp\) has 126 "
                                           r"uops, the uop buffer holds 64"):
        run_passes(func, small)


# ---- end to end --------------------------------------------------------------------------------
def _run_both(func, inputs, ref, cfg):
    import vtasim.sim.cycle
    import vtasim.sim.functional
    img, out, want = build_image(func, inputs, ref, cfg)
    results = [vtasim.sim.functional.run_image(img), vtasim.sim.cycle.run_image(img)]
    for r in results:
        got = r.outputs[out]
        if got != want:
            a, b = np.frombuffer(want, np.int8), np.frombuffer(got, np.int8)
            k = int(np.argmax(a != b))
            pytest.fail(f"{func.name}: output element {k}: expected {a[k]}, got {b[k]}")
    assert results[0].counters == results[1].counters
    assert len(set(want)) > 2                                  # a live reference
    return results[0].counters


def test_vector_add_end_to_end(cfg):
    c = _run_both(*vadd(cfg), cfg)
    # two ACC loads of 64 elements (64 B each), one ALU uop over 64 elements, 64 OUT elements stored
    assert c == {"inp_load_nbytes": 0, "wgt_load_nbytes": 0, "acc_load_nbytes": 2 * 64 * 64,
                 "uop_load_nbytes": 4, "out_store_nbytes": 64 * 16, "gemm_counter": 0, "alu_counter": 64}


def test_simple_gemm_end_to_end_spec_3_3_counters(cfg):
    c = _run_both(*gemm_simple(cfg), cfg)
    assert c == {"inp_load_nbytes": 256, "wgt_load_nbytes": 65536, "acc_load_nbytes": 0,
                 "uop_load_nbytes": 8, "out_store_nbytes": 256, "gemm_counter": 256, "alu_counter": 0}


def test_blocked_gemm_end_to_end_spec_3_4_counters(cfg):
    c = _run_both(*gemm_blocked(cfg), cfg)
    assert c == {"inp_load_nbytes": 4096, "wgt_load_nbytes": 1048576, "acc_load_nbytes": 0,
                 "uop_load_nbytes": 20, "out_store_nbytes": 1024, "gemm_counter": 4096, "alu_counter": 192}


def test_conv2d_virtual_threads_end_to_end(cfg):
    c = _run_both(*conv2d_vt(cfg), cfg)
    # derived from the schedule (spec 3.5): 2 row blocks x 16 channel blocks x 2 threads loads;
    # each data tile is 9 padded rows of which 8 come from DRAM (one border row padded), 14 columns
    loads = 2 * 16 * 2
    assert c["inp_load_nbytes"] == loads * 8 * 14 * 16
    assert c["wgt_load_nbytes"] == loads * 8 * 9 * 256
    # kernels loaded once each: per thread reset 14 + compute 126 + 3 ALU uops
    assert c["uop_load_nbytes"] == 2 * (14 + 126 + 3) * 4
    assert c["out_store_nbytes"] == 16 * 14 * 14 * 16
    assert c["gemm_counter"] == 14 * 14 * 9 * 16 * 16 == 451584
    assert c["alu_counter"] == 3 * 784 * 2 * 2
    assert c["acc_load_nbytes"] == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_reduced_tutorials_on_every_preset(preset):
    cfg = _cfg(preset)
    for func, inputs, ref in (vadd(cfg, 8), gemm_simple(cfg, 4, 4), gemm_blocked(cfg, 8, 8, 4, 4),
                              conv2d_vt(cfg, H=4, W=4, icb=2, ocb=8, oc_block=2, h_block=2)):
        c = _run_both(func, inputs, ref, cfg)
        if func.name == "gemm_blocked":
            # one uop per (out block, in block) whatever BATCH (an element is BATCH rows); 3 ALU ops per out block
            assert c["gemm_counter"] == 8 * 8 and c["alu_counter"] == 3 * 8


def test_nested_virtual_threads_replicate_per_thread_pair(cfg):
    func, inputs, ref = vadd_nested_vt(cfg, alu=False)
    q = FakeQueue()
    emit(run_passes(func, cfg), q, {a: a.name for a in func.args})
    loads = [(x[1], x[2], x[10]) for x in q.calls if x[0] == "load"]
    # B then A per thread (tx, ty) in (0,0) (1,0) (0,1) (1,1): DRAM chunk 2*tx+ty, each buffer x 4 threads
    assert loads == [("B", 0, 0), ("A", 0, 16), ("B", 8, 8), ("A", 8, 24),
                     ("B", 4, 4), ("A", 4, 20), ("B", 12, 12), ("A", 12, 28)]
    c = _run_both(func, inputs, ref, cfg)
    assert c["acc_load_nbytes"] == 2 * 16 * 64 and c["out_store_nbytes"] == 16 * 16


def test_nested_virtual_threads_with_alu_need_two_kernel_variables(cfg):
    func, _, _ = vadd_nested_vt(cfg, alu=True)
    with pytest.raises(CompileError, match=r"depends on 2 outer variables \(tx\.s, ty\.s\)|"
                                           r"depends on 2 outer variables \(ty\.s, tx\.s\)"):
        emit(run_passes(func, cfg), FakeQueue(), {a: a.name for a in func.args})


# ---- the real front end: vtasim.compiler.lowering.lower on the tutorial schedules ------------------------------
SPEC_COUNTERS = {
    "vector_add": {"inp_load_nbytes": 0, "wgt_load_nbytes": 0, "acc_load_nbytes": 2 * 64 * 64,
                   "uop_load_nbytes": 4, "out_store_nbytes": 64 * 16, "gemm_counter": 0, "alu_counter": 64},
    "simple_gemm": {"inp_load_nbytes": 256, "wgt_load_nbytes": 65536, "acc_load_nbytes": 0,         # spec 3.3
                    "uop_load_nbytes": 8, "out_store_nbytes": 256, "gemm_counter": 256, "alu_counter": 0},
    "blocked_gemm": {"inp_load_nbytes": 4096, "wgt_load_nbytes": 1048576, "acc_load_nbytes": 0,     # spec 3.4
                     "uop_load_nbytes": 20, "out_store_nbytes": 1024, "gemm_counter": 4096, "alu_counter": 192},
    "conv2d": {"inp_load_nbytes": 64 * 8 * 14 * 16, "wgt_load_nbytes": 64 * 8 * 9 * 256, "acc_load_nbytes": 0,
               "uop_load_nbytes": 2 * (14 + 126 + 3) * 4, "out_store_nbytes": 16 * 14 * 14 * 16,
               "gemm_counter": 451584, "alu_counter": 3 * 784 * 2 * 2},
}
MINE = {"vector_add": vadd, "simple_gemm": gemm_simple, "blocked_gemm": gemm_blocked, "conv2d": conv2d_vt}


@pytest.mark.parametrize("name", list(SPEC_COUNTERS))
def test_lowered_tutorials_end_to_end(cfg, name):
    lower = pytest.importorskip("vtasim.compiler.lowering.lower")
    schedules = pytest.importorskip("tutorial_schedules")
    from vtasim.compiler.dsl.environment import Environment
    sch, args = getattr(schedules, name)(Environment(cfg))
    func = lower.lower(sch, args, name)
    _, inputs, ref = MINE[name](cfg)                       # same shapes and names, numpy reference
    import vtasim.sim.cycle
    import vtasim.sim.functional
    img, out, want = build_image(func, inputs, ref, cfg, lowered=run_passes(func, cfg))
    for run in (vtasim.sim.functional.run_image, vtasim.sim.cycle.run_image):
        r = run(img)
        assert r.outputs[out] == want
        assert r.counters == SPEC_COUNTERS[name]


@pytest.mark.rtl
def test_reduced_programs_on_the_rtl_engine(cfg):
    from vtasim.sim import engines
    for func, inputs, ref in (gemm_blocked(cfg, 8, 8, 4, 4),
                              conv2d_vt(cfg, H=4, W=4, icb=2, ocb=8, oc_block=2, h_block=2)):
        img, out, want = build_image(func, inputs, ref, cfg)
        r = engines.run_engine("rtl", img)
        assert engines.check_result(img, r) == [] and r.outputs[out] == want
