"""lower(): the phase-0 IR of the four tutorial schedules (structure against spec 3 and 6) and
its meaning (executed by vtasim.compiler.lowering._irexec, compared with the reference evaluator)."""

import numpy as np
import pytest

from vtasim.compiler.lowering import ir
from vtasim.compiler.dsl import te
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.ops.data import requant_shift
from vtasim.compiler.lowering._irexec import run
from vtasim.compiler.lowering.lower import LowerError, lower
from vtasim.compiler.dsl.reference import evaluate
from vtasim.compiler.dsl.schedule import create_schedule
from vtasim.hw.config import load_config

import tutorial_schedules as tutorials

ENV = Environment()


def _preset(name):
    from pathlib import Path
    return Environment(load_config(Path(__file__).resolve().parents[2] / "config" / "presets" / f"{name}.json"))


# ---- helpers: look at the IR ------------------------------------------------------------------
def _nodes(node, cls):
    out = []
    ir.walk(node, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def _allocs(f):
    return {a.buffer.name: (a.buffer.scope, a.buffer.size, a.buffer.shape) for a in _nodes(f.body, ir.Allocate)}


def _uops(f):
    return [c for c in _nodes(f.body, ir.Call) if c.name == "vta.uop_push"]


def _enclosing_loops(root, target):
    """The For extents (and attr keys) from the root down to ``target``."""
    def go(n, acc):
        if n is target:
            return acc
        if isinstance(n, ir.For):
            return go(n.body, acc + [(n.var.name, n.extent)])
        if isinstance(n, ir.Attr):
            return go(n.body, acc + [n.key])
        if isinstance(n, ir.Allocate):
            return go(n.body, acc)
        if isinstance(n, ir.Seq):
            for s in n.stmts:
                r = go(s, acc)
                if r is not None:
                    return r
        return None
    return go(root, [])


def _elem_coeffs(call_arg, lanes):
    """tvm_access_ptr offset -> {var name: coefficient in elements}, base in elements."""
    assert call_arg.name == "tvm_access_ptr"
    off = call_arg.args[1]
    vs = sorted(ir.free_vars(off), key=lambda v: v.name)
    coeffs, base = ir.linear(off, vs)
    assert all(c % lanes == 0 for c in coeffs)
    return {v.name: c // lanes for v, c in zip(vs, coeffs)}, base


def _check_semantics(sch, args, env, seed=0):
    rng = np.random.default_rng(seed)
    inputs = {}
    for t in args[:-1]:
        lo, hi = (-128, 128) if t.dtype == "int8" else (-2**20, 2**20)
        inputs[t] = rng.integers(lo, hi, t.shape).astype(np.int8 if t.dtype == "int8" else np.int32)
    f = lower(sch, args)
    got = run(f, {t.name: v for t, v in inputs.items()}, env)[args[-1].name]
    want = evaluate(args[-1], inputs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return f


# ---- vector add (spec 3.2) --------------------------------------------------------------------
def test_vector_add_structure():
    s, args = tutorials.vector_add(ENV)
    f = lower(s, args, "vadd")
    assert [b.name for b in f.args] == ["A", "B", "C"] and all(b.scope == "global" for b in f.args)
    assert _allocs(f) == {n: (ir.SCOPE_ACC, 64 * 16, (1, 64, 1, 16)) for n in ("A_buf", "B_buf", "C_buf")}
    attrs = [a.key for a in _nodes(f.body, ir.Attr)]
    assert attrs == ["pragma_dma_copy", "pragma_dma_copy", "pragma_alu", "pragma_dma_copy"]
    for a in _nodes(f.body, ir.Attr):
        assert a.value == 1
        loops = [(x.extent) for x in _nodes(a.body, ir.For)]
        assert loops == [64, 16]                      # the extent-1 axes get no loop (TVM)
        (store,) = _nodes(a.body, ir.Store)
    alu = _nodes(f.body, ir.Attr)[2]
    (store,) = _nodes(alu, ir.Store)
    assert store.buffer.name == "C_buf" and isinstance(store.value, ir.BinOp) and store.value.op == "+"
    assert {ld.buffer.name for ld in _nodes(store.value, ir.Load)} == {"A_buf", "B_buf"}
    text = str(f)
    assert text.startswith("// vadd(A: int32[1, 64, 1, 16], B: int32[1, 64, 1, 16], C: int8[1, 64, 1, 16])")
    assert "C[((i1 * 16) + i3)] = int8(C_buf[((i1 * 16) + i3)])" in text


def test_vector_add_semantics():
    s, args = tutorials.vector_add(ENV, m=8)
    _check_semantics(s, args, ENV)


# ---- simple GEMM (spec 3.3, 6.2) ----------------------------------------------------------------
def test_simple_gemm_structure():
    s, args = tutorials.simple_gemm(ENV)
    f = lower(s, args)
    assert _allocs(f) == {"C_buf": (ir.SCOPE_ACC, 256, (1, 16, 1, 16)),
                          "A_buf": (ir.SCOPE_INP, 16, (1, 1, 1, 16)),
                          "B_buf": (ir.SCOPE_WGT, 16 * 256, (16, 1, 16, 16))}
    reset, update = _uops(f)
    z, one = ir.IntImm(0), ir.IntImm(1)
    assert reset.args[:2] == (z, one) and reset.args[3:] == (z, z, z, z, z)
    assert update.args[:2] == (z, z) and update.args[5:] == (z, z, z)
    assert _elem_coeffs(reset.args[2], 16) == ({"co.init": 1}, ir.IntImm(0))
    assert _elem_coeffs(update.args[2], 16) == ({"co": 1}, ir.IntImm(0))
    assert update.args[3].args == (update.args[3].args[0], ir.IntImm(0))
    assert update.args[3].args[0].name == "A_buf"
    assert _elem_coeffs(update.args[4], 256) == ({"co": 1}, ir.IntImm(0))
    # the uop sits in coproc_scope 2 / coproc_uop_scope VTAPushGEMMOp under ko (16) and co (16)
    ev = [e for e in _nodes(f.body, ir.Evaluate) if e.call is update][0]
    assert _enclosing_loops(f.body, ev) == [("ko", 16), ("co", 16), "coproc_scope", "coproc_uop_scope"]
    ev0 = [e for e in _nodes(f.body, ir.Evaluate) if e.call is reset][0]
    assert _enclosing_loops(f.body, ev0) == [("co.init", 16), "coproc_scope", "coproc_uop_scope"]
    scope = [a for a in _nodes(f.body, ir.Attr) if a.key == "coproc_uop_scope"][0]
    assert scope.value == "VTAPushGEMMOp"
    # A_buf and B_buf are loaded inside ko, A first
    ko = [x for x in _nodes(f.body, ir.For) if x.var.name == "ko"][0]
    assert [a.buffer.name for a in _nodes(ko, ir.Allocate)] == ["A_buf", "B_buf"]
    b_copy = [a for a in _nodes(ko, ir.Attr) if a.key == "pragma_dma_copy"][1]
    assert [x.extent for x in _nodes(b_copy, ir.For)] == [16, 16, 16]


@pytest.mark.parametrize("preset", [None, "1x8x8", "2x16x16"])
def test_simple_gemm_semantics(preset):
    env = ENV if preset is None else _preset(preset)
    s, args = tutorials.simple_gemm(env, o=1, n=3, m=2)
    _check_semantics(s, args, env)


# ---- blocked GEMM (spec 3.4, 6.3) ---------------------------------------------------------------
def test_blocked_gemm_structure():
    s, args = tutorials.blocked_gemm(ENV)
    f = lower(s, args)
    allocs = _allocs(f)
    assert allocs["data.local.inp_buffer"][:2] == (ir.SCOPE_INP, 16 * 16)
    assert allocs["weight.local.wgt_buffer"][:2] == (ir.SCOPE_WGT, 256 * 256)
    for n in ("res_gem", "res_shr", "res_max", "res_min"):
        assert allocs[n][:2] == (ir.SCOPE_ACC, 16 * 16)
    reset, update = _uops(f)
    assert _elem_coeffs(update.args[2], 16) == ({"co": 1}, ir.IntImm(0))
    assert _elem_coeffs(update.args[3], 16) == ({"ic.inner": 1}, ir.IntImm(0))
    assert _elem_coeffs(update.args[4], 256) == ({"co": 16, "ic.inner": 1}, ir.IntImm(0))
    ev = [e for e in _nodes(f.body, ir.Evaluate) if e.call is update][0]
    assert _enclosing_loops(f.body, ev) == [("i1.outer", 4), ("ic.outer", 4), ("co", 16), ("ic.inner", 16),
                                            "coproc_scope", "coproc_uop_scope"]
    alus = [a for a in _nodes(f.body, ir.Attr) if a.key == "pragma_alu"]
    ops = [(_nodes(a, ir.Store)[0].value.op, _nodes(a, ir.Store)[0].value.b) for a in alus]
    assert ops == [(">>", ir.IntImm(requant_shift(1024))), ("max", ir.IntImm(0)), ("min", ir.IntImm(127))]
    # the store pragma sits on res.axis[2]: inside the 16-iteration oc_inn loop, one element each
    stores = [a for a in _nodes(f.body, ir.Attr) if a.key == "pragma_dma_copy"][-1]
    (st,) = _nodes(stores, ir.Store)
    assert st.buffer.name == "res"
    assert _enclosing_loops(f.body, stores) == [("i1.outer", 4), ("i1.inner", 16)]
    assert [x.extent for x in _nodes(stores, ir.For)] == [16]


def test_blocked_gemm_semantics():
    s, args = tutorials.blocked_gemm(ENV, batch_size=1, in_channels=64, out_channels=64, block=32)
    _check_semantics(s, args, ENV)


# ---- conv2d with virtual threads (spec 3.5, 6.4) ------------------------------------------------
def test_conv2d_c8_structure():
    s, args = tutorials.conv2d(ENV)
    f = lower(s, args)
    allocs = _allocs(f)
    assert allocs["data_buf"] == (ir.SCOPE_INP, 9 * 16 * 16, (1, 1, 9, 16, 1, 16))       # 144 elements
    assert allocs["kernel_buf"] == (ir.SCOPE_WGT, 72 * 256, (8, 1, 3, 3, 16, 16))       # 72 elements
    for n in ("res_conv", "res_shr", "res_max", "res_min"):
        assert allocs[n] == (ir.SCOPE_ACC, 784 * 16, (1, 8, 7, 14, 1, 16))             # 784 elements
    top = f.body
    assert isinstance(top, ir.Attr) and top.key == "virtual_thread" and top.extra == 2
    tx = top.value
    reset, update = _uops(f)
    assert _elem_coeffs(reset.args[2], 16) == ({"co.init": 98, "i.init": 14, "j.init": 1}, ir.IntImm(0))
    assert _elem_coeffs(update.args[2], 16) == ({"co": 98, "i": 14, "j": 1}, ir.IntImm(0))
    assert _elem_coeffs(update.args[3], 16) == ({"dx": 1, "dy": 16, "i": 16, "j": 1}, ir.IntImm(0))
    assert _elem_coeffs(update.args[4], 256) == ({"co": 9, "dx": 1, "dy": 3}, ir.IntImm(0))
    ev = [e for e in _nodes(f.body, ir.Evaluate) if e.call is update][0]
    assert _enclosing_loops(f.body, ev) == ["virtual_thread", ("i2.outer", 2), ("ic.outer", 16), ("co", 8),
                                            ("i", 7), ("dy", 3), ("dx", 3), ("j", 14),
                                            "coproc_scope", "coproc_uop_scope"]
    # the padded copy: a Select over the *global* padded row (i2.outer * 7 + i2), a plain column test
    data_copy = [a for a in _nodes(f.body, ir.Attr) if a.key == "pragma_dma_copy"][0]
    (st,) = _nodes(data_copy, ir.Store)
    assert st.buffer.name == "data_buf" and isinstance(st.value, ir.Select)
    assert isinstance(st.value.true_value, ir.Load) and st.value.true_value.buffer.name == "data"
    assert st.value.false_value == ir.IntImm(0, "int8")
    assert [x.extent for x in _nodes(data_copy, ir.For)] == [9, 16, 16]
    names = {v.name for v in ir.free_vars(st.value.cond)}
    assert names == {"i2", "i2.outer", "i3"}
    # the kernel load of thread t starts at t * 8 blocks of 9 taps
    k_copy = [a for a in _nodes(f.body, ir.Attr) if a.key == "pragma_dma_copy"][1]
    (kst,) = _nodes(k_copy, ir.Store)
    lin, _ = ir.linear(kst.value.index, [tx])
    assert lin == [8 * 16 * 9 * 256]
    # the store pragma on res.axis[4]: 8 * 7 * 14 single-element stores per thread and row block
    out_copy = [a for a in _nodes(f.body, ir.Attr) if a.key == "pragma_dma_copy"][-1]
    assert _enclosing_loops(f.body, out_copy) == ["virtual_thread", ("i2.outer", 2), ("i1.inner", 8),
                                                  ("i2.inner", 7), ("i3.inner", 14)]


@pytest.mark.parametrize("v_threads", [1, 2])
def test_conv2d_semantics(v_threads):
    s, args = tutorials.conv2d(ENV, height=4, width=4, in_channels=32, out_channels=64, oc_block=32,
                               h_block=2, w_block=4, v_threads=v_threads)
    _check_semantics(s, args, ENV)


def test_keep_trivial_loops_keeps_extent_one_axes_and_meaning():
    s, args = tutorials.simple_gemm(ENV, o=1, n=2, m=2)
    f = lower(s, args, keep_trivial_loops=True)
    assert ("bo", 1) in [(x.var.name, x.extent) for x in _nodes(f.body, ir.For)]
    a = np.ones(args[0].shape, np.int8)
    b = np.ones(args[1].shape, np.int8)
    assert (run(f, {"A": a, "B": b}, ENV)["C"] == 32).all()


# ---- errors -------------------------------------------------------------------------------------
def _gemm_parts(env=ENV):
    A = te.placeholder((1, 2, 1, 16), "int8", "A")
    B = te.placeholder((2, 2, 16, 16), "int8", "B")
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(B.shape, lambda *i: B(*i), "B_buf")
    ko = te.reduce_axis((0, 2), "ko")
    ki = te.reduce_axis((0, 16), "ki")
    C_buf = te.compute((1, 2, 1, 16), lambda bo, co, bi, ci: te.sum(
        A_buf[bo, ko, bi, ki].astype("int32") * B_buf[co, ko, ci, ki].astype("int32"), axis=[ko, ki]), "C_buf")
    C = te.compute(C_buf.shape, lambda *i: C_buf(*i).astype("int8"), "C")
    s = create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    return s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki)


def test_tensorize_mismatch_names_axes_and_intrinsic():
    s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki) = _gemm_parts()
    bo, co, bi, ci = s[C_buf].op.axis
    kio, kii = s[C_buf].split(ki, factor=8)
    s[C_buf].reorder(ko, kio, bo, co, bi, ci, kii)
    s[C_buf].tensorize(bi, ENV.gemm)
    with pytest.raises(LowerError, match=r"tensorize of `C_buf` at `bi`: the inner axes are \(bi 1, ci 16, "
                                          r"ki.inner 8\), the intrinsic needs \(BATCH 1, BLOCK_OUT 16, BLOCK_IN 16"):
        lower(s, [A, B, C])


def test_tensorize_wrong_scope_and_layout():
    s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki) = _gemm_parts()
    s[B_buf].set_scope(ENV.acc_scope)
    bo, co, bi, ci = s[C_buf].op.axis
    s[C_buf].reorder(ko, bo, co, bi, ci, ki)
    s[C_buf].tensorize(bi, ENV.gemm)
    with pytest.raises(LowerError, match="one local.inp_buffer and one local.wgt_buffer"):
        lower(s, [A, B, C])
    # transposed output order: (ci, bi) swapped in the compute -> wrong stride
    s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki) = _gemm_parts()
    bo, co, bi, ci = s[C_buf].op.axis
    s[C_buf].reorder(ko, bo, bi, co, ci, ki)      # co (extent 2) where BATCH belongs
    s[C_buf].tensorize(co, ENV.gemm)
    with pytest.raises(LowerError, match=r"the inner axes are \(co 2, ci 16, ki 16\)"):
        lower(s, [A, B, C])


