"""Numba data kernels of the cycle engine: one call applies one whole instruction's data effect.

Each kernel does the instruction's full work in bulk (every uop of a GEMM/ALU loop nest, every row of
a DMA) and returns the write digest of ``docs/timing.md`` section 9, so the event loop in
:mod:`vtasim.sim.cycle.core` calls at most one kernel per instruction.  Semantics are fsim's (hardware spec
3.2-3.5) with the project's rules for undefined cases (the functional model's docstring): SHR by
``y >= 32`` is ``x >> 31``, by ``y <= -32`` gives 0; empty loops are no-ops; MUL keeps the low 32 bits.
The ALU opcodes are the rows of :mod:`vtasim.hw.alu`, compiled in as constants (:func:`alu_op` has one branch
per row and no default: an opcode outside the table never reaches a kernel, vtasim.sim.program rejects it).

Errors are returned, not raised: a kernel writes ``(code, field, value, limit)`` into ``err`` and
returns; the Python wrapper turns that into a :mod:`vtasim.sim.errors` exception naming the instruction.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vtasim.hw.alu import ALU_ADD, ALU_CODES, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR
from vtasim.sim.cycle import jitcache  # noqa: F401  (cache stamp covers every source compiled in)
from vtasim.sim.cycle.simd import alu_tile8, alu_tile16

from vtasim.sim.cycle.layout import (ERR_DRAM_RANGE, ERR_SRAM_RANGE, ERR_UOP_RANGE, FLD_DRAM_BASE, FLD_DST_IDX,
                              FLD_SRAM_BASE, FLD_SRC_IDX, FLD_UOP_END, FLD_WGT_IDX, F_ALU_OPCODE,
                              F_DRAM_BASE, F_DST_FACTOR_IN, F_DST_FACTOR_OUT, F_IMM, F_ITER_IN,
                              F_ITER_OUT, F_RESET_REG, F_SRAM_BASE, F_SRC_FACTOR_IN, F_SRC_FACTOR_OUT,
                              F_UOP_BGN, F_UOP_END, F_USE_IMM, F_WGT_FACTOR_IN, F_WGT_FACTOR_OUT,
                              F_X_PAD_0, F_X_PAD_1, F_X_SIZE, F_X_STRIDE, F_Y_PAD_0, F_Y_PAD_1, F_Y_SIZE,
                              P_BATCH, P_BLOCK, P_UOP_DST_LO, P_UOP_DST_MASK, P_UOP_SRC_LO, P_UOP_SRC_MASK, P_UOP_WGT_LO,
                              P_UOP_WGT_MASK)

M32 = np.uint64(0xFFFFFFFF)
MIX_X = np.uint64(0x9E3779B1)
MIX_V = np.uint64(0x85EBCA77)


@njit(cache=True, inline="always")
def mix(x, v):
    """``((v XOR (x * 0x9E3779B1)) * 0x85EBCA77) mod 2^32`` for uint64 x and a 32-bit word v."""
    return ((v ^ ((x * MIX_X) & M32)) * MIX_V) & M32


@njit(cache=True)
def digest_bytes(mem, elem_bytes, first, count):
    """Digest of SRAM elements ``[first, first + count)`` of a byte array (section 9 word split).

    An element of fewer than a multiple of 4 bytes is zero-extended to whole words.  When elements are
    whole words, word ``e * words + i`` is simply the byte offset / 4: one pass over the range."""
    words = (elem_bytes + 3) // 4
    if elem_bytes % 4 == 0:
        d32 = np.uint32(0)
        for w in range(np.uint64(first * words), np.uint64((first + count) * words)):
            b = w * np.uint64(4)
            v = (np.uint32(mem[b]) | (np.uint32(mem[b + np.uint64(1)]) << np.uint32(8))
                 | (np.uint32(mem[b + np.uint64(2)]) << np.uint32(16)) | (np.uint32(mem[b + np.uint64(3)]) << np.uint32(24)))
            d32 = np.uint32(d32 + mix32(row_hash(w), np.uint32(0), v))
        return np.uint64(d32)
    d = np.uint64(0)
    for e in range(first, first + count):
        base = e * elem_bytes
        for i in range(words):
            v = np.uint64(0)
            for b in range(4):
                k = i * 4 + b
                if k < elem_bytes:
                    v |= np.uint64(mem[base + k]) << np.uint64(8 * b)
            d += mix(np.uint64(e * words + i), v)
    return d & M32


@njit(cache=True)
def set_err(err, code, field, value, limit):
    err[0] = code
    err[1] = field
    err[2] = value
    err[3] = limit


@njit(cache=True)
def ranges_ok(sram_end, depth, dbase, y, x, stride, ebytes, dram_size, err):
    """The engine's own guard (the static checks of vtasim.sim.program come first): SRAM and DRAM extents
    of a DMA instruction inside their memories, else the error is recorded."""
    if sram_end > depth:
        set_err(err, ERR_SRAM_RANGE, FLD_SRAM_BASE, sram_end, depth)
        return False
    last = (dbase + (y - 1) * stride + x) * ebytes
    if y > 0 and last > dram_size:
        set_err(err, ERR_DRAM_RANGE, FLD_DRAM_BASE, last, dram_size)
        return False
    return True


@njit(cache=True)
def load_kernel(F, j, sram, depth, elem_bytes, dram_elem_bytes, widen, dram, err):
    """LOAD into an SRAM byte array (2-D DMA with zero pads).  ``widen`` = ACC_8BIT sign extension.

    Every element of ``[sram_base, sram_base + xt*yt)`` is written exactly once, so the digest is
    that range's digest after the write."""
    x, y = F[j, F_X_SIZE], F[j, F_Y_SIZE]
    xp0, xp1, yp0, yp1 = F[j, F_X_PAD_0], F[j, F_X_PAD_1], F[j, F_Y_PAD_0], F[j, F_Y_PAD_1]
    base, dbase, stride = F[j, F_SRAM_BASE], F[j, F_DRAM_BASE], F[j, F_X_STRIDE]
    xt, yt = xp0 + x + xp1, yp0 + y + yp1
    if not ranges_ok(base + xt * yt, depth, dbase, y, x, stride, dram_elem_bytes, dram.size, err):
        return np.uint64(0)
    # byte loops rather than slice assignments: a slice is an array view, and numba counts references
    # to each one (two atomic operations), which cost more than copying a short row.  Pads are the
    # zeros left where no row is copied.
    for k in range(np.uint64(base * elem_bytes), np.uint64((base + xt * yt) * elem_bytes)):
        sram[k] = 0
    for r in range(y):
        dst = (base + (yp0 + r) * xt + xp0) * elem_bytes
        src = (dbase + r * stride) * dram_elem_bytes
        if widen:
            # ACC_8BIT: each int8 lane sign-extended to an int32 lane, little-endian
            for k in range(x * dram_elem_bytes):
                v = np.int64(dram[src + k])
                fill = np.uint8(0xFF) if v >= 128 else np.uint8(0)
                sram[dst + 4 * k] = np.uint8(v)
                sram[dst + 4 * k + 1] = fill
                sram[dst + 4 * k + 2] = fill
                sram[dst + 4 * k + 3] = fill
        else:
            for k in range(np.uint64(x * elem_bytes)):
                sram[np.uint64(dst) + k] = dram[np.uint64(src) + k]
    return digest_bytes(sram, elem_bytes, base, xt * yt)


