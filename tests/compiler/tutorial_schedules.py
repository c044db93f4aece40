"""The four TVM VTA tutorial schedules (compiler spec 3.2-3.5) written in compiler.te /
compiler.schedule the way a TVM user writes them, with the sizes as parameters so tests can
shrink them.  Each builder returns ``(schedule, args)``; ``args`` ends with the output."""

from compiler import te
from compiler.schedule import create_schedule


def vector_add(env, m=64):
    shape = (1, m, env.BATCH, env.BLOCK_OUT)
    A = te.placeholder(shape, env.acc_dtype, "A")
    B = te.placeholder(shape, env.acc_dtype, "B")
    A_buf = te.compute(shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(shape, lambda *i: B(*i), "B_buf")
    C_buf = te.compute(shape, lambda *i: A_buf(*i).astype(env.acc_dtype) + B_buf(*i).astype(env.acc_dtype), "C_buf")
    C = te.compute(shape, lambda *i: C_buf(*i).astype(env.inp_dtype), "C")
    s = create_schedule(C.op)
    s[A_buf].set_scope(env.acc_scope)
    s[B_buf].set_scope(env.acc_scope)
    s[C_buf].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C_buf].pragma(s[C_buf].op.axis[0], env.alu)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    return s, [A, B, C]


def simple_gemm(env, o=1, n=16, m=16):
    A = te.placeholder((o, n, env.BATCH, env.BLOCK_IN), env.inp_dtype, "A")
    B = te.placeholder((m, n, env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, "B")
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(B.shape, lambda *i: B(*i), "B_buf")
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    C_buf = te.compute(
        (o, m, env.BATCH, env.BLOCK_OUT),
        lambda bo, co, bi, ci: te.sum(
            A_buf[bo, ko, bi, ki].astype(env.acc_dtype) * B_buf[co, ko, ci, ki].astype(env.acc_dtype),
            axis=[ko, ki]),
        name="C_buf")
    C = te.compute(C_buf.shape, lambda *i: C_buf(*i).astype(env.inp_dtype), name="C")
    s = create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    s[A_buf].compute_at(s[C_buf], ko)
    s[B_buf].compute_at(s[C_buf], ko)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    bo, co, bi, ci = s[C_buf].op.axis
    s[C_buf].reorder(ko, bo, co, bi, ci, ki)
    s[C_buf].tensorize(bi, env.gemm)
    return s, [A, B, C]


def blocked_gemm(env, batch=1, in_channels=1024, out_channels=1024, block=256):
    data_shape = (batch // env.BATCH, in_channels // env.BLOCK_IN, env.BATCH, env.BLOCK_IN)
    weight_shape = (out_channels // env.BLOCK_OUT, in_channels // env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN)
    output_shape = (batch // env.BATCH, out_channels // env.BLOCK_OUT, env.BATCH, env.BLOCK_OUT)
    ic = te.reduce_axis((0, in_channels // env.BLOCK_IN), name="ic")
    ic_tns = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    data = te.placeholder(data_shape, name="data", dtype=env.inp_dtype)
    weight = te.placeholder(weight_shape, name="weight", dtype=env.wgt_dtype)
    res_gemm = te.compute(
        output_shape,
        lambda bo, co, bi, ci: te.sum(
            data[bo, ic, bi, ic_tns].astype(env.acc_dtype) * weight[co, ic, ci, ic_tns].astype(env.acc_dtype),
            axis=[ic, ic_tns]),
        name="res_gem")
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    res_shr = te.compute(output_shape, lambda *i: res_gemm(*i) >> env.INP_WIDTH, name="res_shr")
    res_max = te.compute(output_shape, lambda *i: te.max(res_shr(*i), 0), "res_max")
    res_min = te.compute(output_shape, lambda *i: te.min(res_max(*i), inp_max), "res_min")
    res = te.compute(output_shape, lambda *i: res_min(*i).astype(env.inp_dtype), name="res")
    s = create_schedule(res.op)
    data_buf = s.cache_read(data, env.inp_scope, [res_gemm])
    weight_buf = s.cache_read(weight, env.wgt_scope, [res_gemm])
    s[res_gemm].set_scope(env.acc_scope)
    s[res_shr].set_scope(env.acc_scope)
    s[res_min].set_scope(env.acc_scope)
    s[res_max].set_scope(env.acc_scope)
    b_block = batch // env.BATCH
    i_block = block // env.BLOCK_IN
    o_block = block // env.BLOCK_OUT
    b, oc, b_tns, oc_tns = s[res].op.axis
    b_out, b_inn = s[res].split(b, b_block)
    oc_out, oc_inn = s[res].split(oc, o_block)
    s[res].reorder(b_out, oc_out, b_inn, oc_inn)
    s[res_gemm].compute_at(s[res], oc_out)
    s[res_shr].compute_at(s[res], oc_out)
    s[res_max].compute_at(s[res], oc_out)
    s[res_min].compute_at(s[res], oc_out)
    b_inn, oc_inn, b_tns, oc_tns = s[res_gemm].op.axis
    ic_out, ic_inn = s[res_gemm].split(ic, i_block)
    s[res_gemm].reorder(ic_out, b_inn, oc_inn, ic_inn, b_tns, oc_tns, ic_tns)
    s[data_buf].compute_at(s[res_gemm], ic_out)
    s[weight_buf].compute_at(s[res_gemm], ic_out)
    s[data_buf].pragma(s[data_buf].op.axis[0], env.dma_copy)
    s[weight_buf].pragma(s[weight_buf].op.axis[0], env.dma_copy)
    s[res].pragma(s[res].op.axis[2], env.dma_copy)
    s[res_gemm].tensorize(b_tns, env.gemm)
    s[res_shr].pragma(s[res_shr].op.axis[0], env.alu)
    s[res_max].pragma(s[res_max].op.axis[0], env.alu)
    s[res_min].pragma(s[res_min].op.axis[0], env.alu)
    return s, [data, weight, res]


def conv2d(env, height=14, width=14, in_channels=256, out_channels=256, oc_block=128, h_block=7,
           w_block=14, v_threads=2):
    batch_size, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w = 1, 3, 3, 1, 1, 1, 1
    data_shape = (batch_size // env.BATCH, in_channels // env.BLOCK_IN, height, width, env.BATCH, env.BLOCK_IN)
    kernel_shape = (out_channels // env.BLOCK_OUT, in_channels // env.BLOCK_IN, kernel_h, kernel_w,
                    env.BLOCK_OUT, env.BLOCK_IN)
    fout_height = (height + 2 * pad_h - kernel_h) // stride_h + 1
    fout_width = (width + 2 * pad_w - kernel_w) // stride_w + 1
    output_shape = (batch_size // env.BATCH, out_channels // env.BLOCK_OUT, fout_height, fout_width,
                    env.BATCH, env.BLOCK_OUT)
    dy = te.reduce_axis((0, kernel_h), name="dy")
    dx = te.reduce_axis((0, kernel_w), name="dx")
    ic = te.reduce_axis((0, in_channels // env.BLOCK_IN), name="ic")
    ic_tns = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    data = te.placeholder(data_shape, name="data", dtype=env.inp_dtype)
    kernel = te.placeholder(kernel_shape, name="kernel", dtype=env.wgt_dtype)
    data_buf = te.pad(data, (0, 0, pad_h, pad_w, 0, 0), name="data_buf")
    kernel_buf = te.compute(kernel_shape, lambda *i: kernel(*i), "kernel_buf")
    res_conv = te.compute(
        output_shape,
        lambda bo, co, i, j, bi, ci: te.sum(
            data_buf[bo, ic, i * stride_h + dy, j * stride_w + dx, bi, ic_tns].astype(env.acc_dtype)
            * kernel_buf[co, ic, dy, dx, ci, ic_tns].astype(env.acc_dtype),
            axis=[ic, dy, dx, ic_tns]),
        name="res_conv")
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    res_shr = te.compute(output_shape, lambda *i: res_conv(*i) >> 8, name="res_shr")
    res_max = te.compute(output_shape, lambda *i: te.max(res_shr(*i), 0), "res_max")
    res_min = te.compute(output_shape, lambda *i: te.min(res_max(*i), inp_max), "res_min")
    res = te.compute(output_shape, lambda *i: res_min(*i).astype(env.inp_dtype), name="res")
    s = create_schedule(res.op)
    b_block = batch_size // env.BATCH
    oc_block_ = oc_block // env.BLOCK_OUT
    ic_block = 16 // env.BLOCK_IN if env.BLOCK_IN <= 16 else 1
    b, oc, y, x, b_tns, oc_tns = s[res].op.axis
    b_out, b_inn = s[res].split(b, factor=b_block)
    oc_out, oc_inn = s[res].split(oc, factor=oc_block_)
    y_out, y_inn = s[res].split(y, factor=h_block)
    x_out, x_inn = s[res].split(x, factor=w_block)
    s[res].reorder(b_out, oc_out, y_out, x_out, b_inn, oc_inn, y_inn, x_inn, b_tns, oc_tns)
    s[res_conv].compute_at(s[res], x_out)
    s[res_shr].compute_at(s[res], x_out)
    s[res_max].compute_at(s[res], x_out)
    s[res_min].compute_at(s[res], x_out)
    b_inn, oc_inn, y_inn, x_inn, b_tns, oc_tns = s[res_conv].op.axis
    ic_out, ic_inn = s[res_conv].split(ic, factor=ic_block)
    s[res_conv].reorder(ic_out, b_inn, oc_inn, y_inn, ic_inn, dy, dx, x_inn, b_tns, oc_tns, ic_tns)
    if v_threads > 1:
        _, tx = s[res].split(oc_out, factor=v_threads)
        s[res].reorder(tx, b_out)
        s[res].bind(tx, te.thread_axis("cthread"))
    s[data_buf].set_scope(env.inp_scope)
    s[kernel_buf].set_scope(env.wgt_scope)
    s[res_conv].set_scope(env.acc_scope)
    s[res_shr].set_scope(env.acc_scope)
    s[res_min].set_scope(env.acc_scope)
    s[res_max].set_scope(env.acc_scope)
    s[data_buf].compute_at(s[res_conv], ic_out)
    s[kernel_buf].compute_at(s[res_conv], ic_out)
    s[data_buf].pragma(s[data_buf].op.axis[0], env.dma_copy)
    s[kernel_buf].pragma(s[kernel_buf].op.axis[0], env.dma_copy)
    s[res].pragma(s[res].op.axis[4], env.dma_copy)
    s[res_conv].tensorize(b_tns, env.gemm)
    s[res_shr].pragma(s[res_shr].op.axis[0], env.alu)
    s[res_max].pragma(s[res_max].op.axis[0], env.alu)
    s[res_min].pragma(s[res_min].op.axis[0], env.alu)
    return s, [data, kernel, res]


def topi_conv2d(env, height=14, width=14, in_channels=64, out_channels=64, kernel=3, pad=1, stride=1,
                tile_h=(1, 14), tile_w=(1, 14), tile_ci=(4, 1), tile_co=(2, 2), oc_nthread=2, h_nthread=1):
    """topi's conv2d_packed + schedule_conv2d_packed (compiler spec 3.6) with the fused epilogue of
    spec 7.1 (>> 8, + bias, clip by min then max, cast), knobs given as [outer, inner] splits."""
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
        name="res", tag="conv2d_dense")
    shr = te.compute(oshape, lambda *i: conv(*i) >> 8, "T_right_shift", tag="elemwise")
    add = te.compute(oshape, lambda b, c, y, x, bi, ci: shr[b, c, y, x, bi, ci] + bias[0, c, 0, 0, bi, ci],
                     "T_add", tag="broadcast")
    clip_a = te.compute(oshape, lambda *i: te.min(add(*i), 127), "clipA")
    clip_b = te.compute(oshape, lambda *i: te.max(clip_a(*i), 0), "clipB")
    output = te.compute(oshape, lambda *i: clip_b(*i).astype(env.out_dtype), "T_cast", tag="elemwise")
    ewise_ops = [shr.op, add.op, clip_a.op, clip_b.op]
    s = create_schedule(output.op)
    if pad:
        cdata = pad_data
        s[pad_data].set_scope(env.inp_scope)
    else:
        cdata = s.cache_read(data, env.inp_scope, [conv])
    ckernel = s.cache_read(kern, env.wgt_scope, [conv])
    s[conv].set_scope(env.acc_scope)
    cbias = s.cache_read(bias, env.acc_scope, [add])
    for op in ewise_ops:
        s[op].set_scope(env.acc_scope)
        s[op].pragma(s[op].op.axis[0], env.alu)
    x_bo, x_co, x_i, x_j, x_bi, x_ci = s[output].op.axis
    x_co0, x_co1 = s[output].split(x_co, factor=tile_co[1])
    x_i0, x_i1 = s[output].split(x_i, factor=tile_h[1])
    x_j0, x_j1 = s[output].split(x_j, factor=tile_w[1])
    s[output].reorder(x_bo, x_i0, x_co0, x_j0, x_co1, x_i1, x_j1, x_bi, x_ci)
    store_pt = x_j0
    s[conv].compute_at(s[output], store_pt)
    for op in ewise_ops:
        s[op].compute_at(s[output], store_pt)
    s[cbias].compute_at(s[output], store_pt)
    s[cbias].pragma(s[cbias].op.axis[0], env.dma_copy)
    if oc_nthread > 1:
        _, v_t = s[output].split(x_co0, factor=oc_nthread)
        s[output].reorder(v_t, x_bo)
        s[output].bind(v_t, te.thread_axis("cthread"))
    if h_nthread > 1:
        _, v_t = s[output].split(x_i0, factor=h_nthread)
        s[output].reorder(v_t, x_bo)
        s[output].bind(v_t, te.thread_axis("cthread"))
    x_bo, x_co, x_i, x_j, x_bi, x_ci = s[conv].op.axis
    k_o, d_i, d_j, k_i = s[conv].op.reduce_axis
    s[conv].reorder(x_bo, k_o, x_j, d_j, d_i, x_co, x_i, x_bi, x_ci, k_i)
    k_o, _ = s[conv].split(k_o, factor=tile_ci[1])
    s[cdata].compute_at(s[conv], k_o)
    s[ckernel].compute_at(s[conv], k_o)
    s[cdata].pragma(s[cdata].op.axis[0], env.dma_copy)
    s[ckernel].pragma(s[ckernel].op.axis[0], env.dma_copy)
    s[conv].tensorize(x_bi, env.gemm)
    s[output].pragma(x_co1, env.dma_copy)
    return s, [data, kern, bias, output]