def test_compute_at_outside_the_consumer_is_refused():
    s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki) = _gemm_parts()
    s[A_buf].compute_at(s[C], s[C].op.axis[1])
    with pytest.raises(LowerError, match=r"compute_at of `A_buf` at `C.i1`: its consumer `C_buf` is not computed "
                                          r"inside that loop \(it is attached at root\)"):
        lower(s, [A, B, C])


def test_non_dividing_split_is_refused():
    s, (A, B, A_buf, B_buf, C_buf, C), _ = _gemm_parts()
    s[C].split(s[C].op.axis[3], factor=5)
    with pytest.raises(LowerError, match=r"split of `C` at `i3`: factor 5 does not divide the extent 16"):
        lower(s, [A, B, C])


def test_missing_args_are_named():
    s, (A, B, A_buf, B_buf, C_buf, C), _ = _gemm_parts()
    with pytest.raises(LowerError, match="placeholder `B` is read but not in args"):
        lower(s, [A, C])
    with pytest.raises(LowerError, match="output `C` is not in args"):
        lower(s, [A, B])


def test_compute_at_axis_split_afterwards():
    s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki) = _gemm_parts()
    s[A_buf].compute_at(s[C_buf], ko)
    s[C_buf].split(ko, factor=1)
    with pytest.raises(LowerError, match="`ko` is no longer a leaf axis of `C_buf`"):
        lower(s, [A, B, C])


