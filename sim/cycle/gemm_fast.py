"""Exact fast path of the cycle engine's GEMM data effect (timing is untouched: only bytes are made here).

A GEMM instruction adds one tile ``inp[src] . wgt[wgt]^T`` per (i_out, i_in, uop) to ``acc[dst]``.  The tiles
read only the INP and WGT SRAMs, never the accumulator, so all of them can be computed before any is added.
This module computes them in bulk - grouped by weight block, one float32 matrix product (BLAS, through
numba's ``np.dot``) per distinct weight element - and then adds them to the accumulator in execution order,
taking the digest of every write on the way (docs/timing.md 9 counts each write with the value after it,
so the adds stay sequential; each is an 8- or 16-lane vector step of :mod:`vtasim.sim.cycle.simd`).  Loops whose src and wgt factors are both
0 repeat the same tiles: their products are computed once.

Exactness (:func:`float32_exact`): float32 is used only where the config's widths prove every partial sum
of a tile lane an integer that float32 holds exactly; otherwise, and for reset GEMMs and nests whose
products do not fit the scratch, :func:`vtasim.sim.cycle.kernels.gemm_kernel` (the integer kernel) runs instead.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vtasim.sim.cycle import jitcache  # noqa: F401  (cache stamp covers every source compiled in)

from vtasim.sim.cycle.simd import add_tile8, add_tile16, aligned, copy_f16
from vtasim.sim.cycle.kernels import check_loop_indices, lane_hashes, lane_sum, mix32, row_hash, uop_arrays
from vtasim.sim.cycle.layout import (F_DST_FACTOR_IN, F_DST_FACTOR_OUT, F_ITER_IN, F_ITER_OUT, F_SRC_FACTOR_IN,
                              F_SRC_FACTOR_OUT, F_UOP_BGN, F_UOP_END, F_WGT_FACTOR_IN, F_WGT_FACTOR_OUT,
                              P_BATCH)

FLOAT32_EXACT_LIMIT = 1 << 24     # every integer of magnitude <= 2^24 is a float32
SCRATCH_ELEMS = 1 << 18           # float32 elements of the product slab (1 MiB) and of the gathered inputs
MIN_DOT_ROWS = 8                  # a weight group with fewer input rows is multiplied in a plain loop
WT_READY = 1                      # wready bit: wt[e] is current (vtasim.sim.cycle.gemm_simd keeps another bit)


def float32_exact(inp_bits: int, wgt_bits: int, block_in: int) -> bool:
    """Whether float32 computes every GEMM tile exactly for these widths.

    A tile lane is the sum of ``block_in`` products ``x * w`` of two's-complement integers, so
    ``|x * w| <= 2^(inp_bits-1) * 2^(wgt_bits-1)`` (the bound is reached by the most negative values) and
    every partial sum, in whatever order a BLAS kernel adds (any subset of the terms), has magnitude at
    most ``block_in * 2^(inp_bits + wgt_bits - 2)``.  When that is <= 2^24 every intermediate value is an
    integer float32 represents, so each multiply, add or fused multiply-add rounds nothing.  With
    vtasim's int8 inputs and weights and BLOCK_IN <= 64 the bound is 2^20: float32 always holds."""
    return block_in * (1 << (inp_bits + wgt_bits - 2)) <= FLOAT32_EXACT_LIMIT


