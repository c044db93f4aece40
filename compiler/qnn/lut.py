"""Int8/uint8 activations as 256-entry lookup tables (compiler spec 9.7).

Every bit pattern of the input dtype is dequantised, the float function applied, and the result
quantised with the output parameters; at run time the input's bytes index the table::

    >>> t = lut_table("tanh", 0.05, 0, 0.0078125, 0)
    >>> apply_lut(np.array([0, 20, -128], np.int8), t)
    array([   0,   97, -128], dtype=int8)
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.qnn.errors import QnnError
from vtasim.compiler.qnn.quantize import dequantize, quantize

__all__ = ["lut_table", "apply_lut", "LUT_FUNCTIONS"]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


LUT_FUNCTIONS = {"tanh": np.tanh, "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x)}
_BYTE_DTYPES = ("int8", "uint8")


def lut_table(fn, in_scale, in_zp, out_scale, out_zp, in_dtype: str = "int8", out_dtype: str = "int8",
              rounding: str = "half_away", precision: str = "float64") -> np.ndarray:
    """The 256 outputs of ``fn`` (``"tanh"``, ``"sigmoid"``, ``"silu"`` or a callable on float arrays),
    indexed by the input's byte (its ``uint8`` view); per-tensor scales only.

    ``precision="float32"`` dequantises, applies ``fn`` and divides by the output scale in float32 and
    rounds half to even, as onnxruntime builds the tables of its QLinear activations (a float64 table
    differs from it on the codes whose float32 quotient is an exact tie)."""
    if in_dtype not in _BYTE_DTYPES or out_dtype not in _BYTE_DTYPES:
        raise QnnError(f"lut_table: dtypes {in_dtype}/{out_dtype} must be int8 or uint8 (a 256-entry table)")
    if np.ndim(in_scale) or np.ndim(out_scale) or np.ndim(in_zp) or np.ndim(out_zp):
        raise QnnError("lut_table: scales and zero points must be per-tensor scalars (one table)")
    if isinstance(fn, str):
        if fn not in LUT_FUNCTIONS:
            raise QnnError(f"lut_table: function {fn!r} is not one of {', '.join(LUT_FUNCTIONS)} (or a callable)")
        fn = LUT_FUNCTIONS[fn]
    elif not callable(fn):
        raise QnnError(f"lut_table: fn = {fn!r} must be a function name or a callable")
    codes = np.arange(256, dtype=np.uint8).view(in_dtype)
    if precision == "float32":
        real = np.float32(in_scale) * (codes.astype(np.float32) - np.float32(in_zp))
        y = np.asarray(fn(real), dtype=np.float32) / np.float32(out_scale)
        info = np.iinfo(out_dtype)
        return np.clip(np.rint(y) + np.float32(out_zp), info.min, info.max).astype(out_dtype)
    if precision != "float64":
        raise QnnError(f"lut_table: precision {precision!r} must be float64 or float32")
    real = dequantize(codes, in_scale, in_zp).astype(np.float64)
    y = np.asarray(fn(real), dtype=np.float64)
    if y.shape != real.shape:
        raise QnnError(f"lut_table: the function returned shape {y.shape} for an input of shape {real.shape}")
    return quantize(y, out_scale, out_zp, out_dtype, rounding=rounding)


def apply_lut(q, table) -> np.ndarray:
    """``table[uint8 view of q]``: q int8 or uint8, table 256 entries."""
    q, table = np.asarray(q), np.asarray(table)
    if q.dtype.name not in _BYTE_DTYPES:
        raise QnnError(f"apply_lut: input dtype {q.dtype} must be int8 or uint8")
    if table.shape != (256,):
        raise QnnError(f"apply_lut: table has shape {table.shape}, it must have 256 entries")
    return table[q.view(np.uint8)]
