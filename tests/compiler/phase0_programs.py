"""Phase-0 IR of the TVM VTA tutorials, built by hand exactly as docs/compiler.md describes what
``lower`` produces (loops per leaf axis, allocations at attach points, pragmas, tensorized GEMM uop
pushes).  Each builder returns ``(func, inputs, reference)``: inputs as numpy arrays keyed by the
global buffer name, ``reference(inputs)`` the expected output computed directly in numpy.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.lowering import ir
from vtasim.compiler.lowering.ir import (Attr, Allocate, Buffer, Call, Cast, Evaluate, For, Load, Select, Store, Var,
                         seq)
from vtasim.compiler.ops.data import requant_shift
from vtasim.compiler.lowering.passes import Func

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


def _alu_nest(dst, src, op, shape_axes, imm=None):
    """``dst[i] = op(src[i], imm)`` over the region (same flat index), under an alu pragma."""
    def body(*v):
        idx = dst.flat_index(v)
        x = Load(src, idx)
        val = {">>": lambda: x >> imm, "max": lambda: ir.max_(x, imm), "min": lambda: ir.min_(x, imm),
               "+": lambda: x + imm}[op]()
        return Store(dst, idx, val)
    return nest(shape_axes, body, "alu")


def _requant_ref(acc, shift):
    return np.clip(acc >> shift, 0, 127).astype(np.int8)


# ---- blocked GEMM + ALU (spec 3.4) ----------------------------------------------------------
def gemm_blocked(cfg, in_blocks=64, out_blocks=64, i_block=16, o_block=16):
    """data (1, in_blocks, B, BI) x weight (out_blocks, in_blocks, BO, BI) -> res, then >> s, max 0,
    min 127, int8 (s from the reduction length, vtasim.compiler.ops.data); blocked by i_block / o_block as
    matrix_multiply_opt.py."""
    Bt, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    shift = requant_shift(in_blocks * BI)
    data = Buffer("data", (1, in_blocks, Bt, BI), "int8")
    weight = Buffer("weight", (out_blocks, in_blocks, BO, BI), "int8")
    res = Buffer("res", (1, out_blocks, Bt, BO), "int8")
    region = (1, o_block, Bt, BO)
    res_gemm = Buffer("res_gemm", region, "int32", ACC)
    res_shr = Buffer("res_shr", region, "int32", ACC)
    res_max = Buffer("res_max", region, "int32", ACC)
    res_min = Buffer("res_min", region, "int32", ACC)
    data_buf = Buffer("data_buf", (1, i_block, Bt, BI), "int8", INP)
    weight_buf = Buffer("weight_buf", (o_block, i_block, BO, BI), "int8", WGT)
    oc_out, ic_out = Var("oc_out"), Var("ic_out")
    init = nest([("b", 1), ("oc", o_block)], lambda b, oc: gemm_uop(res_gemm, res_gemm.flat_index((b, oc, 0, 0)), reset=True))
    ld_data = nest([("i0", 1), ("i1", i_block), ("i2", Bt), ("i3", BI)],
                   lambda i0, i1, i2, i3: Store(data_buf, data_buf.flat_index((i0, i1, i2, i3)),
                                                Load(data, data.flat_index((i0, ic_out * i_block + i1, i2, i3)))),
                   "dma_copy")
    ld_wgt = nest([("i0", o_block), ("i1", i_block), ("i2", BO), ("i3", BI)],
                  lambda i0, i1, i2, i3: Store(weight_buf, weight_buf.flat_index((i0, i1, i2, i3)),
                                               Load(weight, weight.flat_index((oc_out * o_block + i0,
                                                                               ic_out * i_block + i1, i2, i3)))),
                  "dma_copy")
    update = nest([("b", 1), ("oc", o_block), ("ic_inn", i_block)],
                  lambda b, oc, ic: gemm_uop(res_gemm, res_gemm.flat_index((b, oc, 0, 0)),
                                             data_buf, data_buf.flat_index((b, ic, 0, 0)),
                                             weight_buf, weight_buf.flat_index((oc, ic, 0, 0))))
    ic_loop = For(ic_out, in_blocks // i_block,
                  Allocate(data_buf, Allocate(weight_buf, seq(ld_data, ld_wgt, update))))
    axes = [("i0", 1), ("i1", o_block), ("i2", Bt), ("i3", BO)]
    alus = seq(_alu_nest(res_shr, res_gemm, ">>", axes, shift),
               _alu_nest(res_max, res_shr, "max", axes, 0),
               _alu_nest(res_min, res_max, "min", axes, 127))
    store = nest([("b_inn", 1), ("oc_inn", o_block)], lambda b, oc: Attr("pragma_dma_copy", 1, nest(
        [("b_tns", Bt), ("oc_tns", BO)],
        lambda bt, ot: Store(res, res.flat_index((b, oc_out * o_block + oc, bt, ot)),
                             Cast("int8", Load(res_min, res_min.flat_index((b, oc, bt, ot))))))))
    block = Allocate(res_gemm, Allocate(res_shr, Allocate(res_max, Allocate(res_min,
                     seq(init, ic_loop, alus, store)))))
    body = For(oc_out, out_blocks // o_block, block)
    rng = _rng("gemm_blocked")
    inputs = {"data": rng.integers(-128, 128, data.shape, dtype=np.int8),
              "weight": rng.integers(-128, 128, weight.shape, dtype=np.int8)}

    def ref(x):
        a = x["data"].astype(np.int32).transpose(0, 2, 1, 3).reshape(Bt, in_blocks * BI)
        w = x["weight"].astype(np.int32).transpose(0, 2, 1, 3).reshape(out_blocks * BO, in_blocks * BI)
        c = (a @ w.T).reshape(1, Bt, out_blocks, BO).transpose(0, 2, 1, 3)
        return _requant_ref(c, shift)
    return Func("gemm_blocked", (data, weight, res), body), inputs, ref


# ---- conv2d with virtual threads (spec 3.5) ---------------------------------------------------
def conv2d_vt(cfg, H=14, W=14, icb=16, ocb=16, oc_block=8, h_block=7, nthreads=2):
    """3x3, pad 1, stride 1 conv in NCHWnc / OIHWoi as convolution_opt.py: w_block = W, ic_block 1,
    oc_out split by ``nthreads`` onto a cthread axis, then >> s (s from the reduction length), max 0,
    min 127, int8."""
    Bt, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    KH = KW = 3
    shift = requant_shift(icb * BI * KH * KW)
    PH = h_block + KH - 1
    PW = W + KW - 1
    data = Buffer("data", (1, icb, H, W, Bt, BI), "int8")
    kernel = Buffer("kernel", (ocb, icb, KH, KW, BO, BI), "int8")
    res = Buffer("res", (1, ocb, H, W, Bt, BO), "int8")
    region = (1, oc_block, h_block, W, Bt, BO)
    res_conv = Buffer("res_conv", region, "int32", ACC)
    res_shr = Buffer("res_shr", region, "int32", ACC)
    res_max = Buffer("res_max", region, "int32", ACC)
    res_min = Buffer("res_min", region, "int32", ACC)
    data_buf = Buffer("data_buf", (1, 1, PH, PW, Bt, BI), "int8", INP)
    kernel_buf = Buffer("kernel_buf", (oc_block, 1, KH, KW, BO, BI), "int8", WGT)
    tx = Var("cthread")
    oc_out, y_out, ic_out = Var("oc_out"), Var("y_out"), Var("ic_out")
    n_oc_out = ocb // oc_block // nthreads
    oc_base = (oc_out * nthreads + tx) * oc_block

    init = nest([("b_inn", 1), ("oc_inn", oc_block), ("y_inn", h_block), ("x_inn", W)],
                lambda b, oc, y, x: gemm_uop(res_conv, res_conv.flat_index((b, oc, y, x, 0, 0)), reset=True))

    def ld_data_body(i0, i1, i2, i3, i4, i5):
        row = y_out * h_block + i2          # row of the padded image
        cond = ir.and_(ir.and_(ir.ge(row, 1), ir.lt(row, H + 1)), ir.and_(ir.ge(i3, 1), ir.lt(i3, W + 1)))
        src = Load(data, data.flat_index((i0, ic_out + i1, row - 1, i3 - 1, i4, i5)))
        return Store(data_buf, data_buf.flat_index((i0, i1, i2, i3, i4, i5)), Select(cond, src, ir.IntImm(0, "int8")))
    ld_data = nest([("i0", 1), ("i1", 1), ("i2", PH), ("i3", PW), ("i4", Bt), ("i5", BI)], ld_data_body, "dma_copy")
    ld_kernel = nest([("i0", oc_block), ("i1", 1), ("i2", KH), ("i3", KW), ("i4", BO), ("i5", BI)],
                     lambda i0, i1, i2, i3, i4, i5: Store(
                         kernel_buf, kernel_buf.flat_index((i0, i1, i2, i3, i4, i5)),
                         Load(kernel, kernel.flat_index((oc_base + i0, ic_out + i1, i2, i3, i4, i5)))), "dma_copy")
    update = nest([("b_inn", 1), ("oc_inn", oc_block), ("y_inn", h_block), ("ic_inn", 1), ("dy", KH), ("dx", KW),
                   ("x_inn", W)],
                  lambda b, oc, y, ic, dy, dx, x: gemm_uop(
                      res_conv, res_conv.flat_index((b, oc, y, x, 0, 0)),
                      data_buf, data_buf.flat_index((b, ic, y + dy, x + dx, 0, 0)),
                      kernel_buf, kernel_buf.flat_index((oc, ic, dy, dx, 0, 0))))
    ic_loop = For(ic_out, icb, Allocate(data_buf, Allocate(kernel_buf, seq(ld_data, ld_kernel, update))))
    axes = [("i0", 1), ("i1", oc_block), ("i2", h_block), ("i3", W), ("i4", Bt), ("i5", BO)]
    alus = seq(_alu_nest(res_shr, res_conv, ">>", axes, shift),
               _alu_nest(res_max, res_shr, "max", axes, 0),
               _alu_nest(res_min, res_max, "min", axes, 127))
    store = nest([("b_inn", 1), ("oc_inn", oc_block), ("y_inn", h_block), ("x_inn", W)],
                 lambda b, oc, y, x: Attr("pragma_dma_copy", 1, nest(
                     [("b_tns", Bt), ("oc_tns", BO)],
                     lambda bt, ot: Store(res, res.flat_index((b, oc_base + oc, y_out * h_block + y, x, bt, ot)),
                                          Cast("int8", Load(res_min, res_min.flat_index((b, oc, y, x, bt, ot))))))))
    tile = Allocate(res_conv, Allocate(res_shr, Allocate(res_max, Allocate(res_min,
                    seq(init, ic_loop, alus, store)))))
    body = For(oc_out, n_oc_out, For(y_out, H // h_block, For(Var("x_out"), 1, tile)))
    body = Attr("virtual_thread", tx, body, extra=nthreads)
    rng = _rng("conv2d_vt")
    inputs = {"data": rng.integers(-128, 128, data.shape, dtype=np.int8),
              "kernel": rng.integers(-128, 128, kernel.shape, dtype=np.int8)}

    def ref(x):
        d = np.pad(x["data"].astype(np.int32), ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0), (0, 0)))
        k = x["kernel"].astype(np.int32)
        out = np.zeros(res.shape, np.int64)
        for dy in range(KH):
            for dx in range(KW):
                win = d[:, :, dy:dy + H, dx:dx + W]                      # (1, icb, H, W, Bt, BI)
                out += np.einsum("nchwbk,ocjk->nohwbj", win, k[:, :, dy, dx], optimize=True)
        return _requant_ref(out.astype(np.int32), shift)
    return Func("conv2d_vt", (data, kernel, res), body), inputs, ref


# ---- end to end -----------------------------------------------------------------------------------
def build_image(func, inputs, ref, cfg, lowered=None):
    """Passes + codegen into a fresh CommandQueue; returns ``(image, output name, expected bytes)``."""
    from vtasim.compiler.lowering.codegen import emit
    from vtasim.compiler.lowering.passes import run_passes
    from vtasim.compiler.runtime import CommandQueue

    lowered = lowered if lowered is not None else run_passes(func, cfg)
    q = CommandQueue(cfg, name=func.name)
    bufs, out = {}, None
    for a in func.args:
        if a.name in inputs:
            bufs[a] = q.alloc_input(a.name, inputs[a.name])
        else:
            bufs[a] = q.alloc_output(a.name, a.size * np.dtype(a.dtype).itemsize)
            out = a
    want = ref(inputs).tobytes()
    q.expect(out.name, want)
    emit(lowered, q, bufs)
    return q.build(), out.name, want


# ---- two nested virtual threads (the conv2d_packed oc_nthread x h_nthread case) ----------------
def vadd_nested_vt(cfg, n=4, shift=1, alu=True):
    """C = int8((A + B) >> shift) in 4 chunks of ``n`` elements, one per thread of two nested cthread
    axes (tx outer, ty inner); each thread loads, adds, shifts and stores its own chunk.  With
    ``alu=False`` only the copy C = int8(A) (DMA only: ALU kernels under two thread loops depend on
    two variables, which the runtime's kernel cache refuses, spec 5.2)."""
    Bt, BO = cfg.batch, cfg.block_out
    shape = (4 * n, Bt, BO)
    A = Buffer("A", shape, "int32")
    Bb = Buffer("B", shape, "int32")
    C = Buffer("C", shape, "int8")
    tile = (n, Bt, BO)
    A_buf = Buffer("A_buf", tile, "int32", ACC)
    B_buf = Buffer("B_buf", tile, "int32", ACC)
    S_buf = Buffer("S_buf", tile, "int32", ACC)
    C_buf = Buffer("C_buf", tile, "int32", ACC)
    tx, ty = Var("tx"), Var("ty")
    chunk = tx * 2 + ty
    axes = [("i", n), ("b", Bt), ("k", BO)]
    g = lambda i, b, k: A.flat_index((chunk * n + i, b, k))  # noqa: E731
    t = lambda i, b, k: A_buf.flat_index((i, b, k))  # noqa: E731
    if alu:
        body = seq(
            nest(axes, lambda *v: Store(A_buf, t(*v), Load(A, g(*v))), "dma_copy"),
            nest(axes, lambda *v: Store(B_buf, t(*v), Load(Bb, g(*v))), "dma_copy"),
            nest(axes, lambda *v: Store(S_buf, t(*v), Load(A_buf, t(*v)) + Load(B_buf, t(*v))), "alu"),
            nest(axes, lambda *v: Store(C_buf, t(*v), Load(S_buf, t(*v)) >> shift), "alu"),
            nest(axes, lambda *v: Store(C, g(*v), Cast("int8", Load(C_buf, t(*v)))), "dma_copy"),
        )
        body = Allocate(A_buf, Allocate(B_buf, Allocate(S_buf, Allocate(C_buf, body))))
    else:
        body = seq(
            nest(axes, lambda *v: Store(B_buf, t(*v), Load(Bb, g(*v))), "dma_copy"),
            nest(axes, lambda *v: Store(A_buf, t(*v), Load(A, g(*v))), "dma_copy"),
            nest(axes, lambda *v: Store(C, g(*v), Cast("int8", Load(A_buf, t(*v)))), "dma_copy"),
        )
        body = Allocate(B_buf, Allocate(A_buf, body))
    body = Attr("virtual_thread", tx, Attr("virtual_thread", ty, body, extra=2), extra=2)
    rng = _rng("vadd_nested_vt")
    inputs = {"A": rng.integers(-3000, 3000, shape, dtype=np.int32),
              "B": rng.integers(-3000, 3000, shape, dtype=np.int32)}
    ref = (lambda x: ((x["A"] + x["B"]) >> shift).astype(np.int8)) if alu else (lambda x: x["A"].astype(np.int8))
    return Func("vadd_nested_vt", (A, Bb, C), body), inputs, ref
