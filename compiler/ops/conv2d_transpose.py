"""``conv2d_transpose_packed`` and its schedule: a transposed conv2d on VTA with the zero taps skipped.

TVM's ``conv2d_transpose_packed`` dilates the input with ``STRIDE - 1`` zeros between pixels, pads
it by ``K - 1 - PAD`` and runs a stride-1 convolution with the flipped kernel; a VTA pass then puts
every GEMM uop under a guard so that products with the inserted zeros are not issued.  Here the
skip is in the tensor expression itself: output row ``Y = S*y + p`` only ever meets input rows for
kernel taps ``r = r0(p) + S*a`` (:meth:`Conv2dTranspose.phase_offsets`), so the output is computed
as ``S x S`` phase convolutions over the *un-dilated* input::

    out[n, c, y, p, x, q] = sum_{k_o, a, a2, k_i} xpad[n, k_o, y + a + E(p), x + a2 + E(q), :, k_i]
                                                   * kernel[c, k_o, p, a, q, a2, :, k_i]

with ``E(p)`` affine in ``p`` and the host-side kernel ``(OB, IB, S, K/S, S, K/S, o, i)`` holding
the flipped taps of each phase (:func:`pack_transpose_kernel`).  The output axes ``(y, p)`` and
``(x, q)`` are adjacent, so the 8-D output has exactly the bytes of ``NCHW{b}n{o}c``.  GEMM uops:
``OH * OW * (K/S)^2`` per block pair, ``S^2`` times fewer than the dilated form's ``OH * OW * K^2``.
The input tile carries a halo of ``K/S - 1`` rows plus the phase offsets, padded by the DMA.

Schedule: ``schedule_conv_family`` with roles ``bcypxqBC``; ``tile_h``/``tile_w`` split the phase
rows and columns (``OH/S``, ``OW/S``), both phases stay inside a tile.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.dsl import te
from vtasim.compiler.ops.conv_family import bias_shape, fused_epilogue, schedule_conv_family
from vtasim.compiler.ops.layout import pack_channel_const, pack_nchw, unpack_nchw
from vtasim.compiler.ops.visible_data import visible_conv_inputs

__all__ = ["conv2d_transpose_packed", "fused_conv2d_transpose", "pack_transpose_kernel",
           "unpack_transpose_output", "transpose_program", "transpose_inputs", "ROLES"]

TRANSPOSE_TAG = "packed_conv2d_transpose"
ROLES = "bcypxqBC"


def _pads(wl):
    e = [off for _, off in wl.phase_offsets()]
    lo = max(0, -min(e))
    n_out = wl.oh // wl.stride
    hi_h = max(0, (n_out - 1) + (wl.taps - 1) + max(e) - (wl.h - 1))
    hi_w = max(0, (wl.ow // wl.stride - 1) + (wl.taps - 1) + max(e) - (wl.w - 1))
    return e, lo, hi_h, hi_w


def conv2d_transpose_packed(env, data, kernel, wl, out_dtype=None):
    """The phase form of ``wl`` (a :class:`vtasim.compiler.tuning.workloads.Conv2dTranspose`) over packed ``data``."""
    out_dtype = out_dtype or env.acc_dtype
    e, lo, hi_h, hi_w = _pads(wl)
    e0 = e[0]
    e1 = e[1] - e[0] if wl.stride > 1 else 0
    if lo or hi_h or hi_w:
        data = te.pad(data, (0, 0, lo, lo, 0, 0), (0, 0, hi_h, hi_w, 0, 0), name="data_pad")
    nb, _, _, _, bb, bi = data.shape
    ob, ib, st, na, _, _, bo, _ = kernel.shape
    k_o = te.reduce_axis((0, ib), name="k_o")
    d_i = te.reduce_axis((0, na), name="d_i")
    d_j = te.reduce_axis((0, na), name="d_j")
    k_i = te.reduce_axis((0, bi), name="k_i")
    off = e0 + lo
    return te.compute(
        (nb, ob, wl.oh // st, st, wl.ow // st, st, bb, bo),
        lambda b_o, c_o, i, p, j, q, b_i, c_i: te.sum(
            data[b_o, k_o, i + d_i + p * e1 + off, j + d_j + q * e1 + off, b_i, k_i].astype(out_dtype)
            * kernel[c_o, k_o, p, d_i, q, d_j, c_i, k_i].astype(out_dtype),
            axis=[k_o, d_i, d_j, k_i]),
        name="conv2d_transpose", tag=TRANSPOSE_TAG)


def fused_conv2d_transpose(env, wl):
    """``(data, kernel, bias, output)``: the transposed conv of ``wl`` with the conv2d.* epilogue."""
    data = te.placeholder((wl.batch // env.BATCH, wl.cin // env.BLOCK_IN, wl.h, wl.w, env.BATCH, env.BLOCK_IN),
                          env.inp_dtype, "data")
    kernel = te.placeholder((wl.cout // env.BLOCK_OUT, wl.cin // env.BLOCK_IN, wl.stride, wl.taps, wl.stride,
                             wl.taps, env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, "kernel")
    conv = conv2d_transpose_packed(env, data, kernel, wl)
    bias = te.placeholder(bias_shape(conv.shape, ROLES), env.acc_dtype, "bias")
    return data, kernel, bias, fused_epilogue(env, conv, bias, ROLES)


def pack_transpose_kernel(w: np.ndarray, wl, cfg) -> np.ndarray:
    """IOHW weights ``(CIN, COUT, K, K)`` -> ``(OB, IB, S, K/S, S, K/S, o, i)``: phase ``p``'s tap ``a``
    is the flipped kernel's row ``r0(p) + S*a``."""
    flipped = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)                     # OIHW, flipped
    rows = np.array([[r0 + wl.stride * a for a in range(wl.taps)] for r0, _ in wl.phase_offsets()])
    ph = flipped[:, :, rows][:, :, :, :, rows]                              # O, I, S, T, S, T
    o, i = ph.shape[:2]
    ph = ph.reshape(o // cfg.block_out, cfg.block_out, i // cfg.block_in, cfg.block_in, *ph.shape[2:])
    return np.ascontiguousarray(ph.transpose(0, 2, 4, 5, 6, 7, 1, 3)).astype(np.int8)


def unpack_transpose_output(y: np.ndarray) -> np.ndarray:
    """``(N/b, OB, OH/S, S, OW/S, S, b, o)`` -> NCHW."""
    nb, ob, yo, st, xo, _, bb, bo = y.shape
    return unpack_nchw(y.reshape(nb, ob, yo * st, xo * st, bb, bo))


def pack_transpose_inputs(env, wl, x, w, bias) -> dict:
    """The placeholders' arrays (data, kernel, bias) from NCHW ``x``, IOHW ``w`` and (COUT,) ``bias``."""
    b = pack_channel_const(bias.astype(np.int32), env.BATCH, env.BLOCK_OUT)     # (1, OB, 1, 1, b, o)
    b8 = b.reshape(1, b.shape[1], 1, 1, 1, 1, env.BATCH, env.BLOCK_OUT)
    return {"data": pack_nchw(x, env.BATCH, env.BLOCK_IN), "kernel": pack_transpose_kernel(w, wl, env.cfg),
            "bias": np.ascontiguousarray(b8)}


def transpose_inputs(env, wl, seed: int = 0):
    """``(logical, packed)`` inputs: ``x`` NCHW, ``w`` IOHW, ``bias`` (COUT,) drawn by
    :func:`visible_conv_inputs` (``CIN * (K/S)^2`` non-zero products per output)."""
    rng = np.random.default_rng(seed)
    x, w, bias = visible_conv_inputs(rng, (wl.batch, wl.cin, wl.h, wl.w), (wl.cin, wl.cout, wl.k, wl.k), wl.cout,
                                     wl.cin * wl.taps * wl.taps)
    return {"x": x, "w": w, "bias": bias}, pack_transpose_inputs(env, wl, x, w, bias)


def transpose_program(env, wl, knobs: dict, seed: int = 0, logical: dict | None = None):
    """``(schedule, args, packed inputs)`` of a conv2d_transpose; ``logical`` holds ``x`` NCHW, ``w``
    IOHW and ``bias`` (drawn by :func:`transpose_inputs` from ``seed`` when None)."""
    if logical is None:
        logical = transpose_inputs(env, wl, seed)[0]
    data, kernel, bias, out = fused_conv2d_transpose(env, wl)
    packed = pack_transpose_inputs(env, wl, logical["x"], logical["w"], logical["bias"])
    return schedule_conv_family(env, out, knobs, TRANSPOSE_TAG, ROLES), [data, kernel, bias, out], packed
