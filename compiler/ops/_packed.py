"""What TVM's ``schedule_conv2d_packed`` and ``schedule_dense_packed`` share (compiler spec 3.6,
3.7): finding the GEMM op and the elementwise epilogue under the output, putting the epilogue on
the ALU, and the tail that tiles the reduction, loads the operands per tile, tensorizes and
stores."""

from __future__ import annotations

from vtasim.compiler.dsl import te
from vtasim.compiler.dsl.tensor import PlaceholderOp

DMA_LOAD_TAG = "dma_load"         # an int8 -> int32 copy into the accumulator: a LOAD ACC_8BIT, not an ALU op


def collect(output, tag: str):
    """(the op tagged ``tag``, the elementwise ops between it and ``output`` in producer-first order,
    [(consumer op, placeholder tensor)] of their tensor inputs)."""
    main, ewise, inputs, seen = None, [], [], set()

    def visit(op):
        nonlocal main
        if id(op) in seen:
            return
        seen.add(id(op))
        if op.tag == tag:
            main = op
            return
        for t in op.input_tensors:
            if isinstance(t.op, PlaceholderOp):
                inputs.append((op, t))
            else:
                visit(t.op)
        if op is not output.op:
            ewise.append(op)

    visit(output.op)
    return main, ewise, inputs


def ewise_on_alu(env, s, ewise_ops):
    """Every elementwise stage in the accumulator, computed by the ALU."""
    for op in ewise_ops:
        s[op.output(0)].set_scope(env.acc_scope)
        s[op.output(0)].pragma(s[op.output(0)].op.axis[0], env.alu)


def bind_virtual_threads(s, output, axis, nthread: int, before):
    """Split ``axis`` of ``output`` into ``nthread`` virtual threads (``cthread``), the thread axis
    moved in front of ``before``; returns the outer part of the split."""
    outer, v_t = s[output].split(axis, factor=nthread)
    s[output].reorder(v_t, before)
    s[output].bind(v_t, te.thread_axis("cthread"))
    return outer


def tile_reduction_and_tensorize(env, s, gemm, k_o, tile_ci: int, operands, gemm_axis, output, store_axis):
    """Split the outer reduction axis ``k_o`` of ``gemm`` by ``tile_ci``, load the cached
    ``operands`` by DMA once per outer step, tensorize from ``gemm_axis`` and store ``output`` by DMA
    from ``store_axis``."""
    k_o, _ = s[gemm].split(k_o, factor=tile_ci)
    for t in operands:
        s[t].compute_at(s[gemm], k_o)
    for t in operands:
        s[t].pragma(s[t].op.axis[0], env.dma_copy)
    s[gemm].tensorize(gemm_axis, env.gemm)
    s[output].pragma(store_axis, env.dma_copy)
