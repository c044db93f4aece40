"""The tensor-expression DSL, the environment and the schedule primitives (and their errors)."""

from pathlib import Path

import pytest

from vtasim.compiler.lowering import ir
from vtasim.compiler.dsl import te
from vtasim.compiler.dsl.environment import Environment, get_env
from vtasim.compiler.dsl.schedule import ScheduleError
from vtasim.hw.config import load_config

PRESETS = Path(__file__).resolve().parents[2] / "config" / "presets"


# ---- environment --------------------------------------------------------------------------------
def test_environment_from_config_and_context():
    env = Environment()
    assert (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT) == (1, 16, 16)
    assert (env.inp_dtype, env.wgt_dtype, env.acc_dtype, env.out_dtype) == ("int8", "int8", "int32", "int8")
    assert (env.inp_scope, env.wgt_scope, env.acc_scope) == (ir.SCOPE_INP, ir.SCOPE_WGT, ir.SCOPE_ACC)
    assert env.dma_copy == "dma_copy" and env.alu == "alu"
    assert (env.gemm.batch, env.gemm.block_in, env.gemm.block_out) == (1, 16, 16)
    assert (env.gemm.inp_lanes, env.gemm.wgt_lanes, env.gemm.acc_lanes) == (16, 256, 16)
    small = Environment(load_config(PRESETS / "2x16x16.json"))
    outer = get_env()
    with small as e:
        assert e is small and get_env() is small and Environment.current() is small
        assert (e.BATCH, e.gemm.acc_lanes) == (2, 32)
    assert get_env() is outer
    assert Environment.current().BLOCK_IN == 16


# ---- tensor expressions -------------------------------------------------------------------------
def test_compute_axes_names_and_dtype():
    A = te.placeholder((2, 3), "int8", "A")
    B = te.compute((2, 3), lambda i, j: A[i, j].astype("int32") * 2, "B")
    assert [a.name for a in B.op.axis] == ["i", "j"] and B.shape == (2, 3) and B.dtype == "int32"
    C = te.compute((2, 3), lambda *i: B(*i) >> 1, "C")
    assert [a.name for a in C.op.axis] == ["i0", "i1"]
    assert C.op.input_tensors == [B] and B.op.input_tensors == [A]
    k = te.reduce_axis((0, 3), "k")
    D = te.compute((2,), lambda i: te.sum(B[i, k], axis=k), "D")
    assert D.op.reduce_axis == (k,) and isinstance(D.op.body, te.Reduce)
    assert te.expr_text(D.op.body) == "sum(B[i, k], axis=[k])"


def test_expression_helpers():
    A = te.placeholder((4,), "int32", "A")
    i = ir.Var("i")
    e = te.if_then_else(te.all_(te.ge(i, 1), te.lt(i, 3)), te.max(A[i], 0), te.min(A[i], -1) << 2)
    assert isinstance(e, ir.Select) and e.cond.op == "&&"
    assert te.expr_text(e) == "if_then_else(((i >= 1) && (i < 3)), max(A[i], 0), (min(A[i], -1) << 2))"
    assert isinstance(te.cast("int8", A[i]), ir.Cast) and A[i].astype("int8").dtype == "int8"


def test_te_errors():
    A = te.placeholder((2, 3), "int8", "A")
    with pytest.raises(te.TEError, match="tensor `A` has 2 dimensions, read with 1 indices"):
        A[0]
    k = te.reduce_axis((0, 3), "k")
    with pytest.raises(te.TEError, match="a reduction may only be the whole body"):
        te.compute((2,), lambda i: te.sum(A[i, k], axis=k) + 1, "bad")
    with pytest.raises(te.TEError, match="function takes 1 arguments, the shape has 2"):
        te.compute((2, 3), lambda i: A[i, 0], "bad")
    with pytest.raises(te.TEError, match="is not a reduce_axis"):
        te.sum(A[0, 0], axis=[ir.Var("x")])


def test_pad_conditions_only_on_padded_dims():
    A = te.placeholder((1, 4, 5, 16), "int8", "A")
    P = te.pad(A, (0, 1, 1, 0), (0, 1, 2, 0), name="P")
    assert P.shape == (1, 6, 8, 16)
    cond = P.op.body.cond
    names = {v.name for v in ir.free_vars(cond)}
    assert names == {"i1", "i2"}
    assert P.op.body.false_value == ir.IntImm(0, "int8")


# ---- schedule primitives ------------------------------------------------------------------------
def _two_stage():
    A = te.placeholder((4, 32, 16), "int32", "A")
    B = te.compute(A.shape, lambda x, y, z: A[x, y, z] + 1, "B")
    C = te.compute(A.shape, lambda x, y, z: B[x, y, z] * 2, "C")
    return A, B, C, te.create_schedule(C.op)          # TVM's spelling; same as schedule.create_schedule


