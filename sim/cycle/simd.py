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

* ``mac_row{B}(acc, a, x16, s, wp, w, dsum, hb)`` for B in :data:`DOT_BLOCKS`: one batch row of one GEMM uop,
  ``acc[a + o] += sum_k x16[s + k] * W[o, k]`` for the B outputs o, where the weights are ``wp[w:w + B*B]`` in
  the pair layout of :func:`vtasim.sim.cycle.kernels.pair_weights` (int8 or int16) and ``x16`` is int16; then
  ``dsum[0:8] += new value XOR (a + ln) * 0x9E3779B1`` lane-wise over the row's lanes, 8 at a time (int32,
  wrapping; ``hb = row_hash(a)``).  The caller multiplies the lanes' sum by ``0x85EBCA77`` once to get the
  digest terms of all the writes.  Each pair of inputs is one 32-bit load broadcast to 8 lanes and each
  (pair, 8 outputs) one sign-extend-multiply-add-pairs, which LLVM emits as ``vpmaddwd``.
* ``dot_row{B}(acc, a, x8, s, wq, w, xc, c, dsum, hb)`` for B in :data:`DOT_BLOCKS`: the same row update from
  the int8 inputs ``x8[s:s + B]`` as stored and the weights plus 128 as uint8 in the quad layout of
  :func:`vtasim.sim.cycle.gemm_simd.quad_weights` (``wq[w:w + B*B]``): ``acc[a + o] += dot(wq quads, x) - xc[c]``
  with ``xc[c] = 128 * sum(x)`` (:func:`vtasim.sim.cycle.gemm_simd.input_sums`), one ``vpdpbusd`` per 4 input
  channels and 16 outputs (8 for B = 8) where :data:`VNNI`, widening multiplies elsewhere; the digest lanes
  as ``mac_row`` (16 of them, or 8 for B = 8).
* ``lane_sums()`` / ``lane_total(p)``: a zeroed 16-lane int32 running sum kept in a register by LLVM (the
  ``dsum`` of both steps may be it or an int32 array) and the sum of its lanes mod 2^32.
* ``prefetch(arr, off)``: a cache hint for the line of ``arr[off]``; no effect on any value.
* :func:`aligned`: arrays whose data start on a cache line, for the memories these steps read and write.