@njit(cache=True)
def store_kernel(F, j, acc, acc_depth, out_elem_bytes, dram, err):
    """STORE: accumulator lanes narrowed by truncation to int8, written to DRAM rows.

    Digest: for every 32-bit aligned DRAM word a row touches, the row's bytes in that word (bytes of
    the word outside the row count as 0) mixed with the word index."""
    x, y = F[j, F_X_SIZE], F[j, F_Y_SIZE]
    base, dbase, stride = F[j, F_SRAM_BASE], F[j, F_DRAM_BASE], F[j, F_X_STRIDE]
    lanes = acc.shape[1]
    if not ranges_ok(base + x * y, acc_depth, dbase, y, x, stride, out_elem_bytes, dram.size, err):
        return np.uint64(0)
    d = np.uint64(0)
    for r in range(y):
        a0 = (dbase + r * stride) * out_elem_bytes
        for e in range(x):
            src = base + r * x + e
            dst = a0 + e * out_elem_bytes
            for ln in range(lanes):
                dram[dst + ln] = np.uint8(acc[src, ln] & 0xFF)
        a1 = a0 + x * out_elem_bytes
        w = a0 // 4
        while w * 4 < a1:
            v = np.uint64(0)
            for b in range(4):
                a = w * 4 + b
                if a >= a0 and a < a1:
                    v |= np.uint64(dram[a]) << np.uint64(8 * b)
            d += mix(np.uint64(w), v)
            w += 1
    return d & M32


