"""``group_conv2d_packed`` and its schedule: grouped, depthwise and dilated conv2d as VTA GEMMs.

The compute (after TVM's ``group_conv2d_packed``, with an explicit group axis) reads data in
``NCHW{b}n{c}c`` and a kernel packed per super-group, ``(SG, OB, IB, KH, KW, o, i)``, and writes
``(N/b, SG, OB, OH, OW, b, o)`` — the same bytes as ``NCHW{b}n{o}c`` with ``SG*OB`` channel blocks::

    out[n, g, c, y, x] = sum_{k_o < IB, r, s, k_i} data[n, g*IB + k_o, y*S + r*D, x*S + s*D, :, k_i]
                                                   * kernel[g, c, k_o, r, s, :, k_i]

A super-group is one group when a group's channels are whole blocks; when groups are smaller than a
block (depthwise: one channel each) ``fold`` neighbouring groups share a block and
:func:`pack_group_kernel` writes their weights block-diagonally (zeros between groups), so every
GEMM uop still works on whole blocks — BLOCK_IN useful products of BLOCK_IN x BLOCK_OUT for depthwise.
Dilation ``D`` is free: the input tile is loaded with its dilated halo and the GEMM reads it with
stride ``D`` (the uop's source index), so the DMA pattern is the plain conv2d's.

The schedule is ``schedule_conv_family`` with roles ``bgcyxBC``: knobs ``tile_b/h/w/ci/co`` (``ci``
and ``co`` split one super-group's blocks), ``oc_nthread`` virtual threads over the super-groups,
``h_nthread`` over the row tiles.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.dsl import te
from vtasim.compiler.ops.depthwise_alu import alu_program
from vtasim.compiler.ops.conv_family import bias_shape, fused_epilogue, schedule_conv_family
from vtasim.compiler.ops.layout import pack_nchw, unpack_nchw
from vtasim.compiler.ops.visible_data import visible_conv_inputs
from vtasim.compiler.tuning.workloads_grouped import GroupConv2d

__all__ = ["group_conv2d_packed", "schedule_group_conv2d_packed", "fused_group_conv2d", "pack_group_kernel",
           "unpack_group_output", "group_program", "group_inputs", "ROLES"]

GROUP_TAG = "packed_group_conv2d"
ROLES = "bgcyxBC"


def group_conv2d_packed(env, data, kernel, padding, strides, dilation=(1, 1), out_dtype=None):
    """Packed grouped conv2d; ``padding``, ``strides`` and ``dilation`` are (h, w) pairs."""
    out_dtype = out_dtype or env.acc_dtype
    ph, pw = padding
    (sh, sw), (dh, dw) = strides, dilation
    if ph or pw:
        data = te.pad(data, (0, 0, ph, pw, 0, 0), name="data_pad")
    nb, _, h, w, bb, _ = data.shape
    sg, ob, ib, kh, kw, bo, bi = kernel.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    k_o = te.reduce_axis((0, ib), name="k_o")
    d_i = te.reduce_axis((0, kh), name="d_i")
    d_j = te.reduce_axis((0, kw), name="d_j")
    k_i = te.reduce_axis((0, bi), name="k_i")
    return te.compute(
        (nb, sg, ob, oh, ow, bb, bo),
        lambda b_o, g, c_o, i, j, b_i, c_i: te.sum(
            data[b_o, g * ib + k_o, i * sh + d_i * dh, j * sw + d_j * dw, b_i, k_i].astype(out_dtype)
            * kernel[g, c_o, k_o, d_i, d_j, c_i, k_i].astype(out_dtype),
            axis=[k_o, d_i, d_j, k_i]),
        name="group_conv2d", tag=GROUP_TAG)


def _shapes(env, wl):
    sg, ib, ob, _ = wl.packing(env.cfg)
    data = (wl.batch // env.BATCH, wl.cin // env.BLOCK_IN, wl.h, wl.w, env.BATCH, env.BLOCK_IN)
    kernel = (sg, ob, ib, wl.k, wl.k, env.BLOCK_OUT, env.BLOCK_IN)
    return data, kernel


def fused_group_conv2d(env, wl):
    """``(data, kernel, bias, output)``: the grouped conv of ``wl`` with the conv2d.* epilogue."""
    dshape, kshape = _shapes(env, wl)
    data = te.placeholder(dshape, env.inp_dtype, "data")
    kernel = te.placeholder(kshape, env.wgt_dtype, "kernel")
    conv = group_conv2d_packed(env, data, kernel, (wl.pad, wl.pad), (wl.stride, wl.stride),
                               (wl.dilation, wl.dilation))
    bias = te.placeholder(bias_shape(conv.shape, ROLES), env.acc_dtype, "bias")
    return data, kernel, bias, fused_epilogue(env, conv, bias, ROLES)


def pack_group_kernel(w: np.ndarray, groups: int, cfg) -> np.ndarray:
    """OIHW weights ``(COUT, CIN/groups, KH, KW)`` -> the super-group layout ``(SG, OB, IB, KH, KW, o, i)``
    (block-diagonal where groups share a block)."""
    cout, cpg, kh, kw = w.shape
    wl = GroupConv2d("pack", kh, kw, cpg * groups, cout, kh, 0, 1, groups=groups)
    sg, ib, ob, fold = wl.packing(cfg)
    opg = cout // groups
    dense = np.zeros((sg, ob * cfg.block_out, ib * cfg.block_in, kh, kw), dtype=np.int8)
    for gi in range(groups):
        s, local = divmod(gi, fold)
        dense[s, local * opg:(local + 1) * opg, local * cpg:(local + 1) * cpg] = w[gi * opg:(gi + 1) * opg]
    dense = dense.reshape(sg, ob, cfg.block_out, ib, cfg.block_in, kh, kw)
    return np.ascontiguousarray(dense.transpose(0, 1, 3, 5, 6, 2, 4))


def pack_group_bias(bias: np.ndarray, shape) -> np.ndarray:
    """A per-channel (COUT,) vector in the epilogue's bias layout ``shape`` (batch lanes broadcast)."""
    _, sg, ob, _, _, bb, bo = shape
    return np.ascontiguousarray(np.broadcast_to(bias.reshape(1, sg, ob, 1, 1, 1, bo), shape)).astype(np.int32)


