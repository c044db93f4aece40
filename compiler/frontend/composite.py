"""The composite quantised ops, built from either quantisation format.

=========  =====================  =====================================================================
op         inputs                 attributes
=========  =====================  =====================================================================
qconv      x (int8/uint8 NCHW)    weight (int8 OIHW), bias (int32 (O,) or None), strides, pads (t,l,b,r),
                                  dilations, group, x_dtype, x_scale, x_zp, w_scale (float or (O,)), w_zp,
                                  y_scale, y_zp, y_dtype, act
qconv_transpose  as qconv      weight (int8 (C, M/group, KH, KW), ONNX's ConvTranspose layout), output_padding;
                                  per-tensor weight scale
qdense     x (int8/uint8 (N,K))   weight (int8 (O,K)), bias, x_dtype, x_scale, x_zp, w_scale, w_zp, y_scale, y_zp,
                                  y_dtype, act
qadd       a, b                   a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, y_dtype, act
qmul       a, b                   as qadd: the product of the two real values (broadcast), requantised
qgap       x                      x_scale, x_zp, y_scale, y_zp, y_dtype
qlut       x                      table (256 entries of y_dtype), fn (its name), x_dtype
=========  =====================  =====================================================================

``act`` is None, ``"relu"`` or ``("clip", lo, hi)`` in real (dequantised) units: the activation
that follows the op before the output is quantised.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.graph import Node

__all__ = ["qconv_node", "qdense_node", "qadd_node", "qparam", "act_limits", "out_limits", "QUANT_DTYPES"]

QUANT_DTYPES = (np.int8, np.uint8)


def qparam(arr, what: str, per_channel_ok: bool = False):
    """A scale or zero point constant as a Python number, or a 1-D array where allowed."""
    a = np.asarray(arr)
    if a.size == 1:
        v = a.reshape(-1)[0].item()
        return float(v) if a.dtype.kind == "f" else int(v)
    if not per_channel_ok or a.ndim != 1:
        raise FrontendError(f"{what}: shape {a.shape} (per-tensor scalars only here)")
    return a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64)


def _check_scale(v, what):
    arr = np.asarray(v, np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise FrontendError(f"{what} = {v!r}: a quantisation scale must be finite and > 0")


def _common(where, x_scale, x_zp, y_scale, y_zp, y_dtype):
    _check_scale(x_scale, f"{where}: input scale")
    _check_scale(y_scale, f"{where}: output scale")
    if np.dtype(y_dtype).type not in QUANT_DTYPES:
        raise FrontendError(f"{where}: output type {np.dtype(y_dtype).name} (int8 or uint8 expected)")


def qconv_node(name, where, x, y, weight, bias, attrs, x_scale, x_zp, w_scale, w_zp, y_scale, y_zp, y_dtype,
               act=None, x_dtype=np.int8, op: str = "qconv") -> Node:
    """A ``qconv``, or with ``op="qconv_transpose"`` a transposed convolution (ConvTranspose)."""
    _common(where, x_scale, x_zp, y_scale, y_zp, y_dtype)
    _check_scale(w_scale, f"{where}: weight scale")
    if weight.dtype.type not in QUANT_DTYPES or weight.ndim != 4:
        raise FrontendError(f"{where}: weight {weight.dtype.name}{weight.shape} (int8/uint8 4-d expected)")
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    strides = list(attrs.get("strides", [1, 1]))
    dilations = [int(d) for d in attrs.get("dilations", [1, 1])]
    group = int(attrs.get("group", 1))
    extra = {"output_padding": [int(p) for p in attrs.get("output_padding", [0, 0])]} if op == "qconv_transpose" else {}
    return Node(op, [x], [y], dict(weight=weight, bias=bias, strides=strides, pads=pads, dilations=dilations,
                                   group=group, **extra, x_scale=x_scale,
                                        x_zp=x_zp, w_scale=w_scale, w_zp=w_zp, y_scale=y_scale, y_zp=y_zp,
                                        y_dtype=np.dtype(y_dtype), act=act, x_dtype=np.dtype(x_dtype)), name, where)


def qdense_node(name, where, x, y, weight, bias, x_scale, x_zp, w_scale, w_zp, y_scale, y_zp, y_dtype,
                act=None, x_dtype=np.int8) -> Node:
    _common(where, x_scale, x_zp, y_scale, y_zp, y_dtype)
    _check_scale(w_scale, f"{where}: weight scale")
    if weight.dtype.type not in QUANT_DTYPES or weight.ndim != 2:
        raise FrontendError(f"{where}: weight {weight.dtype.name}{weight.shape} (int8/uint8 (O, K) expected)")
    return Node("qdense", [x], [y], dict(weight=weight, bias=bias, x_scale=x_scale, x_zp=x_zp, w_scale=w_scale,
                                         w_zp=w_zp, y_scale=y_scale, y_zp=y_zp, y_dtype=np.dtype(y_dtype),
                                         act=act, x_dtype=np.dtype(x_dtype)), name, where)


def qadd_node(name, where, a, b, y, a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, y_dtype, act=None,
              op: str = "qadd") -> Node:
    """A residual add (``op="qadd"``) or an elementwise product (``op="qmul"``) of two quantised tensors."""
    _common(where, a_scale, a_zp, y_scale, y_zp, y_dtype)
    _check_scale(b_scale, f"{where}: second input scale")
    return Node(op, [a, b], [y], dict(a_scale=a_scale, a_zp=a_zp, b_scale=b_scale, b_zp=b_zp, y_scale=y_scale,
                                          y_zp=y_zp, y_dtype=np.dtype(y_dtype), act=act), name, where)


def act_limits(act, y_scale: float, y_zp: int, y_dtype) -> tuple[int, int]:
    """The quantised output range [lo, hi] after ``act`` (ReLU = max(x, zp), clip = its bounds)."""
    info = np.iinfo(y_dtype)
    lo, hi = int(info.min), int(info.max)
    if act == "relu":
        lo = max(lo, int(y_zp))
    elif isinstance(act, tuple) and act[0] == "clip":
        if act[1] is not None and np.isfinite(act[1]):
            lo = max(lo, int(np.round(act[1] / y_scale)) + int(y_zp))
        if act[2] is not None and np.isfinite(act[2]):
            hi = min(hi, int(np.round(act[2] / y_scale)) + int(y_zp))
    return lo, hi


def out_limits(attrs) -> tuple:
    """A ``qconv``/``qdense``'s quantised output range: ``attrs["limits"]`` where the layer carries one
    (sibling layers combined by :mod:`vtasim.compiler.frontend.combine`: ints, or one per output channel),
    else :func:`act_limits` of its activation."""
    if attrs.get("limits") is not None:
        return attrs["limits"]
    return act_limits(attrs["act"], attrs["y_scale"], attrs["y_zp"], attrs["y_dtype"])
