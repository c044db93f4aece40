"""Host (CPU) execution of every graph op in numpy: the float ONNX ops, the quantise/dequantise ops
and the composite quantised ops in exact integer arithmetic (:mod:`vtasim.compiler.qnn`).

``run_host(node, args) -> list of outputs``; ``args`` are the input arrays in order (``None`` for an
absent optional input).  Integer convolutions and products are computed in float64 where every
partial sum is an integer below 2^53 (8-bit operands, fewer than 2^37 terms), so they are exact.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler import qnn
from vtasim.compiler.frontend.composite import act_limits, out_limits
from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.fastmath import fast_erf, fast_exp, fast_tanh
from vtasim.compiler.frontend.host_tensor import TENSOR_OPS
from vtasim.compiler.frontend.shape_ops import SHAPE_OPS

__all__ = ["run_host", "conv2d", "pool2d", "requantize_acc", "qconv_acc", "qdense_acc", "softmax"]


def _pad4(x, pads, value=0):
    t, l, b, r = pads
    if not any(pads):
        return x
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def _windows(x, kh, kw, sh, sw, dh=1, dw=1):
    """(N, C, OH, OW, KH, KW) strided view of x (N, C, H, W); taps ``dh``/``dw`` apart (dilation)."""
    n, c, h, w = x.shape
    oh, ow = (h - (kh - 1) * dh - 1) // sh + 1, (w - (kw - 1) * dw - 1) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(x, (n, c, oh, ow, kh, kw),
                                           (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw), writeable=False)


def conv2d(x, w, strides, pads, pad_value=0, dtype=np.float32, dilations=(1, 1), groups=1):
    """Direct NCHW conv as one matrix product over the windows per group, computed in ``dtype``."""
    if groups > 1:
        cg, og = w.shape[1], w.shape[0] // groups
        return np.concatenate([conv2d(x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], strides, pads, pad_value,
                                      dtype, dilations) for g in range(groups)], axis=1)
    xp = _pad4(np.asarray(x), pads, pad_value)
    o, _, kh, kw = w.shape
    win = _windows(xp.astype(dtype, copy=False), kh, kw, *strides, *dilations)
    n, c, oh, ow = win.shape[:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    out = cols @ w.reshape(o, -1).astype(dtype).T
    return np.ascontiguousarray(out.reshape(n, oh, ow, o).transpose(0, 3, 1, 2))


def _ceil_extra(n, k, s, lo, hi):
    """Extra padding at the end so that ceil_mode's last window exists (it must start inside the input or
    its leading padding, as ONNX says)."""
    out = -(-(n + lo + hi - k) // s) + 1
    if (out - 1) * s >= n + lo:
        out -= 1
    return max(0, (out - 1) * s + k - (n + lo + hi))


def pool2d(x, kernel, strides, pads, kind, count_include_pad=0, ceil_mode=0):
    kh, kw = kernel
    t, l, b, r = pads
    eb = _ceil_extra(x.shape[2], kh, strides[0], t, b) if ceil_mode else 0
    er = _ceil_extra(x.shape[3], kw, strides[1], l, r) if ceil_mode else 0
    if kind == "max":
        fill = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
        return _windows(_pad4(x, (t, l, b + eb, r + er), fill), kh, kw, *strides).max(axis=(4, 5))
    xf = x.astype(np.float64)
    s = _windows(_pad4(xf, (t, l, b + eb, r + er)), kh, kw, *strides).sum(axis=(4, 5))
    if (count_include_pad or not any(pads)) and not (eb or er):
        cnt = kh * kw
    else:             # the ceil_mode cells past the declared padding never count
        ones = np.ones((1, 1) + x.shape[2:]) if not count_include_pad else np.ones((1, 1, x.shape[2] + t + b,
                                                                                    x.shape[3] + l + r))
        inner = (t, l, b + eb, r + er) if not count_include_pad else (0, 0, eb, er)
        cnt = _windows(_pad4(ones, inner), kh, kw, *strides).sum(axis=(4, 5))
    return (s / cnt).astype(x.dtype)


def qconv_acc(node, x) -> np.ndarray:
    """The int32 accumulator of a ``qconv`` (four-term expansion) plus its bias."""
    a = node.attrs
    acc = qnn.qconv2d(x, a["weight"], a["x_zp"], a["w_zp"], a["strides"], a["pads"], a.get("dilations", 1),
                      a.get("group", 1)).astype(np.int64)
    if a["bias"] is not None:
        acc += a["bias"].reshape(1, -1, 1, 1)
    return acc


def qconv_transpose_acc(node, x) -> np.ndarray:
    a = node.attrs
    acc = qnn.qconv2d_transpose(x, a["weight"], a["x_zp"], a["w_zp"], a["strides"], a["pads"], a["dilations"],
                                a["output_padding"], a["group"]).astype(np.int64)
    if a["bias"] is not None:
        acc += a["bias"].reshape(1, -1, 1, 1)
    return acc


def _conv_transpose_float(node, x, w, b=None):
    at = node.attrs
    y = qnn.conv_transpose2d(x, w, at.get("strides", [1, 1]), _attr_pads(at), at.get("dilations", [1, 1]),
                             at.get("output_padding", [0, 0]), int(at.get("group", 1)), np.float32)
    return y + b.reshape(1, -1, 1, 1) if b is not None else y


def qdense_acc(node, x) -> np.ndarray:
    a = node.attrs
    acc = qnn.qdense(x, a["weight"], a["x_zp"], a["w_zp"]).astype(np.int64)
    if a["bias"] is not None:
        acc += a["bias"].reshape(1, -1)
    return acc


def requantize_acc(node, acc, in_scale, axis=1) -> np.ndarray:
    """int32 accumulator (scale ``in_scale``, zero point 0) -> the node's output type, activation applied."""
    a = node.attrs
    y = qnn.requantize(acc, in_scale, 0, a["y_scale"], a["y_zp"], out_dtype="int32", axis=axis)
    lo, hi = (_axis_shape(y, axis, v) for v in out_limits(a))
    return np.clip(y, lo, hi).astype(a["y_dtype"])