# ---- topi conv2d_packed schedule (spec 3.6) with the fused epilogue (spec 7.1) -----------------
TOPI_CASES = {
    "3x3_oc_threads": dict(height=6, width=6, in_channels=32, out_channels=64, tile_h=(2, 3), tile_w=(1, 6),
                           tile_ci=(2, 1), tile_co=(2, 1), oc_nthread=2),
    "1x1_h_threads": dict(height=4, width=4, in_channels=32, out_channels=32, kernel=1, pad=0, tile_h=(2, 2),
                          tile_w=(1, 4), tile_ci=(1, 2), tile_co=(2, 1), oc_nthread=1, h_nthread=2),
    "3x3_stride2": dict(height=8, width=8, in_channels=32, out_channels=32, stride=2, tile_h=(2, 2),
                        tile_w=(1, 4), tile_ci=(2, 1), tile_co=(1, 2), oc_nthread=1),
}


@pytest.mark.parametrize("case", sorted(TOPI_CASES))
def test_topi_conv2d_semantics(case):
    s, args = tutorials.topi_conv2d(ENV, **TOPI_CASES[case])
    _check_semantics(s, args, ENV)


def test_topi_conv2d_c2_tophub_regions():
    """C2 with its TopHub knobs (spec 7.3): per thread the accumulator tile is 2 * 8 * 56 elements."""
    s, args = tutorials.topi_conv2d(ENV, height=56, width=56, in_channels=64, out_channels=64, tile_h=(7, 8),
                                    tile_w=(1, 56), tile_ci=(4, 1), tile_co=(2, 2), oc_nthread=2)
    allocs = _allocs(lower(s, args))
    assert allocs["res"] == (ir.SCOPE_ACC, 2 * 8 * 56 * 16, (1, 2, 8, 56, 1, 16))
    assert allocs["pad_data"] == (ir.SCOPE_INP, 10 * 58 * 16, (1, 1, 10, 58, 1, 16))
    assert allocs["kernel.local.wgt_buffer"] == (ir.SCOPE_WGT, 2 * 9 * 256, (2, 1, 3, 3, 16, 16))
    assert allocs["bias.local.acc_buffer"] == (ir.SCOPE_ACC, 2 * 16, (1, 2, 1, 1, 1, 16))


