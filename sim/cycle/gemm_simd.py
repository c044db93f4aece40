"""Exact integer GEMM of the cycle engine for any uop pattern, and the rule that picks it or the BLAS grouping.

:mod:`vtasim.sim.cycle.gemm_fast` is fast when many tiles share a weight element (one float32 matrix product per
element) or repeat (products computed once); on uops with unrelated indices its groups hold one row
each and its gathers and calls dominate.  This kernel does each tile where it stands: per uop, per batch
row and per 8 or 16 output lanes, one straight-line vector step of :mod:`vtasim.sim.cycle.simd`
(``dot_tile{W}_{BLOCK_IN}``: the input row widened to int16 pairs, one pair-wise multiply-add per two input
channels against the integer kernel's weight copy ``wgt_pairs`` (:func:`vtasim.sim.cycle.kernels.pair_weights`),
int32 sums, the accumulate and the digest terms), in execution order.  Products of int8 fit int16 and a
tile's sums are taken in wrapping int32 as the integer kernel's, so the bytes and digests are the same.

A weight element's copy is made when a GEMM first uses it after a LOAD WGT wrote it (``wready`` bit
:data:`PAIRS_READY`; :mod:`vtasim.sim.cycle.gemm_fast` keeps its float copy's bit :data:`vtasim.sim.cycle.gemm_fast.WT_READY`).

Cost rule (:func:`blas_pays`, the ``gemm="auto"`` choice per non-reset GEMM): the BLAS grouping when its
products are reused at least :data:`BLAS_MIN_REUSE` times (loops moving neither src nor wgt: each distinct
product is added once per iteration of them, and the BLAS path computes it once) or when its matrix
products have at least :data:`BLAS_MIN_ROWS` input rows per distinct weight element (uops sharing a weight
index, loops moving src but not wgt); the integer SIMD kernel otherwise.  The thresholds come from the two
paths' measured costs (``bench/engine_speed.py`` prints both on the same streams: products reused 8-fold
on the GEMM-bound stream favour BLAS 3-5x; the layers' shared weight elements do not).  Both give the same bytes: the rule only decides speed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vtasim.sim.cycle import jitcache  # noqa: F401  (cache stamp covers every source compiled in)

from vtasim.sim.cycle.kernels import check_loop_indices, pair_weights, row_hash, uop_arrays
from vtasim.sim.cycle.layout import (F_DST_FACTOR_IN, F_DST_FACTOR_OUT, F_ITER_IN, F_ITER_OUT, F_SRC_FACTOR_IN,
                              F_SRC_FACTOR_OUT, F_UOP_BGN, F_UOP_END, F_WGT_FACTOR_IN, F_WGT_FACTOR_OUT,
                              P_BATCH, P_BLOCK, P_UOP_WGT_LO, P_UOP_WGT_MASK)
from vtasim.sim.cycle.simd import (dot_tile8_8, dot_tile8_16, dot_tile8_32, dot_tile8_64, dot_tile16_8, dot_tile16_16,
                            dot_tile16_32, dot_tile16_64)

PAIRS_READY = 2          # wready bit: wgt_pairs[e] is current
# rows per weight element from which one BLAS product beats per-tile steps: the ResNet-18 layers C2-C11 have
# 49-448 and the integer SIMD kernel ran the larger ones 1.5-2.3x faster than the BLAS grouping on a lightly
# loaded machine, up to 4.5x on a loaded one (bench/engine_speed.py, ``simd s`` against ``grp s``), so only far
# larger groups take BLAS for their rows alone
BLAS_MIN_ROWS = 2048
BLAS_MIN_REUSE = 8       # additions per distinct product from which computing each once pays


@njit(cache=True)
def simd_fits(P, lanes):
    """Whether the config's tile shape has a vector step (BLOCK_IN in simd.DOT_BLOCKS, BLOCK_OUT a multiple
    of 8); else the integer kernel runs."""
    blk, bo = P[P_BLOCK], lanes // P[P_BATCH]
    return (blk == 8 or blk == 16 or blk == 32 or blk == 64) and bo % 8 == 0


@njit(cache=True, inline="always")
def dot_tile(accf, a, inpf, s, wf, w, wstride, width, blk):
    hb = row_hash(a)
    if width == 16:
        if blk == 16:
            return dot_tile16_16(accf, a, inpf, s, wf, w, wstride, hb)
        if blk == 32:
            return dot_tile16_32(accf, a, inpf, s, wf, w, wstride, hb)
        if blk == 8:
            return dot_tile16_8(accf, a, inpf, s, wf, w, wstride, hb)
        return dot_tile16_64(accf, a, inpf, s, wf, w, wstride, hb)
    if blk == 16:
        return dot_tile8_16(accf, a, inpf, s, wf, w, wstride, hb)
    if blk == 32:
        return dot_tile8_32(accf, a, inpf, s, wf, w, wstride, hb)
    if blk == 8:
        return dot_tile8_8(accf, a, inpf, s, wf, w, wstride, hb)
    return dot_tile8_64(accf, a, inpf, s, wf, w, wstride, hb)


@njit(cache=True)
def gemm_simd(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, err):
    """Non-reset GEMM over the whole loop nest, uop by uop in execution order; same bytes and digest as
    :func:`vtasim.sim.cycle.kernels.gemm_kernel`.  The caller has checked :func:`simd_fits`.  One copy of the loop
    nest per tile shape (:func:`_nest` inlined with constant ``width`` and ``blk``), so no shape is
    decided inside the uop loop."""
    if not check_loop_indices(F, j, uops, P, True, False, acc.shape[0], inp.shape[0], wgt_pairs.shape[0], err):
        return np.uint64(0)
    blk = P[P_BLOCK]
    if (acc.shape[1] // P[P_BATCH]) % 16 == 0:
        if blk == 16:
            return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 16, 16)
        if blk == 32:
            return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 16, 32)
        if blk == 8:
            return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 16, 8)
        return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 16, 64)
    if blk == 16:
        return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 8, 16)
    if blk == 32:
        return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 8, 32)
    if blk == 8:
        return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 8, 8)
    return _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, 8, 64)


@njit(cache=True, inline="always")
def _nest(F, j, uops, P, inp, wgt2, wgt_pairs, wready, acc, width, blk):
    """:func:`gemm_simd`'s loop nest for tiles of ``width`` output lanes and ``blk`` input channels."""
    bgn, end = F[j, F_UOP_BGN], F[j, F_UOP_END]
    nu = max(0, end - bgn)
    lanes = acc.shape[1]
    batch = P[P_BATCH]
    bo = lanes // batch
    nc = bo // width
    udst, usrc, uwgt = uop_arrays(uops, bgn, nu, P)
    accf, inpf, wf = acc.reshape(-1), inp.reshape(-1), wgt_pairs.reshape(-1)
    ulanes, in_row, w_row = np.uint64(lanes), np.uint64(inp.shape[1]), np.uint64(wgt_pairs.shape[1])
    wstride = np.uint64(2 * blk)                      # pair_weights: (jj * blk + o) * 2 + t
    d32 = np.uint32(0)
    for io in range(F[j, F_ITER_OUT]):
        for ii in range(F[j, F_ITER_IN]):
            doff = io * F[j, F_DST_FACTOR_OUT] + ii * F[j, F_DST_FACTOR_IN]
            soff = io * F[j, F_SRC_FACTOR_OUT] + ii * F[j, F_SRC_FACTOR_IN]
            woff = io * F[j, F_WGT_FACTOR_OUT] + ii * F[j, F_WGT_FACTOR_IN]
            for u in range(nu):
                we = np.uint64(uwgt[u] + woff)
                if wready[we] & PAIRS_READY == 0:
                    pair_weights(wgt2, wgt_pairs, we, 1, blk)
                    wready[we] |= PAIRS_READY
                ao = np.uint64(udst[u] + doff) * ulanes
                so = np.uint64(usrc[u] + soff) * in_row
                wo = we * w_row
                for b in range(batch):
                    for c in range(nc):
                        d32 = np.uint32(d32 + dot_tile(accf, ao + np.uint64(b * bo + c * width), inpf,
                                                       so + np.uint64(b * blk), wf, wo + np.uint64(2 * c * width),
                                                       wstride, width, blk))
    return np.uint64(d32)


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
    seen = np.zeros(wgt_depth, np.uint8)
    ndist = 0
    for u in range(nu):
        w = (np.int64(uops[F[j, F_UOP_BGN] + u]) >> P[P_UOP_WGT_LO]) & P[P_UOP_WGT_MASK]
        if w >= wgt_depth:
            ndist += 1
        elif seen[w] == 0:
            seen[w] = 1
            ndist += 1
    # rows per weight element: loops that move src but not wgt multiply each element's rows
    rows = P[P_BATCH] * nu / ndist
    if ii_n > 1 and F[j, F_WGT_FACTOR_IN] == 0 and F[j, F_SRC_FACTOR_IN] != 0:
        rows *= ii_n
    if io_n > 1 and F[j, F_WGT_FACTOR_OUT] == 0 and F[j, F_SRC_FACTOR_OUT] != 0:
        rows *= io_n
    return rows >= BLAS_MIN_ROWS
