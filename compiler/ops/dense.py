"""``dense_packed`` and its schedule (compiler spec 3.7), written in the DSL.

Data ``(N/b, K/c, b, c)``, weights ``(O/o, K/i, o, i)``, output ``(N/b, O/o, b, o)``; knobs
``tile_b``, ``tile_ci``, ``tile_co`` and ``oc_nthread``.  ``fused_dense`` adds the epilogue of
TVM's dense benchmark (``>> shift``, clip to [0, 127], int8); ``plain_gemm`` only narrows to int8
(the store truncates, as fsim's does).
"""

from __future__ import annotations

from vtasim.compiler.dsl import te
from vtasim.compiler.dsl.schedule import create_schedule
from vtasim.compiler.ops._packed import bind_virtual_threads, collect, ewise_on_alu, tile_reduction_and_tensorize

__all__ = ["dense_packed", "schedule_dense_packed", "fused_dense", "plain_gemm"]

DENSE_TAG = "dense_pack"


def dense_packed(env, data, weight, out_dtype=None):
    out_dtype = out_dtype or env.acc_dtype
    nb, kb, bb, bi = data.shape
    ob, _, bo, _ = weight.shape
    k_o = te.reduce_axis((0, kb), name="k_o")
    k_i = te.reduce_axis((0, bi), name="k_i")
    return te.compute(
        (nb, ob, bb, bo),
        lambda b_o, c_o, b_i, c_i: te.sum(
            data[b_o, k_o, b_i, k_i].astype(out_dtype) * weight[c_o, k_o, c_i, k_i].astype(out_dtype),
            axis=[k_o, k_i]),
        name="dense", tag=DENSE_TAG)


def _placeholders(env, wl):
    data = te.placeholder((wl.batch // env.BATCH, wl.cin // env.BLOCK_IN, env.BATCH, env.BLOCK_IN),
                          env.inp_dtype, "data")
    weight = te.placeholder((wl.cout // env.BLOCK_OUT, wl.cin // env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN),
                            env.wgt_dtype, "weight")
    return data, weight


def fused_dense(env, wl, shift: int):
    """dense -> ``>> shift`` -> min 127 -> max 0 -> int8 (spec 7.2); returns ``(data, weight, output)``."""
    data, weight = _placeholders(env, wl)
    d = dense_packed(env, data, weight)
    shr = te.compute(d.shape, lambda *i: d(*i) >> shift, name="res_shr")
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    hi = te.compute(d.shape, lambda *i: te.min_(shr(*i), inp_max), name="res_min")
    lo = te.compute(d.shape, lambda *i: te.max_(hi(*i), 0), name="res_max")
    out = te.compute(d.shape, lambda *i: lo(*i).astype(env.out_dtype), name="res")
    return data, weight, out


def plain_gemm(env, wl):
    """int8 x int8 -> int32 accumulate -> int8 (truncating store); returns ``(data, weight, output)``."""
    data, weight = _placeholders(env, wl)
    d = dense_packed(env, data, weight)
    out = te.compute(d.shape, lambda *i: d(*i).astype(env.out_dtype), name="res")
    return data, weight, out


def schedule_dense_packed(env, output, knobs: dict):
    """TVM's ``schedule_dense_packed`` (spec 3.7) with the knob values in ``knobs``."""
    dense_op, ewise_ops, _ = collect(output, DENSE_TAG)
    s = create_schedule(output.op)
    dense = dense_op.output(0)
    data, weight = dense_op.input_tensors
    cdata = s.cache_read(data, env.inp_scope, [dense])
    cweight = s.cache_read(weight, env.wgt_scope, [dense])
    s[dense].set_scope(env.acc_scope)
    ewise_on_alu(env, s, ewise_ops)

    x_b, x_c, x_bt, x_ct = s[output].op.axis
    x_bo, x_bi = s[output].split(x_b, factor=int(knobs["tile_b"][1]))
    x_co, store_axis = s[output].split(x_c, factor=int(knobs["tile_co"][1]))
    s[output].reorder(x_bo, x_co, x_bi, store_axis, x_bt, x_ct)
    store_pt = x_co
    if knobs.get("oc_nthread", 1) > 1:
        # TVM splits the store point after compute_at and attaches where its value is known, i.e.
        # inside the outer part; splitting first and attaching there is the same loop nest
        store_pt = bind_virtual_threads(s, output, x_co, knobs["oc_nthread"], x_bo)
    s[dense].compute_at(s[output], store_pt)
    for op in ewise_ops:
        s[op.output(0)].compute_at(s[output], store_pt)

    x_bo, x_co, x_bi, x_ci = s[dense].op.axis
    k_o, k_i = s[dense].op.reduce_axis
    s[dense].reorder(x_bo, k_o, x_co, x_bi, x_ci, k_i)
    tile_reduction_and_tensorize(env, s, dense, k_o, int(knobs["tile_ci"][1]), [cdata, cweight], x_bi, output,
                                 store_axis)
    return s