# ---- end to end through the passes, codegen and runtime of the other compiler modules ----------
E2E = {
    "vector_add": (tutorials.vector_add, dict(m=16)),
    "simple_gemm": (tutorials.simple_gemm, dict(n=4, m=4)),
    "blocked_gemm": (tutorials.blocked_gemm, dict(in_channels=128, out_channels=128, block=64)),
    "conv2d": (tutorials.conv2d, dict(height=4, width=4, in_channels=32, out_channels=64, oc_block=32,
                                      h_block=2, w_block=4)),
    "topi_conv2d": (tutorials.topi_conv2d, TOPI_CASES["3x3_oc_threads"]),
}


@pytest.mark.parametrize("name", sorted(E2E))
def test_lowered_program_runs_bit_exact_on_the_functional_engine(name, default_cfg):
    pytest.importorskip("vtasim.compiler.lowering.codegen")
    pytest.importorskip("vtasim.sim.engines")
    from phase0_programs import build_image
    from vtasim.sim.engines import check_result, run_engine

    builder, kw = E2E[name]
    s, args = builder(ENV, **kw)
    rng = np.random.default_rng(3)
    inputs = {t: rng.integers(-128, 128, t.shape).astype(np.int8 if t.dtype == "int8" else np.int32)
              for t in args[:-1]}
    image, _, _ = build_image(lower(s, args, name), {t.name: v for t, v in inputs.items()},
                              lambda _: evaluate(args[-1], inputs), default_cfg)
    assert check_result(image, run_engine("functional", image)) == []


