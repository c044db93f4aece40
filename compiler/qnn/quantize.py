"""Float <-> integer: ONNX QuantizeLinear / DequantizeLinear and TVM's qnn.quantize (spec 9.4).

::

    >>> quantize(np.array([0.25, 0.75, -0.25], np.float32), 0.5, 0, "int8")        # ties to even
    array([ 0,  2,  0], dtype=int8)
    >>> quantize(np.array([0.25, 0.75, -0.25], np.float32), 0.5, 0, "int8", rounding="half_away")
    array([ 1,  2, -1], dtype=int8)
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.qnn.errors import QnnError, check_scale, check_zero_point, dtype_range

__all__ = ["quantize", "dequantize", "round_half", "FLOAT_ROUNDINGS"]

FLOAT_ROUNDINGS = ("half_even", "half_away")


def round_half(v, rounding: str = "half_even") -> np.ndarray:
    """``v`` rounded to integers (float64): ties to even (ONNX, numpy) or away from zero (TVM's round)."""
    if rounding not in FLOAT_ROUNDINGS:
        raise QnnError(f"rounding = {rounding!r} must be one of {', '.join(FLOAT_ROUNDINGS)}")
    v = np.asarray(v, dtype=np.float64)
    if rounding == "half_even":
        return np.rint(v)
    t = np.trunc(v)
    return np.where(np.abs(v - t) == 0.5, t + np.sign(v), np.rint(v))


def _per_axis(v, ndim: int, axis: int | None):
    if np.ndim(v) == 0 or axis is None:
        return v
    if not -ndim <= axis < ndim:
        raise QnnError(f"axis = {axis} is not an axis of a {ndim}-d tensor")
    shape = [1] * ndim
    shape[axis] = np.size(v)
    return np.reshape(v, shape)


def quantize(x, scale, zp, dtype: str = "int8", rounding: str = "half_even", axis: int | None = None) -> np.ndarray:
    """``saturate(round(x / scale) + zp)`` as ``dtype``; the division in ``x``'s float type (float32 for
    float32 data, as onnxruntime does), the rounding ``half_even`` (ONNX) or ``half_away`` (TVM)."""
    lo, hi = dtype_range(dtype)
    s = check_scale(scale, "quantize scale")
    z = check_zero_point(zp, dtype, "quantize zero point")
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    if np.isnan(x).any():
        raise QnnError("quantize: the input holds NaN (rule: every value must be a number)")
    scaled = x / _per_axis(s.astype(x.dtype), x.ndim, axis)
    q = round_half(scaled, rounding) + _per_axis(z, x.ndim, axis)
    return np.clip(q, lo, hi).astype(dtype)


def dequantize(q, scale, zp, axis: int | None = None) -> np.ndarray:
    """``(q - zp) * scale`` in float32 (ONNX DequantizeLinear); per-channel along ``axis``."""
    q = np.asarray(q)
    if q.dtype.kind not in "iu":
        raise QnnError(f"dequantize: input dtype {q.dtype} must be an integer type")
    s = check_scale(scale, "dequantize scale").astype(np.float32)
    z = check_zero_point(zp, "int32", "dequantize zero point")
    centred = (q.astype(np.int64) - _per_axis(z, q.ndim, axis)).astype(np.float32)
    return centred * _per_axis(s, q.ndim, axis)
