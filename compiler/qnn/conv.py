"""Integer convolution and dense: the direct int32 reference and the four-term zero-point expansion
of ``qnn.conv2d`` / ``qnn.dense`` (compiler spec 9.5).

With ``A = s_a (QA - z_a)`` and ``W = s_w (QW - z_w)`` the int32 result (scale ``s_a s_w``) is
``T1 - T2 - T3 + T4``: ``T1 = sum QW QA``, ``T2 = z_w sum QA`` (per output position), ``T3 = z_a sum QW``
(per output channel, a compile-time constant), ``T4 = z_a z_w C KH KW``.  The input is padded with
``z_a`` so padded positions contribute zero.  Layout NCHW / OIHW, ``pads = (top, left, bottom, right)``.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.qnn.errors import QnnError

__all__ = ["conv2d_int32", "qconv2d", "dense_int32", "qdense", "conv_out_hw", "conv_acc_bound", "norm_pads", "norm_pair",
           "dense_acc_bound"]


def norm_pair(v, what):
    t = (v, v) if np.isscalar(v) else tuple(v)
    if len(t) != 2 or any(int(e) != e or e < 1 for e in t):
        raise QnnError(f"{what} = {v!r} must be a positive integer or a pair of them")
    return int(t[0]), int(t[1])


def norm_pads(p):
    t = (p,) * 4 if np.isscalar(p) else tuple(p)
    if len(t) == 2:
        t = (t[0], t[1], t[0], t[1])
    if len(t) != 4 or any(int(e) != e or e < 0 for e in t):
        raise QnnError(f"pads = {p!r} must be (top, left, bottom, right) non-negative integers")
    return tuple(int(e) for e in t)


def conv_out_hw(h: int, w: int, kh: int, kw: int, strides, pads, dilations=1) -> tuple[int, int]:
    """Output height and width; a (dilated) kernel larger than the padded input is an error."""
    sh, sw = norm_pair(strides, "strides")
    dh, dw = norm_pair(dilations, "dilations")
    kh, kw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    top, left, bottom, right = norm_pads(pads)
    hp, wp = h + top + bottom, w + left + right
    if kh > hp or kw > wp:
        raise QnnError(f"kernel {kh}x{kw} is larger than the padded input {hp}x{wp}")
    return (hp - kh) // sh + 1, (wp - kw) // sw + 1


def _check_conv(a, w, groups=1):
    if a.ndim != 4 or w.ndim != 4:
        raise QnnError(f"conv2d: input {a.shape} and weight {w.shape} must both be 4-d (NCHW, OIHW)")
    if int(groups) != groups or groups < 1 or w.shape[0] % groups:
        raise QnnError(f"conv2d: groups = {groups!r} must be a positive integer dividing the {w.shape[0]} "
                       f"output channels")
    if a.shape[1] != w.shape[1] * groups:
        raise QnnError(f"conv2d: input has {a.shape[1]} channels, the weight expects {w.shape[1]} x {groups} "
                       f"group(s)")
    for t, n in ((a, "input"), (w, "weight")):
        if t.dtype.kind not in "iub":
            raise QnnError(f"conv2d: {n} dtype {t.dtype} must be an integer type")


def _pad_nchw(a, pads, value):
    top, left, bottom, right = norm_pads(pads)
    return np.pad(a, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def conv2d_int32(a, w, strides=1, pads=0, pad_value: int = 0, dilations=1, groups: int = 1) -> np.ndarray:
    """``sum_{c,r,s} a_pad[n, g*C/G + c, y*sh + r*dh, x*sw + s*dw] * w[o, c, r, s]`` (``g`` the group of
    output channel ``o``) accumulated in int32 (it wraps as the accumulator does); the input padded
    with ``pad_value``."""
    a, w = np.asarray(a), np.asarray(w)
    _check_conv(a, w, groups)
    if groups > 1:
        cg, og = w.shape[1], w.shape[0] // groups
        return np.concatenate([conv2d_int32(a[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], strides, pads,
                                            pad_value, dilations) for g in range(groups)], axis=1)
    sh, sw = norm_pair(strides, "strides")
    dh, dw = norm_pair(dilations, "dilations")
    oh, ow = conv_out_hw(a.shape[2], a.shape[3], w.shape[2], w.shape[3], strides, pads, dilations)
    # float64 (BLAS) is exact while every partial sum is an integer below 2^53; else int64
    big = max(int(np.abs(a).max(initial=0)), abs(int(pad_value))) * int(np.abs(w).max(initial=0)) * w[0].size
    dtype = np.float64 if big < (1 << 53) else np.int64
    ap = _pad_nchw(a.astype(dtype), pads, pad_value)
    n, c = ap.shape[:2]
    o, _, kh, kw = w.shape
    st = ap.strides          # im2col: one matrix product over every window
    win = np.lib.stride_tricks.as_strided(ap, (n, oh, ow, c, kh, kw),
                                          (st[0], st[2] * sh, st[3] * sw, st[1], st[2] * dh, st[3] * dw),
                                          writeable=False)
    out = win.reshape(n * oh * ow, c * kh * kw) @ w.astype(dtype).reshape(o, -1).T
    return np.ascontiguousarray(out.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)).astype(np.int64).astype(np.int32)


def _per_out(z, o, what):
    z = np.asarray(z, dtype=np.int64)
    if z.ndim and z.shape != (o,):
        raise QnnError(f"{what} has shape {z.shape}, a per-channel zero point needs ({o},)")
    return z


def qconv2d(qa, qw, za, zw, strides=1, pads=0, dilations=1, groups: int = 1) -> np.ndarray:
    """``sum (QA - za)(QW - zw)`` as the four-term expansion (int32); ``zw`` scalar or per output channel;
    grouped (``groups`` > 1, depthwise when it equals the channels) and dilated alike."""
    qa, qw = np.asarray(qa), np.asarray(qw)
    _check_conv(qa, qw, groups)
    o, c, kh, kw = qw.shape
    za = int(za)
    zw = _per_out(zw, o, "weight zero point")
    zwb = zw.reshape(1, o, 1, 1) if zw.ndim else zw
    t1 = conv2d_int32(qa, qw, strides, pads, za, dilations, groups).astype(np.int64)
    out = t1
    if np.any(zw != 0):        # T2: the window sums of each output channel's own group of inputs
        ones = np.ones((o, c, kh, kw), dtype=np.int64)
        t2 = conv2d_int32(qa, ones, strides, pads, za, dilations, groups).astype(np.int64)
        out = out - zwb * t2 + za * zwb * (c * kh * kw)
    if za:
        t3 = za * qw.astype(np.int64).sum(axis=(1, 2, 3))
        out = out - t3.reshape(1, o, 1, 1)
    return out.astype(np.int32)


def dense_int32(a, w) -> np.ndarray:
    """``a @ w.T`` (``a`` (N, K), ``w`` (O, K)) accumulated in int32."""
    a, w = np.asarray(a), np.asarray(w)
    if a.ndim != 2 or w.ndim != 2 or a.shape[1] != w.shape[1]:
        raise QnnError(f"dense: input {a.shape} and weight {w.shape} must be (N, K) and (O, K)")
    big = int(np.abs(a).max(initial=0)) * int(np.abs(w).max(initial=0)) * a.shape[1]
    dtype = np.float64 if big < (1 << 53) else np.int64     # float64 BLAS while exact
    return (a.astype(dtype) @ w.astype(dtype).T).astype(np.int64).astype(np.int32)


def qdense(qa, qw, za, zw) -> np.ndarray:
    """``sum_k (QA - za)(QW - zw)`` as the four-term expansion (int32)."""
    qa, qw = np.asarray(qa), np.asarray(qw)
    t1 = dense_int32(qa, qw).astype(np.int64)
    k = qa.shape[1]
    za = int(za)
    zw = _per_out(zw, qw.shape[0], "weight zero point")
    t2 = zw * qa.astype(np.int64).sum(axis=1, keepdims=True)
    t3 = za * qw.astype(np.int64).sum(axis=1)
    t4 = za * zw * k
    return (t1 - t2 - t3 + t4).astype(np.int32)


def _bound(wsum_pos, wsum_neg, za, in_range, bias):
    lo, hi = in_range
    # acc = sum w (a - za) + bias with a in [lo, hi]: each term is largest at one end of the range
    top = wsum_pos * (hi - za) + wsum_neg * (lo - za)
    bot = wsum_pos * (lo - za) + wsum_neg * (hi - za)
    b = np.zeros_like(top) if bias is None else np.asarray(bias, dtype=np.int64)
    return int(max(np.abs(top + b).max(initial=0), np.abs(bot + b).max(initial=0)))


def conv_acc_bound(weight, bias, za, in_range=(-128, 127)) -> int:
    """Largest ``|accumulator|`` (incl. bias) a conv with symmetric int8 ``weight`` (OIHW) can produce for
    inputs in ``in_range`` with zero point ``za`` (padding included: it contributes ``za - za = 0``)."""
    w = np.asarray(weight, dtype=np.int64).reshape(np.shape(weight)[0], -1)
    return _bound(np.where(w > 0, w, 0).sum(1), np.where(w < 0, w, 0).sum(1), int(za), in_range, bias)


def dense_acc_bound(weight, bias, za, in_range=(-128, 127)) -> int:
    """As :func:`conv_acc_bound` for a dense weight (O, K)."""
    return conv_acc_bound(np.asarray(weight)[:, :, None, None], bias, za, in_range)
