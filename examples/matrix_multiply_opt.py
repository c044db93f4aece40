"""Matrix multiply blocking: a 1x1024 by 1024x1024 GEMM tiled to fit the SRAMs, with a
shift / clip epilogue on the ALU (TVM tutorial optimize/matrix_multiply_opt.py, compiler spec 3.4).

    python examples/matrix_multiply_opt.py [--config PATH] [--out DIR] [--seed N]
"""

import numpy as np

from _tutorial import parse_args, run
from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.lowering.lower import lower
from vtasim.compiler.ops.data import draw, requant_shift
from vtasim.hw.config import load_config


def gemm_opt_schedule(env, batch_size=None, in_channels=1024, out_channels=1024, block=256):
    """Declare the fully connected layer with its requantization and block it; returns
    ``(s, [data, weight, res])``."""
    # ---- Computation declaration -------------------------------------------------------------
    # Fully connected layer dimensions (the parameters): 1024 x 1024, batch BATCH (TVM: 1, = BATCH on the
    # default config).
    if batch_size is None:
        batch_size = env.BATCH
    data_shape = (batch_size // env.BATCH, in_channels // env.BLOCK_IN, env.BATCH, env.BLOCK_IN)
    weight_shape = (out_channels // env.BLOCK_OUT, in_channels // env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN)
    output_shape = (batch_size // env.BATCH, out_channels // env.BLOCK_OUT, env.BATCH, env.BLOCK_OUT)
    # Reduction axes.
    ic = te.reduce_axis((0, in_channels // env.BLOCK_IN), name="ic")
    ic_tns = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    # Input placeholders.
    data = te.placeholder(data_shape, name="data", dtype=env.inp_dtype)
    weight = te.placeholder(weight_shape, name="weight", dtype=env.wgt_dtype)
    # The matrix multiply.
    res_gemm = te.compute(
        output_shape,
        lambda bo, co, bi, ci: te.sum(
            data[bo, ic, bi, ic_tns].astype(env.acc_dtype) * weight[co, ic, ci, ic_tns].astype(env.acc_dtype),
            axis=[ic, ic_tns]),
        name="res_gem")
    # Requantize: shift right, then clip to [0, 127].  TVM shifts by INP_WIDTH, which puts nearly every
    # output of a 1024-long reduction at a bound; the shift here comes from the reduction length
    # (vtasim.compiler.ops.data), so the outputs depend on the GEMM.
    inp_max = (1 << (env.INP_WIDTH - 1)) - 1
    shift = requant_shift(in_channels)
    res_shr = te.compute(output_shape, lambda *i: res_gemm(*i) >> shift, name="res_shr")
    res_max = te.compute(output_shape, lambda *i: te.max(res_shr(*i), 0), "res_max")
    res_min = te.compute(output_shape, lambda *i: te.min(res_max(*i), inp_max), "res_min")
    # Cast to int8.
    res = te.compute(output_shape, lambda *i: res_min(*i).astype(env.inp_dtype), name="res")

    # ---- Blocking the computation ------------------------------------------------------------
    s = te.create_schedule(res.op)
    # Cache reads of the inputs, SRAM scopes of the intermediate results.
    data_buf = s.cache_read(data, env.inp_scope, [res_gemm])
    weight_buf = s.cache_read(weight, env.wgt_scope, [res_gemm])
    s[res_gemm].set_scope(env.acc_scope)
    s[res_shr].set_scope(env.acc_scope)
    s[res_min].set_scope(env.acc_scope)
    s[res_max].set_scope(env.acc_scope)
    # Tiling: block x block channels (256 x 256).
    b_block = batch_size // env.BATCH
    i_block = block // env.BLOCK_IN
    o_block = block // env.BLOCK_OUT
    # Tile the output tensor along the batch and output channel dimensions.
    b, oc, b_tns, oc_tns = s[res].op.axis
    b_out, b_inn = s[res].split(b, b_block)
    oc_out, oc_inn = s[res].split(oc, o_block)
    s[res].reorder(b_out, oc_out, b_inn, oc_inn)
    # Compute the GEMM and the ALU stages per output tile.
    s[res_gemm].compute_at(s[res], oc_out)
    s[res_shr].compute_at(s[res], oc_out)
    s[res_max].compute_at(s[res], oc_out)
    s[res_min].compute_at(s[res], oc_out)
    # Tile the reduction axis and load one input-channel block of data and weights at a time.
    b_inn, oc_inn, b_tns, oc_tns = s[res_gemm].op.axis
    ic_out, ic_inn = s[res_gemm].split(ic, i_block)
    s[res_gemm].reorder(ic_out, b_inn, oc_inn, ic_inn, b_tns, oc_tns, ic_tns)
    s[data_buf].compute_at(s[res_gemm], ic_out)
    s[weight_buf].compute_at(s[res_gemm], ic_out)

    # ---- Lowering copies to DMA transfers, tensorization, ALU ops -----------------------------
    s[data_buf].pragma(s[data_buf].op.axis[0], env.dma_copy)
    s[weight_buf].pragma(s[weight_buf].op.axis[0], env.dma_copy)
    s[res].pragma(s[res].op.axis[2], env.dma_copy)
    s[res_gemm].tensorize(b_tns, env.gemm)
    s[res_shr].pragma(s[res_shr].op.axis[0], env.alu)
    s[res_max].pragma(s[res_max].op.axis[0], env.alu)
    s[res_min].pragma(s[res_min].op.axis[0], env.alu)
    return s, [data, weight, res]


def main(argv=None) -> int:
    args = parse_args(__doc__, argv)
    with Environment(load_config(args.config)) as env:
        s, (data, weight, res) = gemm_opt_schedule(env)
        print(lower(s, [data, weight, res], "my_gemm_opt"))
        # The layer dimensions declared above, read back from the tiled shapes.
        batch_size = data.shape[0] * env.BATCH
        in_channels = data.shape[1] * env.BLOCK_IN
        out_channels = weight.shape[0] * env.BLOCK_OUT
        num_ops = in_channels * out_channels * batch_size * 2
        inp_max = (1 << (env.INP_WIDTH - 1)) - 1

        # ---- Running the function ----------------------------------------------------------------
        rng = np.random.default_rng(args.seed)
        data_np = draw(rng, (batch_size, in_channels), data.dtype)
        weight_np = draw(rng, (out_channels, in_channels), weight.dtype)
        # Apply packing.
        data_packed = data_np.reshape(batch_size // env.BATCH, env.BATCH, in_channels // env.BLOCK_IN,
                                      env.BLOCK_IN).transpose((0, 2, 1, 3))
        weight_packed = weight_np.reshape(out_channels // env.BLOCK_OUT, env.BLOCK_OUT, in_channels // env.BLOCK_IN,
                                          env.BLOCK_IN).transpose((0, 2, 1, 3))

        # ---- Compilation (TVM: vta.build) ---------------------------------------------------------
        my_gemm = build(s, [data, weight, res], {"data": data_packed, "weight": weight_packed}, name="my_gemm")
        print(my_gemm.func)

        # ---- Verifying correctness ---------------------------------------------------------------
        res_ref = np.dot(data_np.astype(env.acc_dtype), weight_np.T.astype(env.acc_dtype))
        res_ref = res_ref >> requant_shift(in_channels)
        res_ref = np.clip(res_ref, 0, inp_max)
        res_ref = res_ref.astype(res.dtype)
        res_ref = res_ref.reshape(batch_size // env.BATCH, env.BATCH, out_channels // env.BLOCK_OUT,
                                  env.BLOCK_OUT).transpose((0, 2, 1, 3))
        rc = run(my_gemm, "res", res_ref, args.out)
    print(f"{num_ops} ops (2 per MAC)")
    print("Successful blocked matrix multiply test!" if rc == 0 else "Blocked matrix multiply test FAILED")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