# ---- generic schedules: fuse, nparts, plain reductions, cache_write -----------------------------
def test_fused_axis_bounds_and_semantics():
    A = te.placeholder((8, 16), "int32", "A")
    B = te.compute(A.shape, lambda x, y: A[x, y] + 1, "B")
    C = te.compute(A.shape, lambda x, y: B[x, y] * 3, "C")
    s = create_schedule(C.op)
    f = s[C].fuse(*s[C].op.axis)
    fo, fi = s[C].split(f, factor=16)
    s[B].compute_at(s[C], fo)
    s[B].set_scope(ENV.acc_scope)
    func = lower(s, [A, C])
    assert _allocs(func) == {"B": (ir.SCOPE_ACC, 16, (1, 16))}        # one row per iteration
    a = np.arange(128, dtype=np.int32).reshape(8, 16)
    assert np.array_equal(run(func, {"A": a}, ENV)["C"], (a + 1) * 3)


def test_plain_reduction_with_cached_operand_and_nparts():
    A = te.placeholder((6, 12), "int32", "A")
    k = te.reduce_axis((0, 12), "k")
    S = te.compute((6,), lambda i: te.sum(A[i, k] * 2, axis=[k]), "S")
    s = create_schedule(S.op)
    Ac = s.cache_read(A, ir.SCOPE_ACC, [S])
    io, ii = s[S].split(s[S].op.axis[0], nparts=3)
    ko, ki = s[S].split(k, factor=4)
    s[S].reorder(io, ko, ii, ki)
    s[Ac].compute_at(s[S], ko)
    func = lower(s, [A, S])
    assert _allocs(func)["A.local.acc_buffer"] == (ir.SCOPE_ACC, 2 * 4, (2, 4))
    inits = [x for x in _nodes(func.body, ir.For) if x.var.name == "i.inner.init"]
    assert len(inits) == 1 and inits[0].extent == 2
    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, (6, 12)).astype(np.int32)
    assert np.array_equal(run(func, {"A": a}, ENV)["S"], evaluate(S, {A: a}))