@njit(cache=True)
def uop_fields(uops, u, P):
    word = np.int64(uops[u])
    return ((word >> P[P_UOP_DST_LO]) & P[P_UOP_DST_MASK], (word >> P[P_UOP_SRC_LO]) & P[P_UOP_SRC_MASK],
            (word >> P[P_UOP_WGT_LO]) & P[P_UOP_WGT_MASK])


@njit(cache=True)
def check_loop_indices(F, j, uops, P, is_gemm, reset, acc_depth, src_depth, wgt_depth, err):
    """Reject the instruction before touching memory if any index of its loop nest is out of range.

    Factors are unsigned fields, so the largest index of a uop is at the last iteration.  A loop
    nest that executes nothing (an iteration count of 0) is a no-op and checks nothing, as in the
    functional model; otherwise ``iter - 1 = -1`` would make up a "last iteration" index."""
    bgn, end = F[j, F_UOP_BGN], F[j, F_UOP_END]
    if F[j, F_ITER_OUT] == 0 or F[j, F_ITER_IN] == 0 or bgn >= end:
        return True
    if end > uops.size:
        set_err(err, ERR_UOP_RANGE, FLD_UOP_END, end, uops.size)
        return False
    io, ii = F[j, F_ITER_OUT] - 1, F[j, F_ITER_IN] - 1
    dmax = io * F[j, F_DST_FACTOR_OUT] + ii * F[j, F_DST_FACTOR_IN]
    smax = io * F[j, F_SRC_FACTOR_OUT] + ii * F[j, F_SRC_FACTOR_IN]
    wmax = io * F[j, F_WGT_FACTOR_OUT] + ii * F[j, F_WGT_FACTOR_IN]
    for u in range(bgn, end):
        dst, src, wgt = uop_fields(uops, u, P)
        if dst + dmax >= acc_depth:
            set_err(err, ERR_SRAM_RANGE, FLD_DST_IDX, dst + dmax, acc_depth)
            return False
        if reset:
            continue
        if src + smax >= src_depth:
            set_err(err, ERR_SRAM_RANGE, FLD_SRC_IDX, src + smax, src_depth)
            return False
        if is_gemm and wgt + wmax >= wgt_depth:
            set_err(err, ERR_SRAM_RANGE, FLD_WGT_IDX, wgt + wmax, wgt_depth)
            return False
    return True


@njit(cache=True)
def pair_weights(wgt, wgt_pairs, first, count, blk):
    """Refresh the GEMM's copy of weight elements ``[first, first + count)``.

    ``wgt_pairs[e, (j * blk + o) * 2 + t] = wgt[e, o * blk + 2 j + t]``: for each pair of input
    channels, the two weights of every output channel side by side.  With that layout the GEMM's
    innermost loop runs over output channels with unit stride and LLVM turns each pair of
    multiply-adds into one vpmaddwd (dot form over BLOCK_IN needs a horizontal sum per output)."""
    half = blk // 2
    for e in range(first, first + count):
        for o in range(blk):
            for jj in range(half):
                for t in range(2):
                    wgt_pairs[e, (jj * blk + o) * 2 + t] = wgt[e, o * blk + 2 * jj + t]


