"""The data rule of compiled workloads: inputs drawn so that the outputs depend on them.

An output byte at a clip bound says nothing about the GEMM behind it, so a workload whose int32
sums land far outside the int8 range after its shift checks almost nothing.  The rule, used by the
catalogue (:func:`vtasim.compiler.ops.workload_program`) and the tutorials in ``examples/``:

* activations and weights uniform over the whole int8 range ``[-128, 128)`` (every multiplier bit
  is exercised);
* the right shift of a requantising epilogue comes from the reduction length
  (:func:`requant_shift`): a sum of ``n`` products of two such values has a standard deviation of
  ``sqrt(n) * E[x^2]``; the shift is the power of two that brings it nearest to :data:`TARGET_STD`
  output LSBs (a quarter of 127: well under 1 % of the outputs reach 127, about half lie strictly
  between 0 and 127, the others clip to 0);
* a per-channel bias, added after the shift, uniform in ``[-BIAS_BOUND, BIAS_BOUND)``: it moves a
  channel by a fraction of that spread and never pushes it to a bound.

Every draw is from ``numpy.random.default_rng(seed)``, so a seed names one data set.
:func:`clip_fractions` measures how many outputs sit at the bounds (``vtasim compile`` prints it).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["INT8_RANGE", "TARGET_STD", "BIAS_BOUND", "requant_shift", "draw", "draw_bias", "clip_fractions",
           "format_fractions"]

INT8_RANGE = (-128, 128)
TARGET_STD = 32
BIAS_BOUND = TARGET_STD // 4


def _second_moment(lo: int, hi: int) -> float:
    """E[x^2] of an integer uniform in [lo, hi)."""
    n = hi - lo
    return (n * n - 1) / 12 + ((lo + hi - 1) / 2) ** 2


def requant_shift(reduction: int, lo: int = INT8_RANGE[0], hi: int = INT8_RANGE[1]) -> int:
    """Right shift that brings a sum of ``reduction`` products of two independent integers uniform in
    ``[lo, hi)`` to a standard deviation of about :data:`TARGET_STD` (between 1/sqrt(2) and sqrt(2) times it)."""
    if reduction < 1:
        raise ValueError(f"reduction length {reduction} must be >= 1")
    std = math.sqrt(reduction) * _second_moment(lo, hi)
    return max(0, round(math.log2(std / TARGET_STD)))


def draw(rng, shape, dtype=np.int8, lo: int = INT8_RANGE[0], hi: int = INT8_RANGE[1]) -> np.ndarray:
    """Activations or weights: uniform integers in ``[lo, hi)``."""
    return rng.integers(lo, hi, size=shape).astype(dtype)


def draw_bias(rng, shape) -> np.ndarray:
    """A bias added after the shift: int32, uniform in ``[-BIAS_BOUND, BIAS_BOUND)``."""
    return rng.integers(-BIAS_BOUND, BIAS_BOUND, size=shape).astype(np.int32)


def clip_fractions(values, lo: int, hi: int) -> tuple[float, float, float]:
    """Fractions of ``values`` equal to ``hi``, equal to ``lo`` and strictly between them."""
    v = np.asarray(values).reshape(-1)
    if v.size == 0:
        return 0.0, 0.0, 0.0
    at_hi, at_lo = np.count_nonzero(v == hi) / v.size, np.count_nonzero(v == lo) / v.size
    return at_hi, at_lo, np.count_nonzero((v > lo) & (v < hi)) / v.size


def format_fractions(values, lo: int, hi: int) -> str:
    """``outputs: 3.1 % at 127, 12.0 % at 0, 84.9 % between``."""
    at_hi, at_lo, between = clip_fractions(values, lo, hi)
    return f"outputs: {100 * at_hi:.1f} % at {hi}, {100 * at_lo:.1f} % at {lo}, {100 * between:.1f} % between"