def _q_out_scale(node):
    a = node.attrs
    return np.asarray(a["x_scale"], np.float64) * np.asarray(a["w_scale"], np.float64)


def _attr_pads(attrs, nd=2):
    return list(attrs.get("pads", [0] * (2 * nd)))


def _clip_bounds(node, args):
    lo = args[1] if len(args) > 1 and args[1] is not None else node.attrs.get("min", None)
    hi = args[2] if len(args) > 2 and args[2] is not None else node.attrs.get("max", None)
    return lo, hi


def _reshape(x, shape, allowzero=0):
    shape = [int(s) for s in shape]
    out = [x.shape[k] if (s == 0 and not allowzero) else s for k, s in enumerate(shape)]
    return x.reshape(out)


def _gemm(node, a, b, c):
    at = node.attrs
    a = a.T if at.get("transA", 0) else a
    b = b.T if at.get("transB", 0) else b
    y = at.get("alpha", 1.0) * (a.astype(np.float32) @ b.astype(np.float32))
    if c is not None:
        y = y + at.get("beta", 1.0) * c
    return y.astype(np.float32)


def _bn(node, x, scale, bias, mean, var):
    eps = node.attrs.get("epsilon", 1e-5)
    k = (scale / np.sqrt(var + eps)).astype(np.float32)
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return (x * k.reshape(sh) + (bias - mean * k).reshape(sh)).astype(np.float32)


def _axis_shape(q, axis, v):
    v = np.asarray(v)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    sh = [1] * q.ndim
    sh[axis] = -1
    return v.reshape(sh)


def _quantize(node, x, scale, zp):
    axis = node.attrs.get("axis", 1)
    dtype = zp.dtype if zp is not None else np.uint8
    zp = zp if zp is not None else np.zeros((), dtype)
    return qnn.quantize(x, _axis_shape(x, axis, scale), _axis_shape(x, axis, zp).astype(np.int64), dtype)


def _dequantize(node, q, scale, zp):
    axis = node.attrs.get("axis", 1)
    zp = zp if zp is not None else np.zeros((), q.dtype)
    if q.dtype == np.int32:                       # int32 biases: zero point must be 0
        return (q.astype(np.float64) * _axis_shape(q, axis, scale)).astype(np.float32)
    return qnn.dequantize(q, _axis_shape(q, axis, scale), _axis_shape(q, axis, zp).astype(np.int64))


