"""``conv2d_packed`` and its schedule (compiler spec 3.6), written in the DSL.

The compute reads data in ``NCHW{b}n{c}c`` and the kernel in ``OIHW{o}o{i}i`` and sums over
(input-channel block, kernel row, kernel column, input-channel lane); padding is a ``te.pad``
stage that the schedule puts in the input scratchpad, so the DMA pads it.  The schedule follows
TVM's ``schedule_conv2d_packed`` step by step: elementwise stages after the convolution run on the
ALU in the accumulator, their tensor inputs (a bias) are loaded into the accumulator per tile,
the output is tiled by ``tile_h``/``tile_w``/``tile_co``, the reduction by ``tile_ci``, and
``oc_nthread``/``h_nthread`` bind virtual threads.
"""

from __future__ import annotations

from vtasim.compiler.dsl import te
from vtasim.compiler.ops.conv_family import fused_epilogue, schedule_conv_family

__all__ = ["conv2d_packed", "schedule_conv2d_packed", "fused_conv2d"]

CONV_TAG = "conv2d_dense"


def conv2d_packed(env, data, kernel, padding, strides, out_dtype=None):
    """Packed 2-D convolution; ``padding`` and ``strides`` are (h, w) pairs."""
    out_dtype = out_dtype or env.acc_dtype
    ph, pw = padding
    sh, sw = strides
    if ph or pw:
        data = te.pad(data, (0, 0, ph, pw, 0, 0), name="data_pad")
    nb, icb, h, w, bb, bi = data.shape
    ocb, _, kh, kw, bo, _ = kernel.shape
    oh = (h - kh) // sh + 1
    ow = (w - kw) // sw + 1
    k_o = te.reduce_axis((0, icb), name="k_o")
    d_i = te.reduce_axis((0, kh), name="d_i")
    d_j = te.reduce_axis((0, kw), name="d_j")
    k_i = te.reduce_axis((0, bi), name="k_i")
    return te.compute(
        (nb, ocb, oh, ow, bb, bo),
        lambda b_o, c_o, i, j, b_i, c_i: te.sum(
            data[b_o, k_o, i * sh + d_i, j * sw + d_j, b_i, k_i].astype(out_dtype)
            * kernel[c_o, k_o, d_i, d_j, c_i, k_i].astype(out_dtype),
            axis=[k_o, d_i, d_j, k_i]),
        name="conv2d", tag=CONV_TAG)


def fused_conv2d(env, wl, shift: int):
    """The ResNet-18 layer graph of spec 7.1: conv -> ``>> shift`` -> ``+ bias`` -> min 127 -> max 0 -> int8
    (TVM's benchmark shifts by 8; :func:`vtasim.compiler.ops.data.requant_shift` derives it from the layer).

    Returns ``(data, kernel, bias, output)`` tensors."""
    data = te.placeholder((wl.batch // env.BATCH, wl.cin // env.BLOCK_IN, wl.h, wl.w, env.BATCH, env.BLOCK_IN),
                          env.inp_dtype, "data")
    kernel = te.placeholder((wl.cout // env.BLOCK_OUT, wl.cin // env.BLOCK_IN, wl.k, wl.k,
                             env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, "kernel")
    bias = te.placeholder((1, wl.cout // env.BLOCK_OUT, 1, 1, env.BATCH, env.BLOCK_OUT), env.acc_dtype, "bias")
    conv = conv2d_packed(env, data, kernel, (wl.pad, wl.pad), (wl.stride, wl.stride))
    out = fused_epilogue(env, conv, bias, "bcyxBC", shift)
    return data, kernel, bias, out


def schedule_conv2d_packed(env, output, knobs: dict):
    """TVM's ``schedule_conv2d_packed`` (spec 3.6) with the knob values in ``knobs``: the shared conv
    schedule of :mod:`vtasim.compiler.ops.conv_family` with TVM's conv stage order."""
    return schedule_conv_family(env, output, knobs, CONV_TAG, "bcyxBC", taps_outer=False)
