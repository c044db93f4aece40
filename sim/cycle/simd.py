"""Fixed-width vector steps of the GEMM fast path, written as numba intrinsics (LLVM vector IR).

Why: a loop over one tile's 8 or 16 lanes is too short for LLVM's loop vectoriser to pay off - it guards
every entry with run-time checks that the arrays do not overlap, which cost more than the lanes' work.
These intrinsics state the vector operation directly, so one tile is one short straight-line sequence.
Each exists for ``WIDTHS`` lanes; callers take chunks of the widest width that divides their row and use a
plain loop otherwise.

* ``add_tile{W}(acc, a, prod, p, hb)``: ``acc[a:a+W] += int32(prod[p:p+W])`` (wrapping, int32 lanes) and
  returns the sum mod 2^32 of ``mix(a + ln, new value)`` over the W lanes, where ``hb`` is
  ``(a * 0x9E3779B1) mod 2^32`` (:func:`vtasim.sim.cycle.kernels.row_hash`): the digest terms of docs/timing.md 9.
  ``acc`` int32 and ``prod`` float32 1-D arrays, ``a`` and ``p`` uint64 element offsets, ``hb`` uint32.
* ``copy_f{W}(dst, d, src, s)``: ``dst[d:d+W] = src[s:s+W]`` for float32 1-D arrays.
* ``alu_tile{W}(acc, a, s, op, use_imm, imm, hb)``: one ALU uop on ``acc[a:a+W]`` with ``acc[s:s+W]`` (or the
  immediate ``imm`` when ``use_imm``) as the second operand, op = the ALU opcode (a row of :mod:`vtasim.hw.alu`,
  its vector rule in :data:`_ALU_RULES`, the rules of :func:`vtasim.sim.cycle.kernels.alu_op`), written back in place; returns the digest terms
  like ``add_tile``.  Both operands are read before the write, so ``s == a`` reads the old values, as the
  lane-by-lane loop does.

Offsets are not checked (the callers' indices are range-checked before any work, as in every kernel).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic

from vtasim.hw.alu import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_OPS, ALU_SHR

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


def _splat(builder, vt, value, width):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(vt, [0] * width))


def _digest_terms(builder, v, hb_v, width):
    i32 = ir.IntType(32)
    vi = ir.VectorType(i32, width)
    lane_hash = ir.Constant(vi, [(ln * MIX_X) & 0xFFFFFFFF for ln in range(width)])
    mixed = builder.mul(builder.xor(v, builder.add(_splat(builder, vi, hb_v, width), lane_hash)),
                        ir.Constant(vi, [MIX_V] * width))
    reduce_add = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [vi]),
                                                f"llvm.vector.reduce.add.v{width}i32")
    return builder.call(reduce_add, [mixed])


def _vconst(value, width):
    return ir.Constant(ir.VectorType(ir.IntType(32), width), [value] * width)


def _shr_ir(builder, x, y, width):
    zero, c31 = _vconst(0, width), _vconst(31, width)
    sh_r = builder.select(builder.icmp_signed(">", y, c31), c31,
                          builder.select(builder.icmp_signed("<", y, zero), zero, y))
    neg = builder.sub(zero, y)
    sh_l = builder.select(builder.icmp_signed(">", neg, c31), c31,
                          builder.select(builder.icmp_signed("<", neg, zero), zero, neg))
    left = builder.select(builder.icmp_signed(">", y, _vconst(-32, width)), builder.shl(x, sh_l), zero)
    return builder.select(builder.icmp_signed(">=", y, zero), builder.ashr(x, sh_r), left)


# The vector rule of each row of vtasim.hw.alu on int32 lanes x, y (wrapping): a row without one is a KeyError
# when the tile compiles (and a failure of tests/test_alu_conformance.py naming this table).
_ALU_RULES = {
    ALU_MIN: lambda b, x, y, w: b.select(b.icmp_signed("<", x, y), x, y),
    ALU_MAX: lambda b, x, y, w: b.select(b.icmp_signed(">", x, y), x, y),
    ALU_ADD: lambda b, x, y, w: b.add(x, y),
    ALU_SHR: _shr_ir,
    ALU_MUL: lambda b, x, y, w: b.mul(x, y),
}


def _alu_tile(width):
    i32 = ir.IntType(32)
    vi = ir.VectorType(i32, width)

    def typer(typingctx, acc, a, s, op, use_imm, imm, hb):
        sig = types.uint32(acc, a, s, op, use_imm, imm, hb)

        def codegen(context, builder, signature, args):
            acc_v, a_v, s_v, op_v, use_imm_v, imm_v, hb_v = args
            acc_arr = context.make_array(signature.args[0])(context, builder, acc_v)
            aptr = builder.bitcast(builder.gep(acc_arr.data, [a_v]), vi.as_pointer())
            x = builder.load(aptr, align=4)
            imm32 = builder.trunc(imm_v, i32) if imm_v.type.width > 32 else imm_v
            with builder.if_else(builder.icmp_unsigned("!=", use_imm_v, ir.Constant(use_imm_v.type, 0))) as (imm_b,
                                                                                                          vec_b):
                with imm_b:
                    y_imm = _splat(builder, vi, imm32, width)
                    bb_imm = builder.block
                with vec_b:
                    sptr = builder.bitcast(builder.gep(acc_arr.data, [s_v]), vi.as_pointer())
                    y_vec = builder.load(sptr, align=4)
                    bb_vec = builder.block
            y = builder.phi(vi)
            y.add_incoming(y_imm, bb_imm)
            y.add_incoming(y_vec, bb_vec)
            opc = builder.trunc(op_v, i32) if op_v.type.width > 32 else op_v
            # every row's result, then the one the opcode names (the caller's loop is per instruction, so
            # the selects are the same for every uop; the values are cheap next to the memory traffic).
            # The chain starts from x: no code outside the table reaches here (alu_kernel and decode check).
            r = x
            for op in ALU_OPS:
                val = _ALU_RULES[op.opcode](builder, x, y, width)
                r = builder.select(builder.icmp_unsigned("==", opc, ir.Constant(i32, op.opcode)), val, r)
            builder.store(r, aptr, align=4)
            return _digest_terms(builder, r, hb_v, width)
        return sig, codegen
    typer.__name__ = f"alu_tile{width}"
    return intrinsic(typer)


def _dot_tile(width, pairs):
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    vi, v2i, v2b, v2h = (ir.VectorType(i32, width), ir.VectorType(i32, 2 * width), ir.VectorType(i8, 2 * width),
                         ir.VectorType(i16, 2 * width))
    even = ir.Constant(vi, [2 * ln for ln in range(width)])
    odd = ir.Constant(vi, [2 * ln + 1 for ln in range(width)])

    def typer(typingctx, acc, a, inp, s, wp, w, wstride, hb):
        sig = types.uint32(acc, a, inp, s, wp, w, wstride, hb)

        def codegen(context, builder, signature, args):
            acc_v, a_v, inp_v, s_v, wp_v, w_v, ws_v, hb_v = args
            acc_arr = context.make_array(signature.args[0])(context, builder, acc_v)
            inp_arr = context.make_array(signature.args[2])(context, builder, inp_v)
            wp_arr = context.make_array(signature.args[4])(context, builder, wp_v)
            wide_in = signature.args[2].dtype == types.int16
            wide_w = signature.args[4].dtype == types.int16
            # the input row once, as int16 pairs in int32 lanes: pair jj = (x[2jj], x[2jj+1])
            xrow = builder.load(builder.bitcast(builder.gep(inp_arr.data, [s_v]),
                                                ir.VectorType(i16 if wide_in else i8, 2 * pairs).as_pointer()),
                                align=2 if wide_in else 1)
            if not wide_in:
                xrow = builder.sext(xrow, ir.VectorType(i16, 2 * pairs))
            xrow = builder.bitcast(xrow, ir.VectorType(i32, pairs))
            total = ir.Constant(vi, [0] * width)
            wrow = w_v
            for jj in range(pairs):
                xv = builder.shuffle_vector(xrow, ir.Constant(xrow.type, ir.Undefined), ir.Constant(vi, [jj] * width))
                xv = builder.sext(builder.bitcast(xv, v2h), v2i)
                wv = builder.load(builder.bitcast(builder.gep(wp_arr.data, [wrow]), (v2h if wide_w else v2b).as_pointer()),
                                  align=2 if wide_w else 1)
                m = builder.mul(xv, builder.sext(wv, v2i), flags=["nsw"])
                total = builder.add(total, builder.add(builder.shuffle_vector(m, m, even),
                                                       builder.shuffle_vector(m, m, odd), flags=["nsw"]))
                wrow = builder.add(wrow, ws_v)
            aptr = builder.bitcast(builder.gep(acc_arr.data, [a_v]), vi.as_pointer())
            v = builder.add(builder.load(aptr, align=4), total)
            builder.store(v, aptr, align=4)
            return _digest_terms(builder, v, hb_v, width)
        return sig, codegen
    typer.__name__ = f"dot_tile{width}_{2 * pairs}"
    return intrinsic(typer)


add_tile8, add_tile16 = _add_tile(8), _add_tile(16)
DOT_BLOCKS = (8, 16, 32, 64)
(dot_tile8_8, dot_tile8_16, dot_tile8_32, dot_tile8_64), (dot_tile16_8, dot_tile16_16, dot_tile16_32, dot_tile16_64) = (
    [_dot_tile(width, blk // 2) for blk in DOT_BLOCKS] for width in WIDTHS)
alu_tile8, alu_tile16 = _alu_tile(8), _alu_tile(16)
copy_f8, copy_f16 = _copy(8), _copy(16)
