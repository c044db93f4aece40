"""Transposed 2-D convolution (ONNX ``ConvTranspose``; DCGAN-style upsampling), float and integer.

Each input pixel scatters ``x[n, c, h, w] * W[c, m, r, s]`` onto the output position
``(h*sh + r*dh, w*sw + s*dw)`` of the full output, which is then cropped by ``pads`` (and grown by
``output_padding`` at the end).  Weights are ONNX's ``(C, M/group, KH, KW)``.  The integer form
``qconv2d_transpose`` is exact: there is no input padding, so the zero points subtract before the
products and every partial sum is an integer below 2^53 in float64.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.qnn.conv import norm_pads, norm_pair
from vtasim.compiler.qnn.errors import QnnError

__all__ = ["conv_transpose_out_hw", "conv_transpose2d", "qconv2d_transpose"]


def conv_transpose_out_hw(h, w, kh, kw, strides, pads, dilations=1, output_padding=0) -> tuple[int, int]:
    sh, sw = norm_pair(strides, "strides")
    dh, dw = norm_pair(dilations, "dilations")
    oph, opw = (output_padding, output_padding) if np.isscalar(output_padding) else tuple(output_padding)
    if not (0 <= oph < max(sh, dh) and 0 <= opw < max(sw, dw)):
        raise QnnError(f"output_padding {output_padding!r} must be below the stride or the dilation")
    t, l, b, r = norm_pads(pads)
    oh = sh * (h - 1) + oph + (kh - 1) * dh + 1 - t - b
    ow = sw * (w - 1) + opw + (kw - 1) * dw + 1 - l - r
    if oh < 1 or ow < 1:
        raise QnnError(f"pads {pads!r} remove the whole {oh}x{ow} output")
    return oh, ow


def conv_transpose2d(x, w, strides=1, pads=0, dilations=1, output_padding=0, groups: int = 1,
                     dtype=np.float32) -> np.ndarray:
    """``ConvTranspose`` of ``x`` (N, C, H, W) with ``w`` (C, M/groups, KH, KW), computed in ``dtype``."""
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim != 4 or w.ndim != 4:
        raise QnnError(f"conv_transpose2d: input {x.shape} and weight {w.shape} must both be 4-d (NCHW, CMHW)")
    if int(groups) != groups or groups < 1 or x.shape[1] % groups or x.shape[1] != w.shape[0]:
        raise QnnError(f"conv_transpose2d: {x.shape[1]} input channels, weight {w.shape}, groups {groups}: "
                       f"the weight needs one row per input channel and the groups must divide them")
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    sh, sw = norm_pair(strides, "strides")
    dh, dw = norm_pair(dilations, "dilations")
    oh, ow = conv_transpose_out_hw(h, wd, kh, kw, strides, pads, dilations, output_padding)
    t, l, b, r = norm_pads(pads)
    fh, fw = oh + t + b, ow + l + r                    # the full output before the crop
    full = np.zeros((n, mg * groups, fh, fw), dtype)
    cg = c // groups
    xd, wt = x.astype(dtype), w.astype(dtype)
    for g in range(groups):
        xg = xd[:, g * cg:(g + 1) * cg].transpose(0, 2, 3, 1)           # (N, H, W, Cg)
        for i in range(kh):
            for j in range(kw):
                contrib = (xg @ wt[g * cg:(g + 1) * cg, :, i, j]).transpose(0, 3, 1, 2)   # (N, Mg, H, W)
                full[:, g * mg:(g + 1) * mg, i * dh:i * dh + sh * (h - 1) + 1:sh,
                     j * dw:j * dw + sw * (wd - 1) + 1:sw] += contrib
    return np.ascontiguousarray(full[:, :, t:t + oh, l:l + ow])


def qconv2d_transpose(qa, qw, za, zw, strides=1, pads=0, dilations=1, output_padding=0, groups: int = 1):
    """``sum (QA - za)(QW - zw)`` of the transposed convolution, int32; ``zw`` scalar or per output channel."""
    qa, qw = np.asarray(qa), np.asarray(qw)
    zw = np.asarray(zw, np.int64)
    m = qw.shape[1] * groups
    if zw.ndim and zw.shape != (m,):
        raise QnnError(f"weight zero point has shape {zw.shape}, a per-channel zero point needs ({m},)")
    wz = np.broadcast_to(zw.reshape(groups, -1, 1, 1) if zw.ndim else zw, (groups, qw.shape[1], 1, 1))
    w = qw.astype(np.int64).reshape(groups, -1, *qw.shape[1:]) - wz[:, None]
    big = 255 * 255 * qw.shape[0] * qw.shape[2] * qw.shape[3]
    dtype = np.float64 if big < (1 << 53) else np.int64
    out = conv_transpose2d(qa.astype(np.int64) - int(za), w.reshape(qw.shape), strides, pads, dilations,
                           output_padding, groups, dtype)
    return out.astype(np.int64).astype(np.int32)
