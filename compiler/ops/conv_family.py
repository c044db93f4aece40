"""What the grouped and the transposed convolution schedules share: the fused epilogue over any packed
output layout, and TVM's ``schedule_conv2d_packed`` steps written over named output axes.

The output axes are named by one letter each (``roles``):

====  ==========================================  ====  ==========================================
b     batch blocks                                 x     output columns (phase columns: ``x // S``)
g     super-groups (grouped conv only)             q     column phase ``x % S`` (transposed only)
c     output-channel blocks (of one group)         B     batch lanes (BATCH)
y     output rows (phase rows: ``y // S``)         C     output-channel lanes (BLOCK_OUT)
p     row phase ``y % S`` (transposed only)
====  ==========================================  ====  ==========================================

The reduction axes are ``(k_o, d_i, d_j, k_i)``: input-channel blocks, kernel rows, kernel columns,
input-channel lanes, as in ``conv2d_packed``.
"""

from __future__ import annotations

from vtasim.compiler.dsl import te
from vtasim.compiler.ops._packed import (DMA_LOAD_TAG, bind_virtual_threads, collect, ewise_on_alu,
                                  tile_reduction_and_tensorize)
from vtasim.compiler.dsl.schedule import create_schedule
from vtasim.compiler.dsl.tensor import ComputeOp

__all__ = ["fused_epilogue", "schedule_conv_family", "bias_shape"]


def bias_shape(shape, roles: str) -> tuple:
    """The per-channel bias of an output of ``shape``: extent 1 on every axis but g, c, B and C."""
    return tuple(n if r in "gcBC" else 1 for n, r in zip(shape, roles))


def fused_epilogue(env, conv, bias, roles: str, shift: int | None = None):
    """conv -> ``>> shift`` -> ``+ bias`` -> min 127 -> max 0 -> int8: the conv2d.* epilogue (spec 7.1;
    TVM's benchmark shifts by 8 = WGT_WIDTH, the default)."""
    shape = conv.shape
    keep = [r in "gcBC" for r in roles]
    shift = env.WGT_WIDTH if shift is None else shift
    shr = te.compute(shape, lambda *i: conv(*i) >> shift, name="res_shr")
    biased = te.compute(shape, lambda *i: shr(*i) + bias(*[v if k else 0 for v, k in zip(i, keep)]),
                        name="res_bias")
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    clip_hi = te.compute(shape, lambda *i: te.min_(biased(*i), inp_max), name="res_min")
    clip_lo = te.compute(shape, lambda *i: te.max_(clip_hi(*i), 0), name="res_max")
    return te.compute(shape, lambda *i: clip_lo(*i).astype(env.out_dtype), name="res")


def _inner(knobs, key):
    return int(knobs[key][1])


def schedule_conv_family(env, output, knobs: dict, tag: str, roles: str, taps_outer: bool = True):
    """TVM's conv2d schedule (spec 3.6) for an output with axes ``roles``: tiles of ``tile_h`` x
    ``tile_w`` x ``tile_co`` (phases whole inside a tile), the reduction split by ``tile_ci``,
    ``oc_nthread`` virtual threads over the super-groups (``g``) or else the channel tiles,
    ``h_nthread`` over the row tiles.  ``taps_outer=False`` keeps TVM's conv stage order
    ``(b, k_o, x, d_j, d_i, c, y)`` (``conv2d_packed``: the TopHub records were tuned for it)."""
    conv_op, ewise_ops, ewise_inputs = collect(output, tag)
    # an epilogue operand loaded whole into the accumulator (a residual: LOAD ACC_8BIT per tile)
    loads = [op for op in ewise_ops if op.tag == DMA_LOAD_TAG]
    ewise_ops = [op for op in ewise_ops if op.tag != DMA_LOAD_TAG]
    ewise_inputs = [(c, t) for c, t in ewise_inputs if c.tag != DMA_LOAD_TAG]
    s = create_schedule(output.op)
    conv = conv_op.output(0)
    data, kernel = conv_op.input_tensors
    if isinstance(data.op, ComputeOp) and "pad" in data.op.tag:
        cdata = data                      # the pad stage in the input scratchpad: the DMA pads
        s[cdata].set_scope(env.inp_scope)
    else:
        cdata = s.cache_read(data, env.inp_scope, [conv])
    ckernel = s.cache_read(kernel, env.wgt_scope, [conv])
    s[conv].set_scope(env.acc_scope)
    cached_inputs = [s.cache_read(t, env.acc_scope, [consumer.output(0)]) for consumer, t in ewise_inputs]
    ewise_on_alu(env, s, ewise_ops)

    ax = dict(zip(roles, s[output].op.axis))
    c0, c1 = s[output].split(ax["c"], factor=_inner(knobs, "tile_co"))
    y0, y1 = s[output].split(ax["y"], factor=_inner(knobs, "tile_h"))
    x0, x1 = s[output].split(ax["x"], factor=_inner(knobs, "tile_w"))
    opt = {r: [ax[r]] if r in ax else [] for r in "gpq"}
    s[output].reorder(ax["b"], y0, *opt["g"], c0, x0, c1, y1, *opt["p"], x1, *opt["q"], ax["B"], ax["C"])
    s[conv].compute_at(s[output], x0)
    for op in ewise_ops:
        s[op.output(0)].compute_at(s[output], x0)
    for t in cached_inputs + [op.output(0) for op in loads]:
        s[t].set_scope(env.acc_scope)
        s[t].compute_at(s[output], x0)
        s[t].pragma(s[t].op.axis[0], env.dma_copy)
    if knobs.get("oc_nthread", 1) > 1:
        bind_virtual_threads(s, output, ax["g"] if "g" in ax else c0, knobs["oc_nthread"], ax["b"])
    if knobs.get("h_nthread", 1) > 1:
        bind_virtual_threads(s, output, y0, knobs["h_nthread"], ax["b"])

    cx = dict(zip(roles, s[conv].op.axis))
    copt = {r: [cx[r]] if r in cx else [] for r in "gpq"}
    k_o, d_i, d_j, k_i = s[conv].op.reduce_axis
    # the taps outermost (the two loops fold_uop_loop makes hardware loops), every pixel of the tile
    # inside: consecutive uops of the kernel write different accumulator rows whatever the tile shape
    # (VerifyDep), where TVM's order (x, d_j, d_i, c, y) needs c * y >= 3
    if taps_outer:
        s[conv].reorder(cx["b"], *copt["g"], k_o, d_j, d_i, cx["x"], *copt["q"], *copt["p"], cx["c"], cx["y"],
                        cx["B"], cx["C"], k_i)
    else:
        s[conv].reorder(cx["b"], *copt["g"], k_o, cx["x"], *copt["q"], d_j, d_i, *copt["p"], cx["c"], cx["y"],
                        cx["B"], cx["C"], k_i)
    tile_reduction_and_tensorize(env, s, conv, k_o, _inner(knobs, "tile_ci"), [cdata, ckernel], cx["B"],
                                 output, c1)
    return s
