"""Inputs for the grouped and transposed convolution workloads whose outputs are visible.

With uniform int8 weights a layer's accumulators are so large that after ``>> 8`` almost every
output sits at a clip bound, so a wrong tap or a dropped group would hardly change the bytes.  Here
the weight range is chosen from the number of products each output sums (``taps``) so that
``acc >> 8`` has a standard deviation near :data:`TARGET_STD`, and the per-channel bias centres the
outputs inside ``[0, 127]``: few outputs clip, most lie strictly between the bounds.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["visible_conv_inputs", "TARGET_STD", "BIAS_RANGE"]

TARGET_STD = 24.0            # of (acc >> 8), in output LSBs
BIAS_RANGE = (52, 72)        # the bias (added after the shift) centres the outputs in [0, 127]
_X_STD = 256 / math.sqrt(12)  # of a uniform int8 activation


def visible_conv_inputs(rng, x_shape, w_shape, cout: int, taps: int, shift: int = 8):
    """``(x int8, w int8, bias int32)``: activations uniform over int8, weights uniform in
    ``[-m, m]`` with ``m`` from ``taps`` (products per output), bias uniform in :data:`BIAS_RANGE`."""
    std_w = TARGET_STD * (1 << shift) / (_X_STD * math.sqrt(max(taps, 1)))
    m = int(min(127, max(1, round(std_w * math.sqrt(3)))))
    x = rng.integers(-128, 128, size=x_shape).astype(np.int8)
    w = rng.integers(-m, m + 1, size=w_shape).astype(np.int8)
    bias = rng.integers(BIAS_RANGE[0], BIAS_RANGE[1] + 1, size=(cout,)).astype(np.int32)
    return x, w, bias
