"""The errors of the quantisation arithmetic: one line naming the value and the rule it breaks."""

from __future__ import annotations

import math

import numpy as np

from vtasim.compiler.errors import CompileError

__all__ = ["QnnError", "RequantError", "check_scale", "check_zero_point", "dtype_range", "is_power_of_two"]

_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-(1 << 15), (1 << 15) - 1),
           "uint16": (0, (1 << 16) - 1), "int32": (-(1 << 31), (1 << 31) - 1)}


class QnnError(CompileError):
    """A quantisation parameter the arithmetic cannot use (a scale <= 0 or NaN, a zero point out of range)."""


class RequantError(QnnError):
    """A requantisation a VTA path cannot represent (scale out of the immediate/shift range, overflow)."""


def dtype_range(dtype) -> tuple[int, int]:
    """``(min, max)`` of an integer dtype name (int8, uint8, int16, uint16, int32)."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in _RANGES:
        raise QnnError(f"dtype {name!r} is not one of {', '.join(_RANGES)}")
    return _RANGES[name]


def check_scale(scale, what: str = "scale", allow_zero: bool = False) -> np.ndarray:
    """``scale`` as a float64 array; every element finite and > 0 (>= 0 with ``allow_zero``)."""
    s = np.asarray(scale, dtype=np.float64)
    bad = ~np.isfinite(s) | ((s < 0) if allow_zero else (s <= 0))
    if bad.any():
        v = s.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
        rule = ">= 0" if allow_zero else "> 0"
        raise QnnError(f"{what} = {float(v)!r} must be a finite number {rule}")
    return s


def check_zero_point(zp, dtype, what: str = "zero point") -> np.ndarray:
    """``zp`` as an int64 array, every element an integer inside ``dtype``'s range."""
    lo, hi = dtype_range(dtype)
    z = np.asarray(zp)
    if z.dtype.kind == "f":
        if not np.all(np.isfinite(z)) or np.any(z != np.round(z)):
            raise QnnError(f"{what} = {z.reshape(-1)[0]!r} must be an integer")
    elif z.dtype.kind not in "iub":
        raise QnnError(f"{what} = {zp!r} must be an integer")
    z = z.astype(np.int64)
    bad = (z < lo) | (z > hi)
    if bad.any():
        v = int(z.reshape(-1)[int(np.argmax(bad.reshape(-1)))])
        raise QnnError(f"{what} = {v} is outside the {dtype} range [{lo}, {hi}]")
    return z


def is_power_of_two(m: float) -> bool:
    return m > 0 and math.frexp(m)[0] == 0.5
