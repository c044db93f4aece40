"""TVM's fixed-point multiplier and its exact integer application (compiler spec 9.1-9.3).

A real multiplier ``m > 0`` becomes ``(sig, shift)`` with ``m ~= sig * 2^(shift - 31)``, ``sig`` a
31-bit mantissa in ``[2^30, 2^31)``::

    >>> fixed_point_multiplier(0.5)
    (1073741824, 0)
    >>> multiply_shift(np.array([-3, 3]), 1073741824, 0)          # x * 0.5, ties upward
    array([-1,  2])

Everything is exact integer arithmetic (int64, or Python integers where int64 could overflow).
"""

from __future__ import annotations

import math

import numpy as np

from vtasim.compiler.qnn.errors import QnnError, check_scale, check_zero_point, dtype_range

__all__ = ["fixed_point_multiplier", "multiply_shift", "requantize", "ROUNDINGS"]

ROUNDINGS = ("UPWARD", "TONEAREST")


def _fixed_point_scalar(m: float) -> tuple[int, int]:
    if m == 0.0:
        return 0, 0
    sig, exp = math.frexp(m)                      # m = sig * 2^exp, sig in [0.5, 1)
    q = math.floor(sig * (1 << 31) + 0.5)         # std::round: sig * 2^31 is exact, so + 0.5 is too
    if q == 1 << 31:                              # the mantissa rounded up to 1.0
        q //= 2
        exp += 1
    return q, exp


def fixed_point_multiplier(m):
    """``(sig, shift)`` of ``m`` (TVM's GetFixedPointMultiplierShift); ``m == 0`` gives ``(0, 0)``.

    ``m`` may be a numpy array (per-channel); then both results are int64 arrays of its shape."""
    arr = check_scale(m, "multiplier", allow_zero=True)
    if arr.ndim == 0:
        return _fixed_point_scalar(float(arr))
    pairs = [_fixed_point_scalar(float(v)) for v in arr.reshape(-1)]
    sig = np.array([p[0] for p in pairs], dtype=np.int64).reshape(arr.shape)
    shift = np.array([p[1] for p in pairs], dtype=np.int64).reshape(arr.shape)
    return sig, shift


def _along(v, ndim: int, axis: int | None):
    v = np.asarray(v, dtype=np.int64)
    if v.ndim == 0 or axis is None:
        return v
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def multiply_shift(x, sig, shift, rounding: str = "UPWARD", axis: int | None = None) -> np.ndarray:
    """``round(x * sig * 2^(shift - 31))`` exactly, as TVM's ``q_multiply_shift`` computes it in int64.

    ``rounding``: ``"UPWARD"`` rounds ties toward +inf (``-1.5 -> -1``), ``"TONEAREST"`` away from zero
    (``-1.5 -> -2``).  ``sig``/``shift`` per-channel arrays apply along ``axis`` of ``x``.  Returns int64
    (not narrowed: the caller clips)."""
    if rounding not in ROUNDINGS:
        raise QnnError(f"rounding = {rounding!r} must be one of {', '.join(ROUNDINGS)}")
    x = np.asarray(x)
    if x.dtype.kind not in "iub":
        raise QnnError(f"multiply_shift: x has dtype {x.dtype}, it must be an integer array")
    if axis is not None and np.ndim(sig) and not -x.ndim <= axis < x.ndim:
        raise QnnError(f"multiply_shift: axis = {axis} is not an axis of a {x.ndim}-d tensor")
    if axis is not None and np.ndim(sig) and np.size(sig) != x.shape[axis]:
        raise QnnError(f"multiply_shift: {np.size(sig)} multipliers for axis {axis} of extent {x.shape[axis]}")
    sig = _along(sig, x.ndim, axis)
    shift = _along(shift, x.ndim, axis)
    left = np.maximum(shift, 0)
    right = 31 + np.maximum(-shift, 0)
    x = x.astype(np.int64)
    xmax = int(np.abs(x).max(initial=0))
    if xmax * int(np.max(sig, initial=0)) * (1 << int(np.max(left, initial=0))) >= 1 << 62:
        x, sig = x.astype(object), sig.astype(object)        # int64 could overflow: exact Python ints
        left, right = left.astype(object), right.astype(object)
    prod = (x << left) * sig
    half = np.left_shift(1, right - 1) if prod.dtype != object else (1 << (right - 1))
    if rounding == "UPWARD":
        bias = half
    else:
        bias = np.where(prod >= 0, half, half - 1)
    out = (prod + bias) >> right
    if out.dtype != object:
        return out.astype(np.int64)
    if out.size == 0 or max(abs(int(v)) for v in out.reshape(-1)) < 1 << 63:
        return out.astype(np.int64)
    return out                          # beyond int64 (a huge multiplier): exact Python integers


def requantize(x, in_scale, in_zp, out_scale, out_zp, out_dtype: str = "int8", axis: int = 1,
               rounding: str = "UPWARD") -> np.ndarray:
    """TVM's integer ``qnn.requantize`` (spec 9.3): ``clip(round((x - in_zp) * in_scale / out_scale) +
    out_zp)`` in the range of ``out_dtype``; per-channel scales apply along ``axis``.  An int32 output
    is not clipped (it wraps, as TVM's cast does)."""
    s_in = check_scale(in_scale, "requantize input scale")
    s_out = check_scale(out_scale, "requantize output scale")
    lo, hi = dtype_range(out_dtype)
    z_in = check_zero_point(in_zp, "int32", "requantize input zero point")
    z_out = check_zero_point(out_zp, out_dtype, "requantize output zero point")
    x = np.asarray(x)
    per_channel = s_in.ndim > 0 or s_out.ndim > 0 or z_in.ndim > 0 or z_out.ndim > 0
    if per_channel and not -x.ndim <= axis < x.ndim:
        raise QnnError(f"requantize: axis = {axis} is not an axis of a {x.ndim}-d tensor")
    for v, what in ((s_in, "input scale"), (s_out, "output scale"), (z_in, "input zero point"),
                    (z_out, "output zero point")):
        if v.ndim > 1 or (v.ndim == 1 and v.size != x.shape[axis]):
            raise QnnError(f"requantize: {v.size} {what}s for axis {axis} of extent {x.shape[axis]}")
    sig, shift = fixed_point_multiplier(s_in / s_out)
    centred = x.astype(np.int64) - _along(z_in, x.ndim, axis)
    y = multiply_shift(centred, sig, shift, rounding, axis=axis) + _along(z_out, x.ndim, axis)
    if out_dtype == "int32":
        y = np.asarray(y)
        if y.dtype == object:           # beyond int64 (a huge multiplier): wrap the exact integers as well
            y = (y + (1 << 31)) % (1 << 32) - (1 << 31)
        return np.asarray(y, dtype=np.int64).astype(np.int32)
    return np.clip(y, lo, hi).astype(out_dtype)