def _requant_float(node, real):
    """Real values -> the node's output type as onnxruntime's QLinear ops do: one float64 rounding
    (half to even), zero point, activation, saturation."""
    at = node.attrs
    lo, hi = act_limits(at.get("act"), at["y_scale"], at["y_zp"], at["y_dtype"])
    q = np.rint(real / at["y_scale"]) + at["y_zp"]
    return np.clip(q, lo, hi).astype(at["y_dtype"])


def _qadd(node, a, b):
    at = node.attrs
    real = at["a_scale"] * (a.astype(np.float64) - at["a_zp"]) + at["b_scale"] * (b.astype(np.float64) - at["b_zp"])
    return _requant_float(node, real)


def _qmul(node, a, b):
    at = node.attrs
    real = (at["a_scale"] * (a.astype(np.float64) - at["a_zp"])) * (at["b_scale"] * (b.astype(np.float64) - at["b_zp"]))
    return _requant_float(node, real)


def _qgap(node, x):
    at = node.attrs
    return _requant_float(node, at["x_scale"] * (x.astype(np.float64) - at["x_zp"]).mean(axis=(2, 3), keepdims=True))


def _conv_float(node, x, w, b):
    at = node.attrs
    if x.dtype.kind != "f":
        raise FrontendError(f"{node.where}: Conv on {x.dtype.name} input (a float Conv needs float input)")
    y = conv2d(x, w, at.get("strides", [1, 1]), _attr_pads(at), dtype=np.float32,
               dilations=at.get("dilations", [1, 1]), groups=int(at.get("group", 1)))
    return y + b.reshape(1, -1, 1, 1) if b is not None else y


def _int_zp(node, z, what):
    """A zero point input as int (scalar or one-element) or int64 array (per channel)."""
    if z is None:
        return 0
    z = np.asarray(z).astype(np.int64)
    if z.size == 1:
        return int(z.reshape(-1)[0])
    if z.ndim != 1:
        raise FrontendError(f"{node.where}: {what} of shape {z.shape} (a scalar or a 1-D per-channel vector)")
    return z


def _conv_integer(node, x, w, xz, wz):
    at = node.attrs
    xz = _int_zp(node, xz, "x_zero_point")
    if np.ndim(xz):
        raise FrontendError(f"{node.where}: x_zero_point of shape {np.shape(xz)} (ConvInteger takes one per tensor)")
    return qnn.qconv2d(x, w, xz, _int_zp(node, wz, "w_zero_point"), at.get("strides", [1, 1]),
                       _attr_pads(at), at.get("dilations", [1, 1]), int(at.get("group", 1))).astype(np.int32)


def _matmul_integer(node, a, b, az, bz):
    """Exact in int64: a_zero_point per tensor or per row of A, b_zero_point per tensor or per column of B;
    the int32 result wraps as the accumulator does."""
    az, bz = _int_zp(node, az, "a_zero_point"), _int_zp(node, bz, "b_zero_point")
    if np.ndim(az):
        az = np.reshape(az, (-1, 1))
    return ((a.astype(np.int64) - az) @ (b.astype(np.int64) - bz)).astype(np.int32)


def softmax(x, axis, coerce_2d=0, exp=np.exp):
    """``exp``: :func:`vtasim.compiler.frontend.fastmath.fast_exp` for ``fast_softmax``."""
    if coerce_2d:                # opset < 13: over every axis from `axis` on, as one row per leading index
        axis = axis % max(x.ndim, 1)
        return softmax(x.reshape(int(np.prod(x.shape[:axis])), -1), 1, exp=exp).reshape(x.shape)
    e = exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