@njit(cache=True)
def gemm_kernel(F, j, uops, P, inp, wgt_pairs, acc, err):
    """GEMM over the whole loop nest (uop innermost).  inp int8 [depth, BATCH*BLOCK_IN], wgt_pairs
    int8 [depth, BLOCK_OUT*BLOCK_IN] (layout of :func:`pair_weights`), acc int32 [depth, BATCH*BLOCK_OUT].

    Products of int8 fit 16 bits and 16-term sums fit int32 exactly, so the per-uop tile is exact;
    the accumulate wraps to int32 and the digest is taken in the same pass.  Offsets are unsigned
    flat indices: numba then emits no negative-index fix-ups and the loops vectorise."""
    reset = F[j, F_RESET_REG] != 0
    if not check_loop_indices(F, j, uops, P, True, reset, acc.shape[0], inp.shape[0], wgt_pairs.shape[0], err):
        return np.uint64(0)
    bgn, end = F[j, F_UOP_BGN], F[j, F_UOP_END]
    lanes = acc.shape[1]
    blk, batch = P[P_BLOCK], P[P_BATCH]
    half = blk // 2
    accf, inpf, wf = acc.reshape(-1), inp.reshape(-1), wgt_pairs.reshape(-1)
    in_row, w_row = np.uint64(inp.shape[1]), np.uint64(wgt_pairs.shape[1])
    tile = np.empty(lanes, np.int32)
    nu = max(0, end - bgn)
    udst, usrc, uwgt = np.empty(nu, np.int64), np.empty(nu, np.int64), np.empty(nu, np.int64)
    for u in range(nu):
        udst[u], usrc[u], uwgt[u] = uop_fields(uops, bgn + u, P)
    d = np.uint64(0)
    for io in range(F[j, F_ITER_OUT]):
        for ii in range(F[j, F_ITER_IN]):
            doff = io * F[j, F_DST_FACTOR_OUT] + ii * F[j, F_DST_FACTOR_IN]
            soff = io * F[j, F_SRC_FACTOR_OUT] + ii * F[j, F_SRC_FACTOR_IN]
            woff = io * F[j, F_WGT_FACTOR_OUT] + ii * F[j, F_WGT_FACTOR_IN]
            for u in range(nu):
                ao = np.uint64((udst[u] + doff) * lanes)
                if reset:
                    for ln in range(lanes):
                        accf[ao + np.uint64(ln)] = 0
                        d += mix(ao + np.uint64(ln), np.uint64(0))
                    continue
                so = np.uint64(usrc[u] + soff) * in_row
                wo = np.uint64(uwgt[u] + woff) * w_row
                for ln in range(lanes):
                    tile[ln] = 0
                for b in range(batch):
                    for jj in range(half):
                        xa = np.int32(inpf[so + np.uint64(b * blk + 2 * jj)])
                        xb = np.int32(inpf[so + np.uint64(b * blk + 2 * jj + 1)])
                        wj = wo + np.uint64(jj * 2 * blk)
                        for o in range(blk):
                            tile[b * blk + o] += (xa * np.int32(wf[wj + np.uint64(2 * o)])
                                                  + xb * np.int32(wf[wj + np.uint64(2 * o + 1)]))
                for ln in range(lanes):
                    idx = ao + np.uint64(ln)
                    v = np.int32(accf[idx] + tile[ln])
                    accf[idx] = v
                    d += mix(idx, np.uint64(np.uint32(v)))
    return d & M32


@njit(cache=True, inline="always")
def alu_op(op, x, y):
    """One lane of ALU ``op``: one branch per row of :mod:`vtasim.hw.alu`, opcodes compiled in as constants."""
    if op == ALU_MIN:
        return min(x, y)
    if op == ALU_MAX:
        return max(x, y)
    if op == ALU_ADD:
        return np.int32(np.int64(x) + np.int64(y))
    if op == ALU_SHR:
        if y >= 32:
            return np.int32(x >> 31)
        if y >= 0:
            return np.int32(x >> y)
        if y <= -32:
            return np.int32(0)
        return np.int32((np.int64(x) << (-y)) & 0xFFFFFFFF)
    if op == ALU_MUL:
        return np.int32((np.int64(x) * np.int64(y)) & 0xFFFFFFFF)
    raise ValueError("ALU opcode outside vtasim.hw.alu (vtasim.sim.program rejects it at decode)")


@njit(cache=True)
def alu_known(op):
    """Whether ``op`` is a row of :mod:`vtasim.hw.alu` (the kernel's own guard; decode rejects others first)."""
    for code in ALU_CODES:
        if op == code:
            return True
    return False


