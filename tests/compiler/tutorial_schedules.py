"""The four TVM VTA tutorial schedules (compiler spec 3.2-3.5), as the scripts in examples/ declare
them (one source: each script's schedule function, its sizes as parameters so tests can shrink
them), plus topi's conv2d with the fused epilogue.  Each builder returns ``(schedule, args)``;
``args`` ends with the output."""

import sys
from pathlib import Path

from vtasim.compiler.dsl import te
from vtasim.compiler.ops.conv2d import CONV_TAG, schedule_conv2d_packed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))          # the scripts import their helper _tutorial the same way

from convolution_opt import conv2d_schedule as conv2d  # noqa: E402
from matrix_multiply import gemm_schedule as simple_gemm  # noqa: E402
from matrix_multiply_opt import gemm_opt_schedule as blocked_gemm  # noqa: E402
from vta_get_started import vadd_schedule as vector_add  # noqa: E402

__all__ = ["vector_add", "simple_gemm", "blocked_gemm", "conv2d", "topi_conv2d"]


def topi_conv2d(env, height=14, width=14, in_channels=64, out_channels=64, kernel=3, pad=1, stride=1,
                tile_h=(1, 14), tile_w=(1, 14), tile_ci=(4, 1), tile_co=(2, 2), oc_nthread=2, h_nthread=1):
    """topi's conv2d_packed (compiler spec 3.6) with the fused epilogue of spec 7.1 (>> 8, + bias, clip
    by min then max, cast), named as topi names it, scheduled by the compiler's
    ``schedule_conv2d_packed`` with the knobs given as [outer, inner] splits."""
    data_shape = (1, in_channels // env.BLOCK_IN, height, width, env.BATCH, env.BLOCK_IN)
    kshape = (out_channels // env.BLOCK_OUT, in_channels // env.BLOCK_IN, kernel, kernel, env.BLOCK_OUT, env.BLOCK_IN)
    bias_shape = (1, out_channels // env.BLOCK_OUT, 1, 1, env.BATCH, env.BLOCK_OUT)
    data = te.placeholder(data_shape, env.inp_dtype, "data")
    kern = te.placeholder(kshape, env.wgt_dtype, "kernel")
    bias = te.placeholder(bias_shape, env.acc_dtype, "bias")
    pad_data = te.pad(data, [0, 0, pad, pad, 0, 0], name="pad_data") if pad else data
    oh = (height + 2 * pad - kernel) // stride + 1
    ow = (width + 2 * pad - kernel) // stride + 1
    oshape = (1, out_channels // env.BLOCK_OUT, oh, ow, env.BATCH, env.BLOCK_OUT)
    k_o = te.reduce_axis((0, data_shape[1]), name="k_o")
    d_i = te.reduce_axis((0, kernel), name="d_i")
    d_j = te.reduce_axis((0, kernel), name="d_j")
    k_i = te.reduce_axis((0, env.BLOCK_IN), name="k_i")
    conv = te.compute(oshape, lambda b_o, c_o, i, j, b_i, c_i: te.sum(
        pad_data[b_o, k_o, i * stride + d_i, j * stride + d_j, b_i, k_i].astype(env.acc_dtype)
        * kern[c_o, k_o, d_i, d_j, c_i, k_i].astype(env.acc_dtype), axis=[k_o, d_i, d_j, k_i]),
        name="res", tag=CONV_TAG)
    shr = te.compute(oshape, lambda *i: conv(*i) >> 8, "T_right_shift", tag="elemwise")
    add = te.compute(oshape, lambda b, c, y, x, bi, ci: shr[b, c, y, x, bi, ci] + bias[0, c, 0, 0, bi, ci],
                     "T_add", tag="broadcast")
    clip_a = te.compute(oshape, lambda *i: te.min(add(*i), 127), "clipA")
    clip_b = te.compute(oshape, lambda *i: te.max(clip_a(*i), 0), "clipB")
    output = te.compute(oshape, lambda *i: clip_b(*i).astype(env.out_dtype), "T_cast", tag="elemwise")
    knobs = dict(tile_h=tile_h, tile_w=tile_w, tile_ci=tile_ci, tile_co=tile_co, oc_nthread=oc_nthread,
                 h_nthread=h_nthread)
    return schedule_conv2d_packed(env, output, knobs), [data, kern, bias, output]