def unpack_group_output(y: np.ndarray) -> np.ndarray:
    """``(N/b, SG, OB, OH, OW, b, o)`` -> NCHW."""
    nb, sg, ob, oh, ow, bb, bo = y.shape
    return unpack_nchw(y.reshape(nb, sg * ob, oh, ow, bb, bo))


def group_inputs(env, wl, seed: int = 0):
    """``(logical, packed)`` inputs of ``wl``: logical ``x`` NCHW, ``w`` OIHW, ``bias`` (COUT,) drawn by
    :func:`visible_conv_inputs` (``CIN/groups * K * K`` products per output), and their packed forms."""
    rng = np.random.default_rng(seed)
    x, w, bias = visible_conv_inputs(rng, (wl.batch, wl.cin, wl.h, wl.w), (wl.cout, wl.cin // wl.groups, wl.k, wl.k),
                                     wl.cout, (wl.cin // wl.groups) * wl.k * wl.k)
    return {"x": x, "w": w, "bias": bias}, pack_group_inputs(env, wl, x, w, bias)


def pack_group_inputs(env, wl, x, w, bias) -> dict:
    """The placeholders' arrays (data, kernel, bias) from logical NCHW / OIHW / (COUT,) arrays."""
    sg, _, ob, _ = wl.packing(env.cfg)
    oshape = (wl.batch // env.BATCH, sg, ob, 1, 1, env.BATCH, env.BLOCK_OUT)
    return {"data": pack_nchw(x, env.BATCH, env.BLOCK_IN), "kernel": pack_group_kernel(w, wl.groups, env.cfg),
            "bias": pack_group_bias(bias, bias_shape(oshape, ROLES))}


def schedule_group_conv2d_packed(env, output, knobs: dict):
    """The schedule of a grouped conv2d (``schedule_conv_family`` with roles ``bgcyxBC``)."""
    return schedule_conv_family(env, output, knobs, GROUP_TAG, ROLES)


def group_program(env, wl, knobs: dict, seed: int = 0, logical: dict | None = None):
    """``(schedule, args, packed inputs)`` of a grouped/depthwise/dilated conv2d; ``logical`` holds
    ``x`` NCHW, ``w`` OIHW and ``bias`` (drawn by :func:`group_inputs` from ``seed`` when None).
    ``dw_alu = 1`` (depthwise only) compiles the ALU form of :mod:`vtasim.compiler.ops.depthwise_alu`."""
    if logical is None:
        logical = group_inputs(env, wl, seed)[0]
    if knobs.get("dw_alu", 0):
        return alu_program(env, wl, knobs, logical["x"], logical["w"], logical["bias"])
    data, kernel, bias, out = fused_group_conv2d(env, wl)
    packed = pack_group_inputs(env, wl, logical["x"], logical["w"], logical["bias"])
    return schedule_group_conv2d_packed(env, out, knobs), [data, kernel, bias, out], packed
