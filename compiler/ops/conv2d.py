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

from compiler import te
from compiler.schedule import create_schedule
from compiler.ops._packed import bind_virtual_threads, collect, ewise_on_alu, tile_reduction_and_tensorize
from compiler.tensor import ComputeOp

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
    (TVM's benchmark shifts by 8; :func:`compiler.ops.data.requant_shift` derives it from the layer).

    Returns ``(data, kernel, bias, output)`` tensors."""
    data = te.placeholder((wl.batch // env.BATCH, wl.cin // env.BLOCK_IN, wl.h, wl.w, env.BATCH, env.BLOCK_IN),
                          env.inp_dtype, "data")
    kernel = te.placeholder((wl.cout // env.BLOCK_OUT, wl.cin // env.BLOCK_IN, wl.k, wl.k,
                             env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, "kernel")
    bias = te.placeholder((1, wl.cout // env.BLOCK_OUT, 1, 1, env.BATCH, env.BLOCK_OUT), env.acc_dtype, "bias")
    conv = conv2d_packed(env, data, kernel, (wl.pad, wl.pad), (wl.stride, wl.stride))
    shape = conv.shape
    shr = te.compute(shape, lambda *i: conv(*i) >> shift, name="res_shr")
    biased = te.compute(shape, lambda b, c, y, x, bi, ci: shr[b, c, y, x, bi, ci] + bias[0, c, 0, 0, bi, ci],
                        name="res_bias")
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    clip_hi = te.compute(shape, lambda *i: te.min_(biased(*i), inp_max), name="res_min")
    clip_lo = te.compute(shape, lambda *i: te.max_(clip_hi(*i), 0), name="res_max")
    out = te.compute(shape, lambda *i: clip_lo(*i).astype(env.out_dtype), name="res")
    return data, kernel, bias, out


def _inner(knobs, key):
    return int(knobs[key][1])


def schedule_conv2d_packed(env, output, knobs: dict):
    """TVM's ``schedule_conv2d_packed`` (spec 3.6) with the knob values in ``knobs``."""
    conv_op, ewise_ops, ewise_inputs = collect(output, CONV_TAG)
    s = create_schedule(output.op)
    conv = conv_op.output(0)
    data, kernel = conv_op.input_tensors
    if isinstance(data.op, ComputeOp) and "pad" in data.op.tag:
        cdata = data
        s[cdata].set_scope(env.inp_scope)
    else:
        cdata = s.cache_read(data, env.inp_scope, [conv])
    ckernel = s.cache_read(kernel, env.wgt_scope, [conv])
    s[conv].set_scope(env.acc_scope)
    cached_inputs = [s.cache_read(t, env.acc_scope, [consumer.output(0)]) for consumer, t in ewise_inputs]
    ewise_on_alu(env, s, ewise_ops)

    x_bo, x_co, x_i, x_j, x_bi, x_ci = s[output].op.axis
    x_co0, x_co1 = s[output].split(x_co, factor=_inner(knobs, "tile_co"))
    x_i0, x_i1 = s[output].split(x_i, factor=_inner(knobs, "tile_h"))
    x_j0, x_j1 = s[output].split(x_j, factor=_inner(knobs, "tile_w"))
    s[output].reorder(x_bo, x_i0, x_co0, x_j0, x_co1, x_i1, x_j1, x_bi, x_ci)
    store_pt = x_j0

    s[conv].compute_at(s[output], store_pt)
    for op in ewise_ops:
        s[op.output(0)].compute_at(s[output], store_pt)
    for t in cached_inputs:
        s[t].compute_at(s[output], store_pt)
        s[t].pragma(s[t].op.axis[0], env.dma_copy)

    if knobs.get("oc_nthread", 1) > 1:
        bind_virtual_threads(s, output, x_co0, knobs["oc_nthread"], x_bo)
    if knobs.get("h_nthread", 1) > 1:
        bind_virtual_threads(s, output, x_i0, knobs["h_nthread"], x_bo)

    x_bo, x_co, x_i, x_j, x_bi, x_ci = s[conv].op.axis
    k_o, d_i, d_j, k_i = s[conv].op.reduce_axis
    s[conv].reorder(x_bo, k_o, x_j, d_j, d_i, x_co, x_i, x_bi, x_ci, k_i)
    tile_reduction_and_tensorize(env, s, conv, k_o, _inner(knobs, "tile_ci"), [cdata, ckernel], x_bi, output, x_co1)
    return s