def test_split_tile_reorder_fuse():
    A, B, C, s = _two_stage()
    x, y, z = s[C].op.axis
    yo, yi = s[C].split(y, factor=8)
    assert (yo.name, yi.name) == ("y.outer", "y.inner")
    xo, xi = s[C].split(x, nparts=2)
    assert [v.name for v in s[C].leaf_iter_vars] == ["x.outer", "x.inner", "y.outer", "y.inner", "z"]
    s[C].reorder(yo, xo)
    assert [v.name for v in s[C].leaf_iter_vars] == ["y.outer", "x.inner", "x.outer", "y.inner", "z"]
    f = s[C].fuse(yi, z)
    assert f.name == "y.inner.z.fused" and s[C].leaf_iter_vars[-1] is f
    bx, by, bz = s[B].op.axis
    t = s[B].tile(bx, by, 2, 4)
    assert [v.name for v in s[B].leaf_iter_vars] == ["x.outer", "y.outer", "x.inner", "y.inner", "z"]
    assert list(t) == s[B].leaf_iter_vars[:4]


def test_primitive_errors_name_stage_axis_and_rule():
    A, B, C, s = _two_stage()
    x, y, z = s[C].op.axis
    bx = s[B].op.axis[0]
    with pytest.raises(ScheduleError, match=r"split of `C`: axis `x` is not an axis of `C` \(leaf axes: x, y, z\)"):
        s[C].split(bx, factor=2)
    s[C].split(y, factor=4)
    with pytest.raises(ScheduleError, match="split of `C`: axis `y` was already split or fused"):
        s[C].split(y, factor=2)
    with pytest.raises(ScheduleError, match="reorder of `C`: an axis is given twice"):
        s[C].reorder(x, x)
    with pytest.raises(ScheduleError, match="fuse of `C`: `x` and `z` must be adjacent"):
        s[C].fuse(x, z)
    with pytest.raises(ScheduleError, match="give exactly one of factor and nparts"):
        s[C].split(z, factor=2, nparts=2)
    with pytest.raises(ScheduleError, match="the factor must be a positive integer"):
        s[C].split(z, factor=0)
    with pytest.raises(ScheduleError, match="set_scope of `B`: unknown scope 'local.foo'"):
        s[B].set_scope("local.foo")
    with pytest.raises(ScheduleError, match="compute_at of `B`: a stage cannot be computed inside its own loop"):
        s[B].compute_at(s[B], bx)
    with pytest.raises(ScheduleError, match="compute_at of `B`: `x` is not an axis of `C`"):
        s[B].compute_at(s[C], bx)
    with pytest.raises(ScheduleError, match="compute_at of `B`: `A` is a placeholder"):
        s[B].compute_at(s[A], y)
    with pytest.raises(ScheduleError, match="split of `A`: it is a placeholder"):
        s[A].split(x, factor=2)
    with pytest.raises(ScheduleError, match="bind of `C` at `z`: thread tag 'threadIdx.x'"):
        s[C].bind(z, te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match="tensorize of `C` at `z`: 1 axes from `z` inward"):
        s[C].tensorize(z, Environment().gemm)
    with pytest.raises(ScheduleError, match="compute_inline of `C`: it is an output"):
        s[C].compute_inline()


def test_cache_read_and_write_rewrite_the_stage_bodies():
    A, B, C, s = _two_stage()
    Ab = s.cache_read(A, ir.SCOPE_ACC, [B])
    assert Ab.name == "A.local.acc_buffer" and s[Ab].scope == ir.SCOPE_ACC
    assert [r.tensor for r in te.reads_of(s[B].body)] == [Ab]
    assert B.op.body.a.tensor is A                       # the user's op is left alone
    names = [st.name for st in s.stages]
    assert names == ["A", "A.local.acc_buffer", "B", "C"]
    Cl = s.cache_write(C, ir.SCOPE_ACC)
    assert [st.name for st in s.stages] == ["A", "A.local.acc_buffer", "B", "C.local.acc_buffer", "C"]
    assert [r.tensor for r in te.reads_of(s[C].body)] == [Cl]
    with pytest.raises(ScheduleError, match="cache_read of `A`: `C` does not read it"):
        s.cache_read(A, ir.SCOPE_ACC, [C])


def test_compute_inline_lowers_into_the_reader():
    from vtasim.compiler.lowering.lower import lower
    A, B, C, s = _two_stage()
    s[B].compute_inline()
    f = lower(s, [A, C])
    text = str(f)
    assert "allocate" not in text and "B[" not in text
    assert "C[" in text and "((A[" in text


def test_mixed_dtypes_need_a_cast_and_threads_bind_once():
    A = te.placeholder((4,), "int8", "A")
    B = te.placeholder((4,), "int32", "B")
    with pytest.raises(te.TEError, match=r"compute `C`: \(A\[i\] \+ B\[i\]\) mixes int8 and int32; cast one side"):
        te.compute((4,), lambda i: A[i] + B[i], "C")
    C = te.compute((4,), lambda i: A[i].astype("int32") + B[i] + 1, "C")
    assert C.dtype == "int32"
    s = te.create_schedule(C.op)
    o, i = s[C].split(s[C].op.axis[0], factor=2)
    tx = te.thread_axis("cthread")
    s[C].bind(o, tx)
    with pytest.raises(ScheduleError, match="the thread axis is already bound to `i.outer`"):
        s[C].bind(i, tx)