_HOST = {
    "Relu": lambda n, x: np.maximum(x, 0).astype(x.dtype),
    "Clip": lambda n, x, *r: np.clip(x, *_clip_bounds(n, (x,) + r)).astype(x.dtype),
    "Add": lambda n, a, b: (a + b).astype(np.result_type(a, b)),
    "Sub": lambda n, a, b: (a - b).astype(np.result_type(a, b)),
    "Mul": lambda n, a, b: (a * b).astype(np.result_type(a, b)),
    "Sigmoid": lambda n, x: (1 / (1 + np.exp(-x))).astype(np.float32),
    "Tanh": lambda n, x: np.tanh(x).astype(np.float32),
    "Exp": lambda n, x: np.exp(x).astype(x.dtype),
    "HardSigmoid": lambda n, x: np.clip(n.attrs.get("alpha", 0.2) * x + n.attrs.get("beta", 0.5), 0, 1).astype(
        np.float32),
    "HardSwish": lambda n, x: (x * np.clip(x / 6 + 0.5, 0, 1)).astype(np.float32),
    "Softmax": lambda n, x: softmax(x, n.attrs.get("axis", -1), n.attrs.get("coerce_2d", 0)),
    "Identity": lambda n, x: x,
    "Dropout": lambda n, x, *r: x,
    "Cast": lambda n, x: x.astype(_cast_type(n)),
    "Flatten": lambda n, x: x.reshape(int(np.prod(x.shape[:n.attrs.get("axis", 1)])), -1),
    "Reshape": lambda n, x, s: _reshape(x, s, n.attrs.get("allowzero", 0)),
    "Concat": lambda n, *xs: np.concatenate(xs, axis=n.attrs["axis"]),
    "MaxPool": lambda n, x: pool2d(x, n.attrs["kernel_shape"], n.attrs.get("strides", [1, 1]), _attr_pads(n.attrs),
                                   "max", ceil_mode=n.attrs.get("ceil_mode", 0)),
    "AveragePool": lambda n, x: pool2d(x, n.attrs["kernel_shape"], n.attrs.get("strides", [1, 1]),
                                       _attr_pads(n.attrs), "avg", n.attrs.get("count_include_pad", 0),
                                       n.attrs.get("ceil_mode", 0)),
    "GlobalAveragePool": lambda n, x: x.mean(axis=(2, 3), keepdims=True, dtype=np.float64).astype(x.dtype),
    "BatchNormalization": lambda n, x, s, b, m, v: _bn(n, x, s, b, m, v),
    "Conv": lambda n, x, w, b=None: _conv_float(n, x, w, b),
    "Gemm": lambda n, a, b, c=None: _gemm(n, a, b, c),
    "MatMul": lambda n, a, b: (a.astype(np.float32) @ b.astype(np.float32)),
    "QuantizeLinear": lambda n, x, s, z=None: _quantize(n, x, s, z),
    "DequantizeLinear": lambda n, q, s, z=None: _dequantize(n, q, s, z),
    "ConvInteger": lambda n, x, w, xz=None, wz=None: _conv_integer(n, x, w, xz, wz),
    "MatMulInteger": lambda n, a, b, az=None, bz=None: _matmul_integer(n, a, b, az, bz),
    "qconv": lambda n, x: requantize_acc(n, qconv_acc(n, x), _q_out_scale(n)),
    "qconv_transpose": lambda n, x: requantize_acc(n, qconv_transpose_acc(n, x), _q_out_scale(n)),
    "ConvTranspose": _conv_transpose_float,
    "qdense": lambda n, x: requantize_acc(n, qdense_acc(n, x), _q_out_scale(n)),
    "qadd": _qadd,
    "qmul": _qmul,
    "qgap": _qgap,
    "qlut": lambda n, x: qnn.apply_lut(x, n.attrs["table"]),
    **TENSOR_OPS,
    **SHAPE_OPS,
    "fast_exp": lambda n, x: fast_exp(x),
    "fast_tanh": lambda n, x: fast_tanh(x),
    "fast_erf": lambda n, x: fast_erf(x),
    "fast_softmax": lambda n, x: softmax(x, n.attrs.get("axis", -1), n.attrs.get("coerce_2d", 0), exp=fast_exp),
}


def _cast_type(node):
    from vtasim.compiler.frontend.onnx_import import ONNX_DTYPES
    to = node.attrs["to"]
    if to not in ONNX_DTYPES:
        raise FrontendError(f"{node.where}: Cast to ONNX type {to} is not supported")
    return ONNX_DTYPES[to]


def run_host(node, args) -> list:
    fn = _HOST.get(node.op)
    if fn is None:
        raise FrontendError(f"{node.where or node.name}: no host implementation of {node.op}")
    while args and args[-1] is None:
        args = args[:-1]
    out = fn(node, *args)
    return list(out) if isinstance(out, tuple) else [out]