def scratch(cfg):
    """The arrays the fast path keeps next to the SRAMs: ``(xf, wt, wready, ab, pb)``.

    ``xf[r * BATCH + b, k]`` = INP element r, batch row b, lane k (float32, refreshed by LOAD INP);
    ``wt[e, k, o]`` = WGT element e's weight of input lane k for output o (the transpose, so a product is
    ``rows @ wt[e]``, the form BLAS multiplies fastest at these sizes), made when a GEMM first uses
    element e after a LOAD WGT wrote it (``wready[e]`` bit :data:`WT_READY` while it is current); ``ab`` gathered input rows
    and ``pb`` products, both ``SCRATCH_ELEMS`` floats."""
    blk = cfg.block_in
    xf = aligned((cfg.inp_depth * cfg.batch, blk), np.float32)
    wt = aligned((cfg.wgt_depth, blk, cfg.block_out), np.float32)
    wready = np.zeros(cfg.wgt_depth, np.uint8)
    rows = max(cfg.batch, SCRATCH_ELEMS // blk)
    # every slot of ab and pb is written before it is read: no zero fill (untouched pages cost nothing)
    return (xf, wt, wready, aligned((rows, blk), np.float32, zero=False),
            aligned((rows, cfg.block_out), np.float32, zero=False))


@njit(cache=True)
def to_float(src, dst, first, count):
    """``dst[first:first + count]`` = the int8 values of bytes ``src[first:first + count]`` as float32: the
    float copy of INP elements after a LOAD (``xf`` keeps the SRAM's own element layout)."""
    for i in range(np.uint64(first), np.uint64(first + count)):
        dst[i] = np.float32(np.int8(src[i]))


@njit(cache=True)
def transpose_weights(wgt2, wt, e):
    """``wt[e, k, o]`` = float32 of ``wgt2[e, o * BLOCK_IN + k]``."""
    blk, bo = wt.shape[1], wt.shape[2]
    for k in range(blk):
        for o in range(bo):
            wt[e, k, o] = np.float32(wgt2[e, o * blk + k])


@njit(cache=True)
def fast_gemm_fits(F, j, P, pb):
    """Whether one outer iteration's distinct products fit the product slab (else the integer kernel)."""
    nu = max(0, F[j, F_UOP_END] - F[j, F_UOP_BGN])
    in_moves = F[j, F_SRC_FACTOR_IN] != 0 or F[j, F_WGT_FACTOR_IN] != 0
    ii_eff = F[j, F_ITER_IN] if in_moves else 1
    return nu * ii_eff * P[P_BATCH] <= pb.shape[0]


@njit(cache=True)
def gemm_fast(F, j, uops, P, xf, wgt2, wt, wready, ab, pb, acc, err):
    """Non-reset GEMM through grouped float32 products; same bytes and digest as the integer kernel.

    The caller has checked :func:`float32_exact` (engine parameters) and :func:`fast_gemm_fits`."""
    if not check_loop_indices(F, j, uops, P, True, False, acc.shape[0], xf.shape[0] // P[P_BATCH], wt.shape[0],
                              err):
        return np.uint64(0)
    bgn, end = F[j, F_UOP_BGN], F[j, F_UOP_END]
    nu = max(0, end - bgn)
    io_n, ii_n = F[j, F_ITER_OUT], F[j, F_ITER_IN]
    if nu == 0 or io_n == 0 or ii_n == 0:
        return np.uint64(0)
    batch, lanes = P[P_BATCH], acc.shape[1]
    dfo, dfi = F[j, F_DST_FACTOR_OUT], F[j, F_DST_FACTOR_IN]
    sfo, sfi = F[j, F_SRC_FACTOR_OUT], F[j, F_SRC_FACTOR_IN]
    wfo, wfi = F[j, F_WGT_FACTOR_OUT], F[j, F_WGT_FACTOR_IN]
    udst, usrc, uwgt = uop_arrays(uops, bgn, nu, P)
    # a loop that moves neither src nor wgt repeats the same tiles: products over the others only
    out_moves = sfo != 0 or wfo != 0
    in_moves = sfi != 0 or wfi != 0
    ii_eff = ii_n if in_moves else 1
    per_out = nu * ii_eff                             # distinct tiles of one outer iteration
    tiles_cap = pb.shape[0] // batch
    iob = max(1, min(io_n, tiles_cap // per_out)) if out_moves else io_n
    nq_cap = per_out * (iob if out_moves else 1)
    tw = np.empty(nq_cap, np.uint64)                  # weight element of product q
    ts = np.empty(nq_cap, np.int64)                   # input element of product q
    pos = np.empty(nq_cap, np.int64)                  # row block of product q in the slab (sorted by weight)
    cnt = np.zeros(wt.shape[0] + 1, np.int64)
    seen = np.empty(nq_cap, np.int64)
    dv = np.zeros(lanes, np.uint32)
    hx = lane_hashes(lanes)
    accf = acc.reshape(-1)
    pbf, abf, xff = pb.reshape(-1), ab.reshape(-1), xf.reshape(-1)
    row_elems = np.uint64(batch * xf.shape[1])      # one INP element: BATCH rows of BLOCK_IN lanes
    ulanes = np.uint64(lanes)
    vec = 16 if lanes % 16 == 0 else (8 if lanes % 8 == 0 else 0)    # vtasim.sim.cycle.simd widths, else a loop
    d32 = np.uint32(0)
    for io0 in range(0, io_n, iob):
        io1 = min(io_n, io0 + iob)
        n_out = (io1 - io0) if out_moves else 1
        nq = n_out * per_out
        # 1. products: q = (io_r * ii_eff + ii_r) * nu + u, grouped by weight element (counting sort);
        # indices are unsigned so numba adds no negative-index fix-ups to these loops
        ndist = 0
        q = 0
        for io_r in range(n_out):
            io = io0 + io_r
            for ii in range(ii_eff):
                wb, sb = io * wfo + ii * wfi, io * sfo + ii * sfi
                for u in range(nu):
                    w = np.uint64(uwgt[u] + wb)
                    tw[q] = w
                    ts[q] = usrc[u] + sb
                    c = cnt[w]
                    if c == 0:
                        seen[ndist] = w
                        ndist += 1
                        if wready[w] & WT_READY == 0:     # transpose the element's weights once
                            transpose_weights(wgt2, wt, w)
                            wready[w] |= WT_READY
                    cnt[w] = c + 1
                    q += 1
        start = 0
        for k in range(ndist):                        # cnt becomes each group's next free slot
            w = np.uint64(seen[k])
            c = cnt[w]
            cnt[w] = start
            start += c
        for q in range(nq):                           # gather each product's input rows into its slot
            w = np.uint64(tw[q])
            slot = cnt[w]
            cnt[w] = slot + 1
            pos[q] = slot
            dst = np.uint64(slot) * row_elems
            src = np.uint64(ts[q]) * row_elems
            if row_elems % np.uint64(16) == 0:
                for e in range(np.uint64(0), row_elems, np.uint64(16)):
                    copy_f16(abf, dst + e, xff, src + e)
            else:
                for e in range(row_elems):
                    abf[dst + e] = xff[src + e]
        g0 = 0
        for k in range(ndist):
            we = seen[k]
            g1 = cnt[we]                              # end of this group after the placement pass
            cnt[we] = 0
            if (g1 - g0) * batch >= MIN_DOT_ROWS:
                np.dot(ab[g0 * batch:g1 * batch], wt[we], pb[g0 * batch:g1 * batch])
            else:
                for r in range(g0 * batch, g1 * batch):
                    for o in range(pb.shape[1]):
                        s = np.float32(0)
                        for kk in range(ab.shape[1]):
                            s += ab[r, kk] * wt[we, kk, o]
                        pb[r, o] = s
            g0 = g1
        # 2. accumulate in execution order (i_out, i_in, uop), one digest term per lane write
        for io in range(io0, io1):
            io_r = io - io0 if out_moves else 0
            for ii in range(ii_n):
                qb = (io_r * ii_eff + (ii if in_moves else 0)) * nu
                doff = io * dfo + ii * dfi
                for u in range(nu):
                    a = np.uint64(udst[u] + doff) * ulanes
                    pr = np.uint64(pos[qb + u]) * ulanes
                    if vec == 16:
                        for c in range(np.uint64(0), ulanes, np.uint64(16)):
                            d32 = np.uint32(d32 + add_tile16(accf, a + c, pbf, pr + c, row_hash(a + c)))
                    elif vec == 8:
                        for c in range(np.uint64(0), ulanes, np.uint64(8)):
                            d32 = np.uint32(d32 + add_tile8(accf, a + c, pbf, pr + c, row_hash(a + c)))
                    else:
                        hb = row_hash(a)
                        for ln in range(lanes):
                            i = a + np.uint64(ln)
                            v = np.int32(accf[i] + np.int32(pbf[pr + np.uint64(ln)]))
                            accf[i] = v
                            dv[ln] = np.uint32(dv[ln] + mix32(hb, hx[ln], v))
    return (lane_sum(dv) + np.uint64(d32)) & np.uint64(0xFFFFFFFF)
