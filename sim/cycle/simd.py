"""Fixed-width vector steps of the GEMM fast path, written as numba intrinsics (LLVM vector IR).

Why: a loop over one tile's 8 or 16 lanes is too short for LLVM's loop vectoriser to pay off - it guards
every entry with run-time checks that the arrays do not overlap, which cost more than the lanes' work.
These intrinsics state the vector operation directly, so one tile is one short straight-line sequence.
Each exists for ``WIDTHS`` lanes; callers take chunks of the widest width that divides their row and use a
plain loop otherwise.

* ``add_tile{W}(acc, a, prod, p, hb)``: ``acc[a:a+W] += int32(prod[p:p+W])`` (wrapping, int32 lanes) and
  returns the sum mod 2^32 of ``mix(a + ln, new value)`` over the W lanes, where ``hb`` is
  ``(a * 0x9E3779B1) mod 2^32`` (:func:`sim.cycle.kernels.row_hash`): the digest terms of docs/timing.md 9.
  ``acc`` int32 and ``prod`` float32 1-D arrays, ``a`` and ``p`` uint64 element offsets, ``hb`` uint32.
* ``copy_f{W}(dst, d, src, s)``: ``dst[d:d+W] = src[s:s+W]`` for float32 1-D arrays.

Offsets are not checked (the callers' indices are range-checked before any work, as in every kernel).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic

MIX_X, MIX_V = 0x9E3779B1, 0x85EBCA77
WIDTHS = (8, 16)


def _add_tile(width):
    i32, f32 = ir.IntType(32), ir.FloatType()
    vi, vf = ir.VectorType(i32, width), ir.VectorType(f32, width)

    def typer(typingctx, acc, a, prod, p, hb):
        sig = types.uint32(acc, a, prod, p, hb)

        def codegen(context, builder, signature, args):
            acc_v, a_v, prod_v, p_v, hb_v = args
            acc_arr = context.make_array(signature.args[0])(context, builder, acc_v)
            prod_arr = context.make_array(signature.args[2])(context, builder, prod_v)
            aptr = builder.bitcast(builder.gep(acc_arr.data, [a_v]), vi.as_pointer())
            pptr = builder.bitcast(builder.gep(prod_arr.data, [p_v]), vf.as_pointer())
            v = builder.add(builder.load(aptr, align=4), builder.fptosi(builder.load(pptr, align=4), vi))
            builder.store(v, aptr, align=4)
            hbv = builder.insert_element(ir.Constant(vi, ir.Undefined), hb_v, ir.Constant(i32, 0))
            hbv = builder.shuffle_vector(hbv, ir.Constant(vi, ir.Undefined), ir.Constant(vi, [0] * width))
            lane_hash = ir.Constant(vi, [(ln * MIX_X) & 0xFFFFFFFF for ln in range(width)])
            mixed = builder.mul(builder.xor(v, builder.add(hbv, lane_hash)), ir.Constant(vi, [MIX_V] * width))
            reduce_add = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [vi]),
                                                        f"llvm.vector.reduce.add.v{width}i32")
            return builder.call(reduce_add, [mixed])
        return sig, codegen
    typer.__name__ = f"add_tile{width}"
    return intrinsic(typer)


def _copy(width):
    f32 = ir.FloatType()
    vf = ir.VectorType(f32, width)

    def typer(typingctx, dst, d, src, s):
        sig = types.void(dst, d, src, s)

        def codegen(context, builder, signature, args):
            dst_v, d_v, src_v, s_v = args
            dst_arr = context.make_array(signature.args[0])(context, builder, dst_v)
            src_arr = context.make_array(signature.args[2])(context, builder, src_v)
            sptr = builder.bitcast(builder.gep(src_arr.data, [s_v]), vf.as_pointer())
            dptr = builder.bitcast(builder.gep(dst_arr.data, [d_v]), vf.as_pointer())
            builder.store(builder.load(sptr, align=4), dptr, align=4)
            return context.get_dummy_value()
        return sig, codegen
    typer.__name__ = f"copy_f{width}"
    return intrinsic(typer)


add_tile8, add_tile16 = _add_tile(8), _add_tile(16)
copy_f8, copy_f16 = _copy(8), _copy(16)
