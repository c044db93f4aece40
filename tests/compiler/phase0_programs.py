"""Phase-0 IR of the TVM VTA tutorials, built by hand exactly as docs/compiler.md describes what
``lower`` produces (loops per leaf axis, allocations at attach points, pragmas, tensorized GEMM uop
pushes).  Each builder returns ``(func, inputs, reference)``: inputs as numpy arrays keyed by the
global buffer name, ``reference(inputs)`` the expected output computed directly in numpy.
"""

from __future__ import annotations

import numpy as np

from compiler import ir
from compiler.ir import (Attr, Allocate, Buffer, Call, Cast, Evaluate, For, Load, Select, Store, Var,
                         seq)
from compiler.passes import Func

ACC, INP, WGT = ir.SCOPE_ACC, ir.SCOPE_INP, ir.SCOPE_WGT


def nest(axes, body_fn, pragma=None):
    """``for v0(e0) for v1(e1) ... body_fn(*vars)`` (optionally under a pragma attr)."""
    vs = [Var(n) for n, _ in axes]
    s = body_fn(*vs)
    for v, (_, e) in zip(reversed(vs), reversed(axes)):
        s = For(v, e, s)
    return Attr(f"pragma_{pragma}", 1, s) if pragma else s


def ptr(buf, off):
    return Call("tvm_access_ptr", (buf, ir.const(off)))


def gemm_uop(acc, acc_off, inp=None, inp_off=0, wgt=None, wgt_off=0, reset=False):
    if reset:
        args = (0, 1, ptr(acc, acc_off), 0, 0, 0, 0, 0)
    else:
        args = (0, 0, ptr(acc, acc_off), ptr(inp, inp_off), ptr(wgt, wgt_off), 0, 0, 0)
    args = tuple(ir.const(a) if isinstance(a, int) else a for a in args)
    return Attr("coproc_scope", 2, Attr("coproc_uop_scope", "VTAPushGEMMOp", Evaluate(Call("vta.uop_push", args))))


def _rng(name):
    import zlib
    return np.random.default_rng(zlib.crc32(name.encode()))


# ---- vector add (spec 3.2) --------------------------------------------------------------------
def vadd(cfg, n=64):
    B, BO = cfg.batch, cfg.block_out
    shape = (1, n, B, BO)
    A = Buffer("A", shape, "int32")
    Bb = Buffer("B", shape, "int32")
    C = Buffer("C", shape, "int8")
    A_buf = Buffer("A_buf", shape, "int32", ACC)
    B_buf = Buffer("B_buf", shape, "int32", ACC)
    C_buf = Buffer("C_buf", shape, "int32", ACC)
    axes = [("i0", 1), ("i1", n), ("i2", B), ("i3", BO)]
    fi = lambda *v: A.flat_index(v)  # noqa: E731  (all four share the shape)
    body = seq(
        nest(axes, lambda *v: Store(A_buf, fi(*v), Load(A, fi(*v))), "dma_copy"),
        nest(axes, lambda *v: Store(B_buf, fi(*v), Load(Bb, fi(*v))), "dma_copy"),
        nest(axes, lambda *v: Store(C_buf, fi(*v), Load(A_buf, fi(*v)) + Load(B_buf, fi(*v))), "alu"),
        nest(axes, lambda *v: Store(C, fi(*v), Cast("int8", Load(C_buf, fi(*v)))), "dma_copy"),
    )
    body = Allocate(A_buf, Allocate(B_buf, Allocate(C_buf, body)))
    rng = _rng("vadd")
    inputs = {"A": rng.integers(-128, 128, shape, dtype=np.int32),
              "B": rng.integers(-128, 128, shape, dtype=np.int32)}
    ref = lambda x: (x["A"] + x["B"]).astype(np.int8)  # noqa: E731
    return Func("vadd", (A, Bb, C), body), inputs, ref


# ---- simple GEMM (spec 3.3) -------------------------------------------------------------------
def gemm_simple(cfg, n=16, m=16):
    """A (1, n, B, BI) x B (m, n, BO, BI) -> C (1, m, B, BO); reduction over ko (n) and ki."""
    Bt, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    A = Buffer("A", (1, n, Bt, BI), "int8")
    W = Buffer("B", (m, n, BO, BI), "int8")
    C = Buffer("C", (1, m, Bt, BO), "int8")
    A_buf = Buffer("A_buf", (1, 1, Bt, BI), "int8", INP)
    B_buf = Buffer("B_buf", (m, 1, BO, BI), "int8", WGT)
    C_buf = Buffer("C_buf", (1, m, Bt, BO), "int32", ACC)
    init = nest([("bo", 1), ("co", m)], lambda bo, co: gemm_uop(C_buf, (bo * m + co) * Bt * BO, reset=True))
    ko = Var("ko")
    load_a = nest([("i0", 1), ("i1", 1), ("i2", Bt), ("i3", BI)],
                  lambda i0, i1, i2, i3: Store(A_buf, A_buf.flat_index((i0, i1, i2, i3)),
                                               Load(A, A.flat_index((i0, ko + i1, i2, i3)))), "dma_copy")
    load_b = nest([("i0", m), ("i1", 1), ("i2", BO), ("i3", BI)],
                  lambda i0, i1, i2, i3: Store(B_buf, B_buf.flat_index((i0, i1, i2, i3)),
                                               Load(W, W.flat_index((i0, ko + i1, i2, i3)))), "dma_copy")
    update = nest([("bo", 1), ("co", m)],
                  lambda bo, co: gemm_uop(C_buf, (bo * m + co) * Bt * BO, A_buf, bo * Bt * BI, B_buf, co * BO * BI))
    loop = For(ko, n, Allocate(A_buf, Allocate(B_buf, seq(load_a, load_b, update))))
    store = nest([("i0", 1), ("i1", m), ("i2", Bt), ("i3", BO)],
                 lambda *v: Store(C, C.flat_index(v), Cast("int8", Load(C_buf, C_buf.flat_index(v)))), "dma_copy")
    body = Allocate(C_buf, seq(init, loop, store))
    rng = _rng("gemm_simple")
    inputs = {"A": rng.integers(-128, 128, A.shape, dtype=np.int8),
              "B": rng.integers(-128, 128, W.shape, dtype=np.int8)}

    def ref(x):
        a = x["A"].astype(np.int32).transpose(0, 2, 1, 3).reshape(Bt, n * BI)
        w = x["B"].astype(np.int32).transpose(0, 2, 1, 3).reshape(m * BO, n * BI)
        c = a @ w.T                                             # (Bt, m*BO)
        return c.reshape(1, Bt, m, BO).transpose(0, 2, 1, 3).astype(np.int8)
    return Func("gemm_simple", (A, W, C), body), inputs, ref