def test_cache_write_computes_into_the_cache_then_copies():
    s, args = tutorials.simple_gemm(ENV, n=2, m=2)
    A, B, C = args
    # a second schedule of the same graph: cache_write of the int8 result stage
    s2 = create_schedule(C.op)
    CC = s2.cache_write(C, ir.SCOPE_ACC)
    assert s2[CC].scope == ir.SCOPE_ACC and [st.name for st in s2.stages][-2:] == ["C.local.acc_buffer", "C"]
    f = lower(s2, [A, B, C])
    assert "C.local.acc_buffer" in _allocs(f)
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, A.shape).astype(np.int8)
    b = rng.integers(-128, 128, B.shape).astype(np.int8)
    assert np.array_equal(run(f, {"A": a, "B": b}, ENV)["C"], evaluate(C, {A: a, B: b}))


def test_pragma_inside_the_tensorized_region_is_refused():
    s, (A, B, A_buf, B_buf, C_buf, C), (ko, ki) = _gemm_parts()
    bo, co, bi, ci = s[C_buf].op.axis
    s[C_buf].reorder(ko, bo, co, bi, ci, ki)
    s[C_buf].tensorize(bi, ENV.gemm)
    s[C_buf].pragma(ci, "alu")
    with pytest.raises(LowerError, match="`ci` is inside the tensorized region, it cannot carry a pragma"):
        lower(s, [A, B, C])
