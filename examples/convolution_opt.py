"""2D convolution optimization: ResNet-18's C8 layer (14x14, 256 -> 256 channels, 3x3, pad 1) tiled
for the SRAMs, with two virtual threads to overlap loads and compute (TVM tutorial
optimize/convolution_opt.py, compiler spec 3.5).

    python examples/convolution_opt.py [--config PATH] [--out DIR] [--seed N] [--reduce R]
"""

import numpy as np

from _tutorial import parse_args, run
from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.lowering.lower import lower
from vtasim.compiler.ops.data import draw, requant_shift
from vtasim.hw.config import load_config


# The kernel geometry of the layer (fixed; the sizes are conv2d_schedule's parameters): 3x3, zero
# padding 1, stride 1, as (h, w) pairs.
KERNEL = (3, 3)
PAD = (1, 1)
STRIDE = (1, 1)


def conv2d_nchw(data, kernel, stride, pad):
    """Plain numpy NCHW convolution (TVM: topi.testing.conv2d_nchw_python), int64 accumulation."""
    n, _, h, w = data.shape
    oc, _, kh, kw = kernel.shape
    padded = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - kh) // stride[0] + 1
    ow = (w + 2 * pad[1] - kw) // stride[1] + 1
    out = np.zeros((n, oc, oh, ow), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            window = padded[:, :, dy:dy + stride[0] * oh:stride[0], dx:dx + stride[1] * ow:stride[1]]
            out += np.einsum("nchw,oc->nohw", window, kernel[:, :, dy, dx].astype(np.int64))
    return out


def conv2d_schedule(env, height=14, width=14, in_channels=256, out_channels=256, oc_block=128, h_block=7,
                    w_block=14, v_threads=2):
    """Declare the convolution with its requantization, block it and bind the virtual threads;
    returns ``(s, [data, kernel, res])``."""
    # ---- Computation declaration -------------------------------------------------------------
    # 2D convolution layer dimensions taken from ResNet-18 (C8): the parameters, and the fixed
    # 3x3 kernel, padding and stride above.
    batch_size = env.BATCH          # TVM: 1 (= BATCH on the default config)
    kernel_h, kernel_w = KERNEL
    pad_h, pad_w = PAD
    stride_h, stride_w = STRIDE
    assert batch_size % env.BATCH == 0
    assert in_channels % env.BLOCK_IN == 0
    assert out_channels % env.BLOCK_OUT == 0
    # Input feature map: (N, IC, H, W, n, ic); kernel: (OC, IC, H, W, oc, ic).
    data_shape = (batch_size // env.BATCH, in_channels // env.BLOCK_IN, height, width, env.BATCH, env.BLOCK_IN)
    kernel_shape = (out_channels // env.BLOCK_OUT, in_channels // env.BLOCK_IN, kernel_h, kernel_w,
                    env.BLOCK_OUT, env.BLOCK_IN)
    # Derive output feature map dimensions.
    fout_height = (height + 2 * pad_h - kernel_h) // stride_h + 1
    fout_width = (width + 2 * pad_w - kernel_w) // stride_w + 1
    output_shape = (batch_size // env.BATCH, out_channels // env.BLOCK_OUT, fout_height, fout_width,
                    env.BATCH, env.BLOCK_OUT)
    # Convolution reduction axes.
    dy = te.reduce_axis((0, kernel_h), name="dy")
    dx = te.reduce_axis((0, kernel_w), name="dx")
    ic = te.reduce_axis((0, in_channels // env.BLOCK_IN), name="ic")
    ic_tns = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    # Input placeholders.
    data = te.placeholder(data_shape, name="data", dtype=env.inp_dtype)
    kernel = te.placeholder(kernel_shape, name="kernel", dtype=env.wgt_dtype)
    # Copy buffers: the input is zero-padded on the fly by the DMA.
    data_buf = te.pad(data, (0, 0, pad_h, pad_w, 0, 0), name="data_buf")
    kernel_buf = te.compute(kernel_shape, lambda *i: kernel(*i), "kernel_buf")
    # The 2D convolution.
    res_conv = te.compute(
        output_shape,
        lambda bo, co, i, j, bi, ci: te.sum(
            data_buf[bo, ic, i * stride_h + dy, j * stride_w + dx, bi, ic_tns].astype(env.acc_dtype)
            * kernel_buf[co, ic, dy, dx, ci, ic_tns].astype(env.acc_dtype),
            axis=[ic, dy, dx, ic_tns]),
        name="res_conv")
    # Shift, clip and cast.  TVM shifts by 8; the shift here comes from the reduction length
    # (vtasim.compiler.ops.data), so the outputs depend on the convolution instead of sitting at 0 or 127.
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    shift = requant_shift(in_channels * kernel_h * kernel_w)
    res_shr = te.compute(output_shape, lambda *i: res_conv(*i) >> shift, name="res_shr")
    res_max = te.compute(output_shape, lambda *i: te.max(res_shr(*i), 0), "res_max")
    res_min = te.compute(output_shape, lambda *i: te.min(res_max(*i), inp_max), "res_min")
    res = te.compute(output_shape, lambda *i: res_min(*i).astype(env.inp_dtype), name="res")

    # ---- Blocking the computation ------------------------------------------------------------
    s = te.create_schedule(res.op)
    # Tiling sizes (oc_block, h_block, w_block are parameters; oc_block in output channels).
    b_block = batch_size // env.BATCH
    oc_block = oc_block // env.BLOCK_OUT
    ic_block = 1        # TVM: 16 // BLOCK_IN; a padded DMA load holds one channel block (spec 4.2)
    # Tile the output tensor along the spatial and output channel dimensions.
    b, oc, y, x, b_tns, oc_tns = s[res].op.axis
    b_out, b_inn = s[res].split(b, factor=b_block)
    oc_out, oc_inn = s[res].split(oc, factor=oc_block)
    y_out, y_inn = s[res].split(y, factor=h_block)
    x_out, x_inn = s[res].split(x, factor=w_block)
    s[res].reorder(b_out, oc_out, y_out, x_out, b_inn, oc_inn, y_inn, x_inn, b_tns, oc_tns)
    # Move the intermediate computation into each output tile.
    s[res_conv].compute_at(s[res], x_out)
    s[res_shr].compute_at(s[res], x_out)
    s[res_max].compute_at(s[res], x_out)
    s[res_min].compute_at(s[res], x_out)
    # Tile the reduction: one of oc_inn / y_inn / x_inn right before the tensor axes, so that
    # consecutive GEMMs write different accumulator rows.
    b_inn, oc_inn, y_inn, x_inn, b_tns, oc_tns = s[res_conv].op.axis
    ic_out, ic_inn = s[res_conv].split(ic, factor=ic_block)
    s[res_conv].reorder(ic_out, b_inn, oc_inn, y_inn, ic_inn, dy, dx, x_inn, b_tns, oc_tns, ic_tns)

    # ---- Virtual threading: split the output channels over v_threads (2) threads -----------------
    if v_threads > 1:
        _, tx = s[res].split(oc_out, factor=v_threads)
        s[res].reorder(tx, b_out)
        s[res].bind(tx, te.thread_axis("cthread"))

    # ---- Lowering copies to DMA transfers, tensorization, ALU ops -----------------------------
    s[data_buf].set_scope(env.inp_scope)
    s[kernel_buf].set_scope(env.wgt_scope)
    s[res_conv].set_scope(env.acc_scope)
    s[res_shr].set_scope(env.acc_scope)
    s[res_min].set_scope(env.acc_scope)
    s[res_max].set_scope(env.acc_scope)
    # Block data and kernel cache reads.
    s[data_buf].compute_at(s[res_conv], ic_out)
    s[kernel_buf].compute_at(s[res_conv], ic_out)
    # DMA copies.
    s[data_buf].pragma(s[data_buf].op.axis[0], env.dma_copy)
    s[kernel_buf].pragma(s[kernel_buf].op.axis[0], env.dma_copy)
    s[res].pragma(s[res].op.axis[4], env.dma_copy)
    # GEMM intrinsic and ALU ops.
    s[res_conv].tensorize(b_tns, env.gemm)
    s[res_shr].pragma(s[res_shr].op.axis[0], env.alu)
    s[res_max].pragma(s[res_max].op.axis[0], env.alu)
    s[res_min].pragma(s[res_min].op.axis[0], env.alu)
    return s, [data, kernel, res]


def main(argv=None) -> int:
    args = parse_args(__doc__, argv, reduce=True)
    with Environment(load_config(args.config)) as env:
        # --reduce R shrinks the channels and the oc tile.
        s, (data, kernel, res) = conv2d_schedule(env, in_channels=256 // args.reduce,
                                                 out_channels=256 // args.reduce, oc_block=128 // args.reduce)
        print(lower(s, [data, kernel, res], "my_conv"))
        # The layer dimensions declared above, read back from the tiled shapes.
        batch_size = data.shape[0] * env.BATCH
        in_channels = data.shape[1] * env.BLOCK_IN
        height, width = data.shape[2:4]
        out_channels = kernel.shape[0] * env.BLOCK_OUT
        kernel_h, kernel_w = KERNEL
        fout_height, fout_width = res.shape[2:4]
        inp_max = (1 << (env.INP_WIDTH - 1)) - 1

        # ---- Running the function ----------------------------------------------------------------
        rng = np.random.default_rng(args.seed)
        data_np = draw(rng, (batch_size, in_channels, height, width), data.dtype)
        kernel_np = draw(rng, (out_channels, in_channels, kernel_h, kernel_w), kernel.dtype)
        # Apply packing: NCHW -> NCHW{n}n{c}c, OIHW -> OIHW{o}o{i}i.
        data_packed = data_np.reshape(batch_size // env.BATCH, env.BATCH, in_channels // env.BLOCK_IN, env.BLOCK_IN,
                                      height, width).transpose((0, 2, 4, 5, 1, 3))
        kernel_packed = kernel_np.reshape(out_channels // env.BLOCK_OUT, env.BLOCK_OUT, in_channels // env.BLOCK_IN,
                                          env.BLOCK_IN, kernel_h, kernel_w).transpose((0, 2, 4, 5, 1, 3))

        # ---- Compilation (TVM: vta.build) ---------------------------------------------------------
        my_conv = build(s, [data, kernel, res], {"data": data_packed, "kernel": kernel_packed}, name="my_conv")
        print(my_conv.func)

        # ---- Verifying correctness ---------------------------------------------------------------
        res_ref = conv2d_nchw(data_np, kernel_np, STRIDE, PAD)
        res_ref = res_ref >> requant_shift(in_channels * kernel_h * kernel_w)
        res_ref = np.clip(res_ref, 0, inp_max)
        res_ref = res_ref.astype(res.dtype)
        res_ref = res_ref.reshape(batch_size // env.BATCH, env.BATCH, out_channels // env.BLOCK_OUT, env.BLOCK_OUT,
                                  fout_height, fout_width).transpose((0, 2, 4, 5, 1, 3))
        rc = run(my_conv, "res", res_ref, args.out)
    num_ops = 2 * batch_size * fout_height * fout_width * kernel_h * kernel_w * out_channels * in_channels
    print(f"{num_ops} ops (2 per MAC)")
    print("Successful 2D convolution test!" if rc == 0 else "2D convolution test FAILED")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
