"""Exact integer GEMM of the cycle engine for any uop pattern, and the rule that picks it or the BLAS grouping.

:mod:`vtasim.sim.cycle.gemm_fast` is fast when many tiles share a weight element (one float32 matrix product per
element) or repeat (products computed once); on uops with unrelated indices its groups hold one row
each and its gathers and calls dominate.  This kernel does each tile where it stands: per uop and batch row,
one straight-line vector step of :mod:`vtasim.sim.cycle.simd` (``mac_row{BLOCK_IN}``), in execution order.  The step
broadcasts each pair of input channels as one 32-bit word from an int16 copy of INP (``inp16``, made by
:func:`to_int16` at every LOAD INP unless every GEMM takes the integer kernel), multiplies it pair-wise against
the integer kernel's weight copy ``wgt_pairs`` (:func:`vtasim.sim.cycle.kernels.pair_weights`: eight outputs' weight
pairs side by side, widened to int16 as loaded) - one ``vpmaddwd`` per pair of input channels and 8 outputs
on AVX2 - adds the int32 sums to the accumulator and adds ``value XOR word hash`` of every lane written to an
8-lane running sum.  The digest of the instruction is that sum times ``0x85EBCA77`` (docs/timing.md 9 sums
``(value XOR hash) * 0x85EBCA77`` mod 2^32 over the writes, and the multiplication distributes), so there
is no multiply and no horizontal sum per tile.  Products of int8 fit int16 and a tile's sums are taken in
wrapping int32 as the integer kernel's, so the bytes and digests are the same.  Each uop also prefetches
the weight tile of the uop :data:`PREFETCH_AHEAD` later (irregular streams pick weight elements at random
from the whole buffer, which does not stay in the L1 cache).

:func:`gemm_vnni` (``gemm="vnni"``, and the integer kernel of ``"auto"`` and ``"blas"`` wherever numba targets
AVX-512 VNNI, :data:`vtasim.sim.cycle.simd.VNNI`) runs the same nest on byte quads: ``vpdpbusd`` multiplies 4
unsigned bytes by 4 signed bytes and adds the 4 products to an int32 lane, 64 products per 512-bit
instruction, so a 16 x 16 tile is 4 instructions (``dot_row{BLOCK_IN}``).  The signed weights are made
unsigned by adding 128 (:func:`quad_weights`, a copy ``wgt_quads`` in quad layout), which adds
``128 * sum(x)`` to every output; :func:`input_sums` keeps that term per INP element and batch row (``xc``,
made at every LOAD INP instead of the int16 copy) and the step subtracts it, all in wrapping int32, so every
written value, and with it every byte and digest, is the integer kernel's.  Inputs are read as stored.  On
CPUs without VNNI the step is compiled from widening multiplies (same values, slower), and ``"auto"`` keeps
:func:`gemm_simd`.  The running digest sum of both kernels is a register (:func:`vtasim.sim.cycle.simd.lane_sums`),
not an array read and written back every uop.

A weight element's copy is made when a GEMM first uses it after a LOAD WGT wrote it (``wready`` bit
:data:`PAIRS_READY` or :data:`QUADS_READY`; :mod:`vtasim.sim.cycle.gemm_fast` keeps its float copy's bit
:data:`vtasim.sim.cycle.gemm_fast.WT_READY`).

Cost rule (:func:`blas_pays`, the ``gemm="auto"`` choice per non-reset GEMM): the BLAS grouping when its
products are reused at least :data:`BLAS_MIN_REUSE` times (loops moving neither src nor wgt: each distinct
product is added once per iteration of them, and the BLAS path computes it once) or when its matrix
products have at least :data:`BLAS_MIN_ROWS` input rows per distinct weight element (uops sharing a weight
index, loops moving src but not wgt); the integer SIMD kernel otherwise.  The thresholds come from the two
paths' measured costs (``bench/engine_speed.py`` prints them on the same streams: products reused 8-fold
on the GEMM-bound stream favour BLAS 3-5x; the layers' shared weight elements do not).  Both give the same bytes: the rule only decides speed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vtasim.sim.cycle import jitcache  # noqa: F401  (cache stamp covers every source compiled in)

from vtasim.sim.cycle.kernels import MIX_V, check_loop_indices, pair_weights, row_hash, uop_arrays
from vtasim.sim.cycle.layout import (F_DST_FACTOR_IN, F_DST_FACTOR_OUT, F_ITER_IN, F_ITER_OUT, F_SRC_FACTOR_IN,
                              F_SRC_FACTOR_OUT, F_UOP_BGN, F_UOP_END, F_WGT_FACTOR_IN, F_WGT_FACTOR_OUT,
                              GEMM_SIMD, GEMM_VNNI, P_BATCH, P_BLOCK, P_UOP_WGT_LO, P_UOP_WGT_MASK)
from vtasim.sim.cycle.simd import (VNNI, dot_row8, dot_row16, dot_row32, dot_row64, lane_sums, lane_total, mac_row8,
                                   mac_row16, mac_row32, mac_row64, prefetch)

# The integer vector kernel this host runs where no GEMM mode names one: the byte-quad kernel where numba
# targets AVX-512 VNNI, else the pair kernel (layout.P_GEMM_MODE)
HOST_VECTOR = GEMM_VNNI if VNNI else GEMM_SIMD
PAIRS_READY = 2          # wready bit: wgt_pairs[e] is current
QUADS_READY = 4          # wready bit: wgt_quads[e] is current
# rows per weight element from which one BLAS product beats per-tile steps: the ResNet-18 layers C2-C11 have
# 49-448 and the integer SIMD kernel ran the larger ones 1.5-2.3x faster than the BLAS grouping on a lightly
# loaded machine, up to 4.5x on a loaded one (bench/engine_speed.py, ``simd s`` against ``grp s``), so only far
# larger groups take BLAS for their rows alone
BLAS_MIN_ROWS = 2048
PREFETCH_AHEAD = 4       # uops between a weight tile's prefetch and its use
BLAS_MIN_REUSE = 8       # additions per distinct product from which computing each once pays


@njit(cache=True)
def simd_fits(P, lanes):
    """Whether the config's tile shape has a vector step (BLOCK_IN in simd.DOT_BLOCKS, BLOCK_OUT a multiple
    of 8); else the integer kernel runs."""
    blk, bo = P[P_BLOCK], lanes // P[P_BATCH]
    return (blk == 8 or blk == 16 or blk == 32 or blk == 64) and bo % 8 == 0


@njit(cache=True)
def to_int16(src, dst, first, count):
    """``dst[first:first + count]`` = the int8 values of bytes ``src[first:first + count]`` as int16: the
    kernel's copy of INP elements after a LOAD (the SRAM's own element layout), so a pair of input channels
    is one 32-bit word the tile step broadcasts straight from memory."""
    for i in range(np.uint64(first), np.uint64(first + count)):
        dst[i] = np.int16(np.int8(src[i]))


@njit(cache=True)
def input_sums(src, xc, first, count, blk, batch):
    """``xc[r, b]`` = 128 times the sum of the int8 inputs of batch row ``b`` of INP element ``r``, for the
    ``count`` elements from ``first`` (``src`` the INP bytes): the term :func:`gemm_vnni` takes off each
    unsigned-by-signed dot product, made at every LOAD INP when that kernel may run."""
    xcf = xc.reshape(-1)
    for i in range(np.uint64(first * batch), np.uint64((first + count) * batch)):     # (element, batch row)
        t = np.int32(0)
        o = i * np.uint64(blk)
        for k in range(np.uint64(blk)):
            t += np.int32(np.int8(src[o + k]))
        xcf[i] = t * np.int32(128)


@njit(cache=True)
def quad_weights(wgt, wq, e, blk):
    """``wq[e, (q * blk + o) * 4 + t] = uint8(wgt[e, o * blk + 4 q + t] + 128)``: for each quad of input channels,
    the four weights of every output channel side by side, offset by 128 to be unsigned (``vpdpbusd`` takes
    one unsigned operand; :func:`gemm_vnni` takes the offset's products back off with :func:`input_sums`)."""
    for o in range(blk):
        for q in range(blk // 4):
            for t in range(4):
                wq[e, (q * blk + o) * 4 + t] = np.uint8(wgt[e, o * blk + 4 * q + t]) ^ np.uint8(0x80)


@njit(cache=True, inline="always")
def _pairs(wgt, wcopy, e, blk):
    pair_weights(wgt, wcopy, e, 1, blk)


@njit(cache=True, inline="always")
def _mac(accf, a, xf, s, wf, w, xcf, c, dsum, blk):
    """One batch row of one uop through the ``mac_row`` step of tile width ``blk`` (a constant where inlined)."""
    hb = row_hash(a)
    if blk == 16:
        mac_row16(accf, a, xf, s, wf, w, dsum, hb)
    elif blk == 32:
        mac_row32(accf, a, xf, s, wf, w, dsum, hb)
    elif blk == 8:
        mac_row8(accf, a, xf, s, wf, w, dsum, hb)
    else:
        mac_row64(accf, a, xf, s, wf, w, dsum, hb)


@njit(cache=True, inline="always")
def _dot(accf, a, xf, s, wf, w, xcf, c, dsum, blk):
    """One batch row of one uop through the ``dot_row`` step of tile width ``blk``."""
    hb = row_hash(a)
    if blk == 16:
        dot_row16(accf, a, xf, s, wf, w, xcf, c, dsum, hb)
    elif blk == 32:
        dot_row32(accf, a, xf, s, wf, w, xcf, c, dsum, hb)
    elif blk == 8:
        dot_row8(accf, a, xf, s, wf, w, xcf, c, dsum, hb)
    else:
        dot_row64(accf, a, xf, s, wf, w, xcf, c, dsum, hb)


@njit(cache=True)
def gemm_simd(F, j, uops, P, inp16, wgt2, wgt_pairs, wready, acc, err):
    """Non-reset GEMM over the whole loop nest, uop by uop in execution order; same bytes and digest as
    :func:`vtasim.sim.cycle.kernels.gemm_kernel`.  The caller has checked :func:`simd_fits`.  One copy of the loop
    nest per tile width (:func:`_nest` inlined with a constant ``blk``), so no shape is decided inside the
    uop loop."""
    if not check_loop_indices(F, j, uops, P, True, False, acc.shape[0], inp16.shape[0], wgt_pairs.shape[0], err):
        return np.uint64(0)
    xc = np.zeros((1, 1), np.int32)       # the pair steps take no input sums
    return _nest_per_block(F, j, uops, P, inp16, xc, wgt2, wgt_pairs, wready, acc, PAIRS_READY, _pairs, _mac)


@njit(cache=True)
def gemm_vnni(F, j, uops, P, inp2, xc, wgt2, wgt_quads, wready, acc, err):
    """:func:`gemm_simd` on unsigned-by-signed byte dot products (``dot_row``, ``vpdpbusd`` on AVX-512 VNNI):
    the int8 inputs as they are in INP, the weights plus 128 in the quad layout of :func:`quad_weights`,
    and per batch row ``acc - xc + dot``: the same int32 values, so the same bytes and digest."""
    if not check_loop_indices(F, j, uops, P, True, False, acc.shape[0], inp2.shape[0], wgt_quads.shape[0], err):
        return np.uint64(0)
    return _nest_per_block(F, j, uops, P, inp2, xc, wgt2, wgt_quads, wready, acc, QUADS_READY, quad_weights, _dot)


@njit(cache=True, inline="always")
def _nest_per_block(F, j, uops, P, x, xc, wgt2, wcopy, wready, acc, ready, prepare, step):
    """One copy of :func:`_nest` per tile width, each with its width a constant, chosen by the config's block."""
    blk = P[P_BLOCK]
    if blk == 16:
        return _nest(F, j, uops, P, x, xc, wgt2, wcopy, wready, acc, 16, ready, prepare, step)
    if blk == 32:
        return _nest(F, j, uops, P, x, xc, wgt2, wcopy, wready, acc, 32, ready, prepare, step)
    if blk == 8:
        return _nest(F, j, uops, P, x, xc, wgt2, wcopy, wready, acc, 8, ready, prepare, step)
    return _nest(F, j, uops, P, x, xc, wgt2, wcopy, wready, acc, 64, ready, prepare, step)


@njit(cache=True, inline="always")
def _nest(F, j, uops, P, x, xc, wgt2, wcopy, wready, acc, blk, ready, prepare, step):
    """The loop nest of :func:`gemm_simd` and :func:`gemm_vnni` for tiles of ``blk`` x ``blk`` weights: ``prepare``
    refreshes a weight element's copy (wready bit ``ready``), ``step`` does one batch row of one uop.

    Per iteration of the two outer loops, the uops' flat offsets are made first (loops LLVM vectorises) and
    the weight copies refreshed, so the uop loop itself is three loads of offsets, the prefetch of a later
    weight tile, and the step."""
    bgn, end = F[j, F_UOP_BGN], F[j, F_UOP_END]
    nu = max(0, end - bgn)
    batch = P[P_BATCH]
    udst, usrc, uwgt = uop_arrays(uops, bgn, nu, P)
    accf, xf, wf, xcf = acc.reshape(-1), x.reshape(-1), wcopy.reshape(-1), xc.reshape(-1)
    ulanes, in_row = acc.shape[1], x.shape[1]
    ao, so, wo = np.empty(nu, np.uint64), np.empty(nu, np.uint64), np.empty(nu, np.uint64)
    dsum = lane_sums()                    # per lane, the sum of (value XOR word hash) over every write
    for io in range(F[j, F_ITER_OUT]):
        for ii in range(F[j, F_ITER_IN]):
            doff = io * F[j, F_DST_FACTOR_OUT] + ii * F[j, F_DST_FACTOR_IN]
            soff = io * F[j, F_SRC_FACTOR_OUT] + ii * F[j, F_SRC_FACTOR_IN]
            woff = io * F[j, F_WGT_FACTOR_OUT] + ii * F[j, F_WGT_FACTOR_IN]
            for u in range(nu):
                ao[u] = np.uint64((udst[u] + doff) * ulanes)
                so[u] = np.uint64(usrc[u] + soff)
                wo[u] = np.uint64(uwgt[u] + woff)
            for u in range(nu):
                if wready[wo[u]] & ready == 0:
                    prepare(wgt2, wcopy, wo[u], blk)
                    wready[wo[u]] |= ready
            for u in range(nu):
                if u + PREFETCH_AHEAD < nu:       # the weight tile of a later uop: its lines come from L2/L3
                    for k in range(0, blk * blk, 64):
                        prefetch(wf, wo[u + PREFETCH_AHEAD] * np.uint64(blk * blk) + np.uint64(k))
                if batch == 1:
                    step(accf, ao[u], xf, so[u] * np.uint64(blk), wf, wo[u] * np.uint64(blk * blk), xcf, so[u], dsum,
                         blk)
                else:
                    for b in range(batch):
                        step(accf, ao[u] + np.uint64(b * blk), xf, so[u] * np.uint64(in_row) + np.uint64(b * blk), wf,
                             wo[u] * np.uint64(blk * blk), xcf, so[u] * np.uint64(batch) + np.uint64(b), dsum, blk)
    # sum of mix terms = MIX_V * sum of (value XOR hash), mod 2^32 (multiplication distributes)
    return np.uint64(np.uint32(lane_total(dsum) * np.uint32(MIX_V)))


@njit(cache=True)
def blas_pays(F, j, uops, P, wgt_depth):
    """The cost rule of the module docstring for non-reset GEMM ``j`` (whose indices may not be checked yet:
    out-of-range weight indices only count as distinct)."""
    nu = max(0, F[j, F_UOP_END] - F[j, F_UOP_BGN])
    io_n, ii_n = F[j, F_ITER_OUT], F[j, F_ITER_IN]
    if nu == 0 or io_n == 0 or ii_n == 0:
        return False
    in_moves = F[j, F_SRC_FACTOR_IN] != 0 or F[j, F_WGT_FACTOR_IN] != 0
    out_moves = F[j, F_SRC_FACTOR_OUT] != 0 or F[j, F_WGT_FACTOR_OUT] != 0
    reuse = (1 if in_moves else ii_n) * (1 if out_moves else io_n)     # additions of each distinct product
    if reuse >= BLAS_MIN_REUSE:
        return True
    # rows per weight element = rows / distinct elements, where loops that move src but not wgt multiply
    # each element's rows; BLAS pays when the distinct elements are at most rows / BLAS_MIN_ROWS, so the
    # count stops as soon as it passes that (after a few uops on streams whose uops share no weights)
    rows = P[P_BATCH] * nu
    if ii_n > 1 and F[j, F_WGT_FACTOR_IN] == 0 and F[j, F_SRC_FACTOR_IN] != 0:
        rows *= ii_n
    if io_n > 1 and F[j, F_WGT_FACTOR_OUT] == 0 and F[j, F_SRC_FACTOR_OUT] != 0:
        rows *= io_n
    most = rows // BLAS_MIN_ROWS
    if most == 0:
        return False
    seen = np.zeros(wgt_depth, np.uint8)
    ndist = 0
    for u in range(nu):
        w = (np.int64(uops[F[j, F_UOP_BGN] + u]) >> P[P_UOP_WGT_LO]) & P[P_UOP_WGT_MASK]
        if w >= wgt_depth:
            ndist += 1
        elif seen[w] == 0:
            seen[w] = 1
            ndist += 1
        if ndist > most:
            return False
    return True
