"""Get started with VTA: vector add on the tensor ALU (TVM tutorial vta_get_started.py, compiler spec 3.2).

    python examples/vta_get_started.py [--config PATH] [--out DIR] [--seed N]
"""

import numpy as np

from _tutorial import parse_args, run
from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.lowering.lower import lower
from vtasim.hw.config import load_config


def vadd_schedule(env, o=1, m=64):
    """Declare the vector add and schedule it; returns ``(s, [A, B, C])``."""
    # ---- Computation declaration -------------------------------------------------------------
    # Sizes (the parameters): output channel factor m: 64 x BLOCK_OUT channels; batch factor o: 1 x BATCH.
    # Two int32 placeholders in the tiled (o, m, BATCH, BLOCK_OUT) layout.
    A = te.placeholder((o, m, env.BATCH, env.BLOCK_OUT), name="A", dtype=env.acc_dtype)
    B = te.placeholder((o, m, env.BATCH, env.BLOCK_OUT), name="B", dtype=env.acc_dtype)
    # Copy stages: the DMA loads into on-chip buffers.
    A_buf = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: A(*i), "A_buf")
    B_buf = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: B(*i), "B_buf")
    # The vector addition, in int32.
    C_buf = te.compute((o, m, env.BATCH, env.BLOCK_OUT),
                       lambda *i: A_buf(*i).astype(env.acc_dtype) + B_buf(*i).astype(env.acc_dtype),
                       name="C_buf")
    # Cast back to the narrow output type (the store truncates).
    C = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: C_buf(*i).astype(env.inp_dtype), name="C")

    # ---- Scheduling the computation ----------------------------------------------------------
    s = te.create_schedule(C.op)
    # All three intermediate buffers live in the accumulator SRAM.
    s[A_buf].set_scope(env.acc_scope)
    s[B_buf].set_scope(env.acc_scope)
    s[C_buf].set_scope(env.acc_scope)
    # Copies become DMA transfers ...
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    # ... and the addition a vector ALU operation.
    s[C_buf].pragma(C_buf.op.axis[0], env.alu)
    return s, [A, B, C]


def main(argv=None) -> int:
    args = parse_args(__doc__, argv)
    # Load the VTA parameters (TVM: env = vta.get_env()); --config picks another hardware variant.
    with Environment(load_config(args.config)) as env:
        s, (A, B, C) = vadd_schedule(env)
        print(lower(s, [A, B, C], "my_vadd"))
        o, m = A.shape[:2]          # the batch and channel factors declared above

        # ---- Running the function ----------------------------------------------------------------
        # Random inputs in the plain (o*BATCH, m*BLOCK_OUT) layout, packed to the tiled one.
        rng = np.random.default_rng(args.seed)
        A_orig = rng.integers(-128, 128, size=(o * env.BATCH, m * env.BLOCK_OUT)).astype(A.dtype)
        B_orig = rng.integers(-128, 128, size=(o * env.BATCH, m * env.BLOCK_OUT)).astype(B.dtype)
        A_packed = A_orig.reshape(o, env.BATCH, m, env.BLOCK_OUT).transpose((0, 2, 1, 3))
        B_packed = B_orig.reshape(o, env.BATCH, m, env.BLOCK_OUT).transpose((0, 2, 1, 3))

        # ---- Compilation (TVM: vta.build) ---------------------------------------------------------
        my_vadd = build(s, [A, B, C], {"A": A_packed, "B": B_packed}, name="my_vadd")
        print(my_vadd.func)        # the lowered program with the VTA runtime calls (TVM: vta.lower)

        # ---- Verifying correctness ---------------------------------------------------------------
        C_ref = (A_orig.astype(env.acc_dtype) + B_orig.astype(env.acc_dtype)).astype(C.dtype)
        C_ref = C_ref.reshape(o, env.BATCH, m, env.BLOCK_OUT).transpose((0, 2, 1, 3))
        rc = run(my_vadd, "C", C_ref, args.out)
    print("Successful vector add test!" if rc == 0 else "Vector add test FAILED")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
