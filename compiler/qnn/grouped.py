"""Host references for grouped, depthwise, dilated and transposed integer convolutions (numpy).

These follow the ONNX/PyTorch definitions directly (NCHW, grouped weights ``(O, C/groups, KH, KW)``,
transposed weights ``(C, O, KH, KW)``) and accumulate in int64 before wrapping to int32 as the
accumulator does; they share no code with the tensor expressions VTA compiles, so they are the
independent side of every comparison.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.qnn.conv import norm_pads, norm_pair
from vtasim.compiler.qnn.errors import QnnError

__all__ = ["conv2d_grouped_int32", "conv2d_transpose_int32"]


def _wrap32(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def conv2d_grouped_int32(a, w, strides=1, pads=0, groups: int = 1, dilations=1, pad_value: int = 0) -> np.ndarray:
    """``out[n, o, y, x] = sum_{c<C/g, r, s} a_pad[n, g(o)*C/g + c, y*sh + r*dh, x*sw + s*dw] * w[o, c, r, s]``
    with ``g(o) = o // (O/groups)``, in int32 (wrapping); ``pads`` as in :func:`vtasim.compiler.qnn.conv2d_int32`."""
    a, w = np.asarray(a), np.asarray(w)
    if a.ndim != 4 or w.ndim != 4:
        raise QnnError(f"conv2d: input {a.shape} and weight {w.shape} must both be 4-d (NCHW, OIHW)")
    n, c, h, wd = a.shape
    o, cpg, kh, kw = w.shape
    if groups < 1 or c % groups or o % groups or cpg * groups != c:
        raise QnnError(f"conv2d: groups = {groups} must divide the {c} input and {o} output channels, and the "
                       f"weight's {cpg} input channels times groups must be {c}")
    sh, sw = norm_pair(strides, "strides")
    dh, dw = norm_pair(dilations, "dilations")
    top, left, bottom, right = norm_pads(pads)
    ap = np.pad(a.astype(np.int64), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=pad_value)
    span_h, span_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if span_h > ap.shape[2] or span_w > ap.shape[3]:
        raise QnnError(f"dilated kernel {span_h}x{span_w} is larger than the padded input {ap.shape[2]}x{ap.shape[3]}")
    oh, ow = (ap.shape[2] - span_h) // sh + 1, (ap.shape[3] - span_w) // sw + 1
    opg = o // groups
    wl = w.astype(np.int64).reshape(groups, opg, cpg, kh, kw)
    out = np.zeros((n, groups, opg, oh, ow), dtype=np.int64)
    for r in range(kh):
        for s in range(kw):
            win = ap[:, :, r * dh:r * dh + sh * (oh - 1) + 1:sh, s * dw:s * dw + sw * (ow - 1) + 1:sw]
            win = win.reshape(n, groups, cpg, oh, ow)
            out += np.einsum("ngchw,goc->ngohw", win, wl[:, :, :, r, s])
    return _wrap32(out.reshape(n, o, oh, ow))


def conv2d_transpose_int32(a, w, strides=1, pads=0) -> np.ndarray:
    """ConvTranspose2d by its scatter definition: every input pixel ``(i, j)`` adds ``a[n, c, i, j] *
    w[c, o, r, s]`` to output ``(i*sh + r - top, j*sw + s - left)``; output ``(H-1)*sh - top - bottom + KH``
    rows (no output padding), in int32 (wrapping)."""
    a, w = np.asarray(a), np.asarray(w)
    if a.ndim != 4 or w.ndim != 4 or a.shape[1] != w.shape[0]:
        raise QnnError(f"conv2d_transpose: input {a.shape} and weight {w.shape} must be NCHW and (C, O, KH, KW)")
    n, c, h, wd = a.shape
    _, o, kh, kw = w.shape
    sh, sw = norm_pair(strides, "strides")
    top, left, bottom, right = norm_pads(pads)
    full = np.zeros((n, o, (h - 1) * sh + kh, (wd - 1) * sw + kw), dtype=np.int64)
    a64, w64 = a.astype(np.int64), w.astype(np.int64)
    for r in range(kh):
        for s in range(kw):
            full[:, :, r:r + sh * (h - 1) + 1:sh, s:s + sw * (wd - 1) + 1:sw] += \
                np.einsum("nchw,co->nohw", a64, w64[:, :, r, s])
    oh, ow = full.shape[2] - top - bottom, full.shape[3] - left - right
    if oh < 1 or ow < 1:
        raise QnnError(f"conv2d_transpose: pads {(top, left, bottom, right)} leave no output")
    return _wrap32(full[:, :, top:top + oh, left:left + ow])