Offsets are not checked (the callers' indices are range-checked before any work, as in every kernel).
"""

from __future__ import annotations

import numpy as np
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


def _mac_row(blk):
    """``mac_row{blk}``: one batch row of one GEMM uop (see the module docstring)."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    v8, v16h, v16i = ir.VectorType(i32, 8), ir.VectorType(i16, 16), ir.VectorType(i32, 16)
    even = ir.Constant(v8, [2 * ln for ln in range(8)])
    odd = ir.Constant(v8, [2 * ln + 1 for ln in range(8)])
    chunks, pairs = blk // 8, blk // 2

    def typer(typingctx, acc, a, x16, s, wp, w, dsum, hb):
        if x16.dtype != types.int16 or not _is_lanes(dsum) or wp.dtype not in (types.int8, types.int16):
            return None
        sig = types.void(acc, a, x16, s, wp, w, dsum, hb)

        def codegen(context, builder, signature, args):
            acc_v, a_v, x_v, s_v, wp_v, w_v, d_v, hb_v = args
            accp = context.make_array(signature.args[0])(context, builder, acc_v).data
            xp = context.make_array(signature.args[2])(context, builder, x_v).data
            wptr = context.make_array(signature.args[4])(context, builder, wp_v).data
            dptr = _lanes_ptr(context, builder, signature.args[6], d_v, v8)
            wbits = signature.args[4].dtype.bitwidth
            wvec = ir.VectorType(ir.IntType(wbits), 16)
            tot = [ir.Constant(v8, [0] * 8) for _ in range(chunks)]
            for jj in range(pairs):
                # input channels 2jj, 2jj+1 as one int32 word, splat: (x[2jj], x[2jj+1]) in every lane
                xq = builder.gep(xp, [builder.add(s_v, ir.Constant(s_v.type, 2 * jj))])
                xw = _splat(builder, v8, builder.load(builder.bitcast(xq, i32.as_pointer()), align=2), 8)
                xw = builder.sext(builder.bitcast(xw, v16h), v16i)
                for c in range(chunks):
                    wq = builder.gep(wptr, [builder.add(w_v, ir.Constant(w_v.type, (jj * blk + 8 * c) * 2))])
                    wv = builder.sext(builder.load(builder.bitcast(wq, wvec.as_pointer()), align=wbits // 8), v16i)
                    m = builder.mul(xw, wv, flags=["nsw"])          # sext-mul-add of pairs: one vpmaddwd
                    tot[c] = builder.add(tot[c], builder.add(builder.shuffle_vector(m, m, even),
                                                             builder.shuffle_vector(m, m, odd), flags=["nsw"]))
            hbv = _splat(builder, v8, hb_v, 8)
            dsum = builder.load(dptr, align=4)
            for c in range(chunks):
                aptr = builder.bitcast(builder.gep(accp, [builder.add(a_v, ir.Constant(a_v.type, 8 * c))]),
                                       v8.as_pointer())
                v = builder.add(builder.load(aptr, align=4), tot[c])
                builder.store(v, aptr, align=4)
                dsum = _digest_lanes(builder, dsum, v, hbv, v8, 8, c)
            builder.store(dsum, dptr, align=4)
            return context.get_dummy_value()
        return sig, codegen
    typer.__name__ = f"mac_row{blk}"
    return intrinsic(typer)


LINE = 64       # bytes of a cache line


def aligned(shape, dtype, zero: bool = True) -> np.ndarray:
    """A C-contiguous array whose data starts on a cache line.  The vector steps load and store whole rows
    (a 16-lane int32 accumulator row is one 64-byte line); numpy aligns its data to 16 bytes only, and a row
    split across two lines costs two accesses."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = (np.zeros if zero else np.empty)(n + LINE, np.uint8)
    start = -buf.ctypes.data % LINE
    return buf[start:start + n].view(dtype).reshape(shape)


def _is_lanes(ty) -> bool:
    """``ty`` is a running lane sum: an int32 array or the pointer :func:`lane_sums` returns."""
    return getattr(ty, "dtype", None) == types.int32 and isinstance(ty, (types.Array, types.CPointer))


def _lanes_ptr(context, builder, ty, value, vt):
    """The running lane sum ``value`` of numba type ``ty`` as a pointer to an LLVM vector ``vt``."""
    data = value if isinstance(ty, types.CPointer) else context.make_array(ty)(context, builder, value).data
    return builder.bitcast(data, vt.as_pointer())


def _lane_sums(typingctx):
    """``lane_sums()``: a zeroed 16-lane int32 running sum in the calling function's frame (an entry-block
    alloca LLVM keeps in a vector register across the loop that updates it, where an array would be read
    and written back to memory every step), as an int32 pointer for ``mac_row`` / ``dot_row``."""
    sig = types.CPointer(types.int32)()

    def codegen(context, builder, signature, args):
        vt = ir.VectorType(ir.IntType(32), 16)
        ptr = cgutils.alloca_once(builder, vt)
        builder.store(ir.Constant(vt, [0] * 16), ptr)
        return builder.bitcast(ptr, ir.IntType(32).as_pointer())
    return sig, codegen


def _lane_total(typingctx, lanes):
    """``lane_total(p)``: the sum mod 2^32 of the 16 lanes of a :func:`lane_sums` pointer, as uint32."""
    if not (isinstance(lanes, types.CPointer) and lanes.dtype == types.int32):
        return None
    sig = types.uint32(lanes)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        vt = ir.VectorType(i32, 16)
        reduce_add = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [vt]),
                                                    "llvm.vector.reduce.add.v16i32")
        return builder.call(reduce_add, [builder.load(builder.bitcast(args[0], vt.as_pointer()))])
    return sig, codegen


lane_sums, lane_total = intrinsic(_lane_sums), intrinsic(_lane_total)


def _vnni_native() -> bool:
    """Whether numba compiles for a CPU with AVX-512 VNNI on 256- and 512-bit vectors (``vpdpbusd``): the host's
    features, or those numba was told to target (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``)."""
    from numba.core import config
    from llvmlite import binding as ll
    if config.CPU_NAME:
        feats = set((config.CPU_FEATURES or "").split(","))
    else:
        feats = {f"+{k}" if v else f"-{k}" for k, v in ll.get_host_cpu_features().items()}
    return {"+avx512f", "+avx512bw", "+avx512vl", "+avx512vnni"} <= feats


VNNI = _vnni_native()


def _digest_lanes(builder, dsum, v, hbv, vt, lanes: int, chunk: int):
    """``dsum + (v XOR (row hash + word hash))`` for the ``lanes`` words of output chunk ``chunk``: each lane's
    running sum of the digest terms (the word hash of output ``lanes * chunk + lane`` is that index times MIX_X)."""
    lane_hash = ir.Constant(vt, [((lanes * chunk + ln) * MIX_X) & 0xFFFFFFFF for ln in range(lanes)])
    return builder.add(dsum, builder.xor(v, builder.add(hbv, lane_hash)))


def _dpbusd(builder, acc, a, b, lanes, native):
    """``acc[l] + sum_t uint8(a[4l + t]) * int8(b[4l + t])`` on ``lanes`` int32 lanes (wrapping), ``a`` and ``b``
    vectors of ``lanes`` int32 words holding 4 bytes each: one ``vpdpbusd`` when ``native``, else the same
    value from widening multiplies (for CPUs without VNNI)."""
    i8, i32 = ir.IntType(8), ir.IntType(32)
    vi = ir.VectorType(i32, lanes)
    if native:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vi, [vi, vi, vi]),
                                            f"llvm.x86.avx512.vpdpbusd.{32 * lanes}")
        return builder.call(fn, [acc, a, b])
    vb, vw = ir.VectorType(i8, 4 * lanes), ir.VectorType(i32, 4 * lanes)
    m = builder.mul(builder.zext(builder.bitcast(a, vb), vw), builder.sext(builder.bitcast(b, vb), vw))
    for t in range(4):
        acc = builder.add(acc, builder.shuffle_vector(m, m, ir.Constant(vi, [4 * ln + t for ln in range(lanes)])))
    return acc


def _dot_row(blk, native):
    """``dot_row{blk}``: one batch row of one GEMM uop on unsigned-by-signed byte dot products (see the module
    docstring)."""
    i32 = ir.IntType(32)
    lanes = 16 if blk % 16 == 0 else 8
    vi = ir.VectorType(i32, lanes)
    chunks, quads = blk // lanes, blk // 4

    def typer(typingctx, acc, a, x8, s, wq, w, xc, c, dsum, hb):
        if x8.dtype != types.int8 or wq.dtype != types.uint8 or xc.dtype != types.int32 or not _is_lanes(dsum):
            return None
        sig = types.void(acc, a, x8, s, wq, w, xc, c, dsum, hb)

        def codegen(context, builder, signature, args):
            acc_v, a_v, x_v, s_v, wq_v, w_v, xc_v, c_v, d_v, hb_v = args
            accp, xp, wp, xcp = (context.make_array(signature.args[k])(context, builder, args[k]).data
                                 for k in (0, 2, 4, 6))
            dptr = _lanes_ptr(context, builder, signature.args[8], d_v, vi)
            xcv = _splat(builder, vi, builder.load(builder.gep(xcp, [c_v])), lanes)     # one broadcast vpsubd
            aptrs, tot = [], []
            for ch in range(chunks):
                aptrs.append(builder.bitcast(builder.gep(accp, [builder.add(a_v, ir.Constant(a_v.type, lanes * ch))]),
                                             vi.as_pointer()))
                tot.append([builder.sub(builder.load(aptrs[ch], align=4), xcv), ir.Constant(vi, [0] * lanes)])
            for q in range(quads):
                xq = builder.gep(xp, [builder.add(s_v, ir.Constant(s_v.type, 4 * q))])
                xw = _splat(builder, vi, builder.load(builder.bitcast(xq, i32.as_pointer()), align=1), lanes)
                for ch in range(chunks):
                    wq = builder.gep(wp, [builder.add(w_v, ir.Constant(w_v.type, (q * blk + lanes * ch) * 4))])
                    wv = builder.load(builder.bitcast(wq, vi.as_pointer()), align=1)
                    tot[ch][q % 2] = _dpbusd(builder, tot[ch][q % 2], wv, xw, lanes, native)
            hbv = _splat(builder, vi, hb_v, lanes)
            dsum = builder.load(dptr, align=4)
            for ch in range(chunks):
                v = builder.add(tot[ch][0], tot[ch][1])
                builder.store(v, aptrs[ch], align=4)
                dsum = _digest_lanes(builder, dsum, v, hbv, vi, lanes, ch)
            builder.store(dsum, dptr, align=4)
            return context.get_dummy_value()
        return sig, codegen
    typer.__name__ = f"dot_row{blk}"
    return intrinsic(typer)


def _prefetch(typingctx, arr, off):
    """``prefetch(arr, off)``: a read hint for the cache line holding ``arr[off]`` (no effect on values)."""
    sig = types.void(arr, off)

    def codegen(context, builder, signature, args):
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(builder.gep(data, [args[1]]), i8p), ir.Constant(i32, 0),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen


prefetch = intrinsic(_prefetch)


add_tile8, add_tile16 = _add_tile(8), _add_tile(16)
DOT_BLOCKS = (8, 16, 32, 64)
mac_row8, mac_row16, mac_row32, mac_row64 = (_mac_row(blk) for blk in DOT_BLOCKS)
dot_row8, dot_row16, dot_row32, dot_row64 = (_dot_row(blk, VNNI) for blk in DOT_BLOCKS)
alu_tile8, alu_tile16 = _alu_tile(8), _alu_tile(16)
copy_f8, copy_f16 = _copy(8), _copy(16)
