"""Operators that move or select quantised values without requantising them (same scale and zero point
in and out): pad with the zero point, ReLU and Clip against it, max pooling."""

from __future__ import annotations

import numpy as np

from vtasim.compiler.qnn.conv import norm_pads, norm_pair, conv_out_hw
from vtasim.compiler.qnn.errors import QnnError, check_zero_point, dtype_range
from vtasim.compiler.qnn.quantize import quantize

__all__ = ["pad_q", "relu_q", "clip_q", "maxpool_q"]


def _int_tensor(x, what):
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise QnnError(f"{what}: dtype {x.dtype} must be an integer type")
    return x


def pad_q(x, pads, zp) -> np.ndarray:
    """NCHW ``x`` padded spatially by ``(top, left, bottom, right)`` with the zero point (a real 0)."""
    x = _int_tensor(x, "pad_q")
    z = int(check_zero_point(zp, x.dtype.name, "pad_q zero point"))
    top, left, bottom, right = norm_pads(pads)
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=z)


def relu_q(x, zp) -> np.ndarray:
    """``max(x, zp)``: quantised ReLU."""
    x = _int_tensor(x, "relu_q")
    z = check_zero_point(zp, x.dtype.name, "relu_q zero point")
    return np.maximum(x, z.astype(x.dtype))


def clip_q(x, lo, hi, scale, zp) -> np.ndarray:
    """Clip to the real interval ``[lo, hi]`` (None = unbounded), bounds quantised with ``x``'s params."""
    x = _int_tensor(x, "clip_q")
    dt = x.dtype.name
    dlo, dhi = dtype_range(dt)
    if lo is not None and hi is not None and lo > hi:
        raise QnnError(f"clip_q: lo = {lo} is above hi = {hi}")
    qlo = dlo if lo is None else int(quantize(np.float64(lo), scale, zp, dt))
    qhi = dhi if hi is None else int(quantize(np.float64(hi), scale, zp, dt))
    return np.clip(x, qlo, qhi).astype(x.dtype)


def maxpool_q(x, kernel, strides=None, pads=0) -> np.ndarray:
    """NCHW max pooling; padded positions never win (they hold the dtype's minimum)."""
    x = _int_tensor(x, "maxpool_q")
    kh, kw = norm_pair(kernel, "maxpool kernel")
    sh, sw = norm_pair(strides if strides is not None else (kh, kw), "maxpool strides")
    oh, ow = conv_out_hw(x.shape[2], x.shape[3], kh, kw, (sh, sw), pads)
    top, left, bottom, right = norm_pads(pads)
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=dtype_range(x.dtype.name)[0])
    out = None
    for r in range(kh):
        for s in range(kw):
            win = xp[:, :, r:r + sh * (oh - 1) + 1:sh, s:s + sw * (ow - 1) + 1:sw]
            out = win.copy() if out is None else np.maximum(out, win)
    return out
