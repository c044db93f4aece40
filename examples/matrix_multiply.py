"""Simple matrix multiply on the GEMM core (TVM tutorial matrix_multiply.py, compiler spec 3.3).

    python examples/matrix_multiply.py [--config PATH] [--out DIR] [--seed N]
"""

import numpy as np

from _tutorial import parse_args, run
from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.lowering.lower import lower
from vtasim.hw.config import load_config


def gemm_schedule(env, o=1, n=16, m=16):
    """Declare the matrix multiply and schedule it; returns ``(s, [A, B, C])``."""
    # ---- Computation declaration -------------------------------------------------------------
    # Sizes (the parameters): output channel factor m: 16 x BLOCK_OUT; reduction factor n: 16 x BLOCK_IN;
    # batch o: 1 x BATCH.
    # A: (o, n, BATCH, BLOCK_IN) int8 activations; B: (m, n, BLOCK_OUT, BLOCK_IN) int8 weights.
    A = te.placeholder((o, n, env.BATCH, env.BLOCK_IN), name="A", dtype=env.inp_dtype)
    B = te.placeholder((m, n, env.BLOCK_OUT, env.BLOCK_IN), name="B", dtype=env.wgt_dtype)
    # Copy stages (DMA loads into the input and weight SRAMs).
    A_buf = te.compute((o, n, env.BATCH, env.BLOCK_IN), lambda *i: A(*i), "A_buf")
    B_buf = te.compute((m, n, env.BLOCK_OUT, env.BLOCK_IN), lambda *i: B(*i), "B_buf")
    # Outer and inner reduction axes.
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    # The matrix multiply, accumulated in int32.
    C_buf = te.compute(
        (o, m, env.BATCH, env.BLOCK_OUT),
        lambda bo, co, bi, ci: te.sum(
            A_buf[bo, ko, bi, ki].astype(env.acc_dtype) * B_buf[co, ko, ci, ki].astype(env.acc_dtype),
            axis=[ko, ki]),
        name="C_buf")
    # Cast the result back to int8.
    C = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: C_buf(*i).astype(env.inp_dtype), name="C")

    # ---- Scheduling the computation ----------------------------------------------------------
    s = te.create_schedule(C.op)
    # Buffer scopes: each intermediate tensor to its SRAM.
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    # Move the loads into the reduction loop so one ko slice is resident at a time.
    s[A_buf].compute_at(s[C_buf], ko)
    s[B_buf].compute_at(s[C_buf], ko)
    # DMA transfers for the loads and the store.
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    # Tensorization: the innermost (bi, ci, ki) block becomes one GEMM intrinsic.
    s[C_buf].reorder(ko, s[C_buf].op.axis[0], s[C_buf].op.axis[1], s[C_buf].op.axis[2],
                     s[C_buf].op.axis[3], ki)
    s[C_buf].tensorize(s[C_buf].op.axis[2], env.gemm)
    return s, [A, B, C]


def main(argv=None) -> int:
    args = parse_args(__doc__, argv)
    with Environment(load_config(args.config)) as env:
        s, (A, B, C) = gemm_schedule(env)
        print(lower(s, [A, B, C], "my_gemm"))
        o, n = A.shape[:2]          # the batch and reduction factors declared above
        m = B.shape[0]              # the output channel factor

        # ---- Running the function ----------------------------------------------------------------
        rng = np.random.default_rng(args.seed)
        A_orig = rng.integers(-128, 128, size=(o * env.BATCH, n * env.BLOCK_IN)).astype(A.dtype)
        B_orig = rng.integers(-128, 128, size=(m * env.BLOCK_OUT, n * env.BLOCK_IN)).astype(B.dtype)
        # Pack into the tiled layouts.
        A_packed = A_orig.reshape(o, env.BATCH, n, env.BLOCK_IN).transpose((0, 2, 1, 3))
        B_packed = B_orig.reshape(m, env.BLOCK_OUT, n, env.BLOCK_IN).transpose((0, 2, 1, 3))

        # ---- Compilation (TVM: vta.build) ---------------------------------------------------------
        my_gemm = build(s, [A, B, C], {"A": A_packed, "B": B_packed}, name="my_gemm")
        print(my_gemm.func)

        # ---- Verifying correctness ---------------------------------------------------------------
        C_ref = np.dot(A_orig.astype(env.acc_dtype), B_orig.T.astype(env.acc_dtype)).astype(C.dtype)
        C_ref = C_ref.reshape(o, env.BATCH, m, env.BLOCK_OUT).transpose((0, 2, 1, 3))
        rc = run(my_gemm, "C", C_ref, args.out)
    print("Successful matrix multiply test!" if rc == 0 else "Matrix multiply test FAILED")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
