"""Quantisation arithmetic (pure numpy) and its VTA requantisation plans.

::

    from vtasim.compiler import qnn
    sig, shift = qnn.fixed_point_multiplier(0.0123)               # TVM's 31-bit mantissa and shift
    y = qnn.requantize(acc, 0.02 * 0.003, 0, 0.05, -3)            # int32 -> int8, UPWARD rounding
    acc = qnn.qconv2d(qa, qw, za, 0, strides=1, pads=(1, 1, 1, 1))  # four-term zero-point conv
    plan = qnn.plan_requant(0.0012, acc_bound, -3, -128, 127, cfg)  # ALU steps, proved error bound

Modules: :mod:`~vtasim.compiler.qnn.fixed_point` (multiplier, multiply_shift, requantize),
:mod:`~vtasim.compiler.qnn.quantize` (quantize, dequantize), :mod:`~vtasim.compiler.qnn.conv` (int32 and four-term
conv/dense), :mod:`~vtasim.compiler.qnn.lut` (tanh/sigmoid/SiLU tables), :mod:`~vtasim.compiler.qnn.passive`
(pad, relu, clip, max-pool), :mod:`~vtasim.compiler.qnn.vta_requant` (the ALU plans).
"""

from vtasim.compiler.qnn.conv import (conv2d_int32, conv_acc_bound, conv_out_hw, dense_acc_bound, dense_int32, qconv2d,
                               qdense)
from vtasim.compiler.qnn.conv_transpose import conv_transpose2d, qconv2d_transpose
from vtasim.compiler.qnn.errors import QnnError, RequantError, dtype_range
from vtasim.compiler.qnn.fixed_point import ROUNDINGS, fixed_point_multiplier, multiply_shift, requantize
from vtasim.compiler.qnn.lut import LUT_FUNCTIONS, apply_lut, lut_table
from vtasim.compiler.qnn.passive import clip_q, maxpool_q, pad_q, relu_q
from vtasim.compiler.qnn.quantize import dequantize, quantize
from vtasim.compiler.qnn.vta_requant import REQUANT_PATHS, RequantPlan, alu_steps_int32, plan_requant

__all__ = ["QnnError", "RequantError", "dtype_range", "fixed_point_multiplier", "multiply_shift", "requantize",
           "ROUNDINGS", "quantize", "dequantize", "conv2d_int32", "qconv2d", "dense_int32", "qdense", "conv_out_hw",
           "conv_acc_bound", "dense_acc_bound", "conv_transpose2d", "qconv2d_transpose", "lut_table", "apply_lut", "LUT_FUNCTIONS", "pad_q", "relu_q",
           "clip_q", "maxpool_q", "plan_requant", "RequantPlan", "alu_steps_int32", "REQUANT_PATHS"]
