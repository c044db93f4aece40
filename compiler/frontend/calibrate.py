"""Activation scales for the quantiser, with the calibration modes of TVM's ``relay.quantize``.

Each function maps the samples of one tensor (every value it took over the calibration inputs) to a
symmetric int8 scale ``s`` (the real value of one LSB; zero point 0, values clipped to +-127 s):

* ``global``: ``global_scale / 128`` for every tensor, no data needed (TVM's default; 8 -> 1/16, a
  power of two, so every requantisation is a shift);
* ``minmax``: ``max |x| / 127``;
* ``percentile``: the 99.99th percentile of ``|x|`` over 127;
* ``kl``: the threshold whose 255-level quantised histogram is nearest, in Kullback-Leibler
  divergence, to the 8001-bin histogram of ``x`` (TVM's ``kl_divergence_scale``, after MXNet's),
  over 127.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["CALIBRATIONS", "activation_scale", "kl_threshold", "power2_scale"]

CALIBRATIONS = ("global", "minmax", "kl", "percentile")
QMAX = 127
PERCENTILE = 99.99


def power2_scale(max_abs: float) -> float:
    """TVM's power2 rule: the scale 2^ceil(log2(max|x|)) spread over 128 levels."""
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 1.0 / 128
    return float(2.0 ** np.ceil(np.log2(max_abs))) / 128


def kl_threshold(x: np.ndarray, num_bins: int = 8001, num_quantized_bins: int = 255) -> float:
    """The clipping threshold of least KL divergence between the histogram of ``x`` and its
    ``num_quantized_bins``-level quantisation (the reference keeps the clipped mass in its edge bins)."""
    x = np.asarray(x, np.float64).reshape(-1)
    top = float(np.abs(x).max(initial=0.0))
    if top == 0:
        return 0.0
    hist, edges = np.histogram(x, bins=num_bins, range=(-top, top))
    zero = num_bins // 2
    half_q = num_quantized_bins // 2
    hist = hist.astype(np.float64)

    def divergence(i: int) -> float:
        lo, hi = zero - i, zero + i + 1                     # the 2i+1 bins around zero kept
        kept = hist[lo:hi]
        p = kept.copy()
        p[0] += hist[:lo].sum()
        p[-1] += hist[hi:].sum()
        nonzero = p != 0
        # quantise the kept bins into num_quantized_bins groups of n // num_quantized_bins bins (the
        # last takes the rest, as MXNet's and TVM's calibration cut them), each group's mass spread
        # evenly over its non-empty bins
        n = p.size
        m = n // num_quantized_bins
        starts = np.arange(num_quantized_bins) * m
        sizes = np.diff(np.append(starts, n))
        sums = np.add.reduceat(kept, starts)
        counts = np.add.reduceat(nonzero.astype(np.float64), starts)
        q = np.where(nonzero, np.repeat(sums / np.maximum(counts, 1), sizes), 0.0)
        ps, qs = p.sum(), q.sum()
        keep = p > 0
        if qs == 0 or np.any(q[keep] == 0):
            return np.inf
        pn, qn = p[keep] / ps, q[keep] / qs
        return float(np.sum(pn * np.log(pn / qn)))

    best = min(range(half_q, zero + 1), key=divergence)       # every threshold of TVM's search
    return float(edges[zero + best + 1])


def activation_scale(samples: np.ndarray | None, mode: str, global_scale: float = 8.0) -> float:
    if mode not in CALIBRATIONS:
        raise FrontendError(f"calibration {mode!r} is not one of {', '.join(CALIBRATIONS)}")
    if mode == "global":
        if not np.isfinite(global_scale) or global_scale <= 0:
            raise FrontendError(f"--global-scale {global_scale!r}: must be a finite number > 0")
        return float(global_scale) / 128
    x = np.abs(np.asarray(samples, np.float64).reshape(-1))
    if not np.all(np.isfinite(x)):
        raise FrontendError("calibration data gave a non-finite activation (NaN or inf)")
    if mode == "minmax":
        t = float(x.max(initial=0.0))
    elif mode == "percentile":
        t = float(np.percentile(x, PERCENTILE)) if x.size else 0.0
    else:
        t = kl_threshold(samples)
    return t / QMAX if t > 0 else 1.0 / 128