@njit(cache=True)
def lane_hashes(lanes):
    """``(ln * 0x9E3779B1) mod 2^32`` per lane: with ``row_hash`` the word-index half of :func:`mix` in
    32-bit lanes (``x = row * lanes + ln``, and the product is taken mod 2^32)."""
    hx = np.empty(lanes, np.uint32)
    for ln in range(lanes):
        hx[ln] = np.uint32((np.uint64(ln) * MIX_X) & M32)
    return hx


@njit(cache=True, inline="always")
def row_hash(first_word):
    return np.uint32((first_word & M32) * MIX_X)


@njit(cache=True, inline="always")
def mix32(hb, h, v):
    """:func:`mix` of word ``x`` with ``(x * 0x9E3779B1) mod 2^32 = hb + h`` and value v, all uint32."""
    return np.uint32((np.uint32(v) ^ np.uint32(hb + h)) * np.uint32(MIX_V))


@njit(cache=True)
def lane_sum(dv):
    d = np.uint64(0)
    for ln in range(dv.size):
        d += np.uint64(dv[ln])
    return d & M32


@njit(cache=True)
def uop_arrays(uops, bgn, nu, P):
    """The (dst, src, wgt) fields of uops ``[bgn, bgn + nu)`` as three int64 arrays."""
    udst, usrc, uwgt = np.empty(nu, np.int64), np.empty(nu, np.int64), np.empty(nu, np.int64)
    for u in range(nu):
        udst[u], usrc[u], uwgt[u] = uop_fields(uops, bgn + u, P)
    return udst, usrc, uwgt


@njit(cache=True)
def alu_kernel(F, j, uops, P, acc, err):
    """ALU over the whole loop nest, in place and in uop order (a dst read later as src sees it).

    Rows are addressed by flat unsigned offsets (no row views, so no reference counting per uop); a uop's
    lanes go 8 or 16 at a time through :mod:`vtasim.sim.cycle.simd` when the row allows, else one loop."""
    if not check_loop_indices(F, j, uops, P, False, False, acc.shape[0], acc.shape[0], 1, err):
        return np.uint64(0)
    bgn, end = F[j, F_UOP_BGN], F[j, F_UOP_END]
    nu = max(0, end - bgn)
    op, use_imm, imm = F[j, F_ALU_OPCODE], F[j, F_USE_IMM] != 0, np.int32(F[j, F_IMM])
    if not alu_known(op):
        raise ValueError("ALU opcode outside vtasim.hw.alu (vtasim.sim.program rejects it at decode)")
    lanes = acc.shape[1]
    ul = np.uint64(lanes)
    udst, usrc, _ = uop_arrays(uops, bgn, nu, P)
    accf = acc.reshape(-1)
    hx = lane_hashes(lanes)
    dv = np.zeros(lanes, np.uint32)
    vec = 16 if lanes % 16 == 0 else (8 if lanes % 8 == 0 else 0)    # vtasim.sim.cycle.simd widths, else a loop
    d32 = np.uint32(0)
    for io in range(F[j, F_ITER_OUT]):
        for ii in range(F[j, F_ITER_IN]):
            doff = io * F[j, F_DST_FACTOR_OUT] + ii * F[j, F_DST_FACTOR_IN]
            soff = io * F[j, F_SRC_FACTOR_OUT] + ii * F[j, F_SRC_FACTOR_IN]
            for u in range(nu):
                a = np.uint64(udst[u] + doff) * ul
                sa = np.uint64(usrc[u] + soff) * ul
                if vec == 16:
                    for c in range(np.uint64(0), ul, np.uint64(16)):
                        d32 = np.uint32(d32 + alu_tile16(accf, a + c, sa + c, op, use_imm, imm, row_hash(a + c)))
                elif vec == 8:
                    for c in range(np.uint64(0), ul, np.uint64(8)):
                        d32 = np.uint32(d32 + alu_tile8(accf, a + c, sa + c, op, use_imm, imm, row_hash(a + c)))
                else:
                    hb = row_hash(a)
                    for ln in range(lanes):
                        y = imm if use_imm else accf[sa + np.uint64(ln)]
                        v = alu_op(op, accf[a + np.uint64(ln)], y)
                        accf[a + np.uint64(ln)] = v
                        dv[ln] = np.uint32(dv[ln] + mix32(hb, hx[ln], v))
    return (lane_sum(dv) + np.uint64(d32)) & M32
