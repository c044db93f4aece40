"""The compiled event loop of the cycle engine: docs/timing.md sections 2-8, one numba call per slice.

Time advances by events, not by ticks.  A loop iteration processes one cycle ``t`` completely, in an
order that respects "what a unit does in cycle t is visible to the others at t + 1":

A. a burst completing at t frees the port and advances its transfer (next request at t, or the
   transfer is done: a module's DMA instruction ends at t, or fetch holds its chunk);
B. modules whose instruction ends at t retire it (pushes are held until G);
C. fetch dispatches at most one instruction (queue room uses starts before t only);
D. idle modules start their visible queue head if its tokens are there (pops at t), applying the
   instruction's whole data effect at once through :mod:`vtasim.sim.cycle.kernels`;
E. the arbiter grants the port to the highest-priority request issued at or before t;
F. the held pushes are applied (overflow checked net of this cycle's pops);
G. every unit's accounting bucket for t is decided.

If an instruction ended, was dispatched or started at t, the next cycle processed is t + 1 (t + 1 sees
it: a freed module, a visible queue entry, queue room, pushed tokens); otherwise nothing can change
before the earliest scheduled time (burst completion, instruction end, request issue), so the loop jumps
there and charges the skipped span to the buckets decided at t.  A burst that completes without ending
its transfer and a grant are not such events: the unit's next request is at t (granted at t if the port
is free) and the port's next change is the burst's completion, both scheduled; no bucket of t + 1 differs
from t's.
No scheduled time and no FINISH means no future event exists: a deadlock, proven, not timed out.

Data effects are applied at an instruction's start.  Programs with correct tokens order every
conflicting access (a consumer starts after its producer ended), so this gives the functional
model's bytes; the digest is computed in the same kernel pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vtasim.sim.cycle import jitcache  # noqa: F401  (cache stamp covers every source compiled in)

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE
from vtasim.sim.cycle.gemm_fast import fast_gemm_fits, gemm_fast, to_float
from vtasim.sim.cycle.gemm_simd import HOST_VECTOR, blas_pays, gemm_simd, gemm_vnni, input_sums, simd_fits, to_int16
from vtasim.sim.cycle.kernels import alu_kernel, gemm_kernel, load_kernel, pair_weights, store_kernel
from vtasim.sim.cycle.layout import (GEMM_AUTO, GEMM_BLAS, GEMM_INT, GEMM_SIMD, GEMM_VNNI, B_BUSY, B_IDLE, B_MEM_WAIT, B_QUEUE_STALL, B_TOKEN_WAIT, C_ACC, C_FETCH,
                              C_INP, C_OUT, C_UOP, C_WGT, CNT_ACC, CNT_ALU, CNT_GEMM, CNT_INP, CNT_OUT,
                              CNT_UOP, CNT_WGT, ERR_DECODE, ERR_TOKEN_OVERFLOW, ERR_UNFINISHED,
                              FLD_NONE, FLD_TOKEN, FPHASE_DISPATCH, FPHASE_DONE, FPHASE_XFER, F_ITER_IN,
                              F_ITER_OUT, F_MEMORY_TYPE, F_OPCODE, F_UOP_BGN, F_UOP_END, F_USE_IMM, F_RESET_REG, F_X_PAD_0,
                              F_X_PAD_1, F_X_SIZE, F_X_STRIDE, F_Y_PAD_0, F_Y_PAD_1, F_Y_SIZE, F_DRAM_BASE, F_SRAM_BASE,
                              P_ALU_PIPE, P_BURST, P_BUS_BYTES, P_CMDQ, P_EB_UOP, P_FETCH_INSNS,
                              P_BATCH, P_BLOCK, P_GEMM_MODE, P_GEMM_PIPE, P_INSN_ADDR, P_INSN_COUNT, P_LATENCY, P_EB_OUT, P_TOKQ,
                              S_CHUNK, S_ERR_CODE, S_ERR_FIELD, S_ERR_INSN, S_ERR_LIMIT, S_ERR_VALUE,
                              S_EVENTS, S_FINISH_E, S_NRET, S_PAIRS_STALE, N_FIELDS, P_LAY, S_FLASTD, S_FNEXT, S_FPHASE, S_PORT_UNIT,
                              S_PORT_UNTIL, S_STATUS, S_T, S_TOK0, ST_DEADLOCK, ST_DONE, ST_ERROR,
                              TOK_G2L, TOK_G2S, TOK_L2G, TOK_S2G, U_COMPUTE, U_FETCH, U_LOAD, US_ADDR0, US_BEATS,
                              US_BUSY, US_CLIENT, US_E, US_GRANTED, US_NBYTES,
                              US_NDISP, US_NROWS, US_NSTART, US_NTOTAL, US_PIDX, US_QOFF, US_REQ, US_ROW,
                              US_S, US_STRIDE, US_W, US_W1, US_XFER)

NO_TIME = np.int64(1) << np.int64(62)
# control bits of an instruction word, at the same place in every format (vtasim.sim.cycle.engine.params checks)
CTL_POP_PREV, CTL_POP_NEXT, CTL_PUSH_PREV, CTL_PUSH_NEXT = np.uint64(3), np.uint64(4), np.uint64(5), np.uint64(6)


@njit(cache=True, inline="always")
def fld(F, P, j, k):
    """Field ``k`` (a layout.F_* number) of instruction ``j``, decoded from its words ``F[j]`` with the
    bit table at ``P[P_LAY:]`` (as vtasim.hw.isa.decode_fields: fields the opcode lacks read 0)."""
    b = P_LAY + (np.int64(F[j, 0] & np.uint64(7)) * N_FIELDS + k) * 3
    width = P[b + 1]
    if width == 0:
        return np.int64(0)
    lo = P[b]
    v = np.int64((F[j, lo >> 6] >> np.uint64(lo & 63)) & np.uint64((np.int64(1) << width) - 1))
    if P[b + 2] != 0 and (v >> (width - 1)) & 1:
        v -= np.int64(1) << width
    return v


@njit(cache=True)
def decode_row(F, P, j, row):
    """All fields of instruction j into ``row[0, :]``: the one-row field matrix the kernels read."""
    for k in range(N_FIELDS):
        row[0, k] = fld(F, P, j, k)


@njit(cache=True, inline="always")
def _log2(v):
    """log2 of a power of two (P_BUS_BYTES, P_BURST: hw/timing.py and vtasim.sim.cycle.engine.params check them)."""
    k = np.int64(0)
    while (np.int64(1) << k) < v:
        k += 1
    return k


@njit(cache=True, inline="always")
def _row_words(addr0, row, stride, nbytes, log_bus):
    """First and end bus words of row ``row`` of a transfer (bus words are ``2**log_bus`` bytes; addresses
    are never negative, so the shifts are the floor and ceiling divisions)."""
    a = addr0 + row * stride
    return a >> log_bus, (a + nbytes + (np.int64(1) << log_bus) - 1) >> log_bus


@njit(cache=True, inline="always")
def _beats(w, w1, log_burst):
    # a burst never crosses a BURST_BEATS-word aligned boundary (timing.md 4.1); BURST_BEATS = 2**log_burst
    return min(w1, ((w >> log_burst) + 1) << log_burst) - w


@njit(cache=True)
def _set_row(US, u, P):
    US[u, US_W], US[u, US_W1] = _row_words(US[u, US_ADDR0], US[u, US_ROW], US[u, US_STRIDE], US[u, US_NBYTES],
                                           _log2(P[P_BUS_BYTES]))
    US[u, US_BEATS] = _beats(US[u, US_W], US[u, US_W1], _log2(P[P_BURST]))


@njit(cache=True, inline="always")
def _xfer_begin(US, u, client, addr0, stride, nbytes, nrows, req_t, P):
    US[u, US_XFER] = 1
    US[u, US_CLIENT] = client
    US[u, US_ADDR0] = addr0
    US[u, US_STRIDE] = stride
    US[u, US_NBYTES] = nbytes
    US[u, US_NROWS] = nrows
    US[u, US_ROW] = 0
    US[u, US_GRANTED] = 0
    US[u, US_REQ] = req_t
    _set_row(US, u, P)


@njit(cache=True, inline="always")
def _fetch_begin(S, US, P, chunk_req, req_t):
    k = S[S_CHUNK]
    first = k * P[P_FETCH_INSNS]
    n = min(P[P_FETCH_INSNS], P[P_INSN_COUNT] - first)
    chunk_req[k] = req_t
    S[S_FPHASE] = FPHASE_XFER
    _xfer_begin(US, U_FETCH, C_FETCH, P[P_INSN_ADDR] + 16 * first, 0, 16 * n, 1, req_t, P)


@njit(cache=True, inline="always")
def _token_slots(u):
    """(slot popped by pop_prev, by pop_next, pushed by push_prev, by push_next); -1 = flag unused."""
    if u == U_LOAD:
        return -1, TOK_G2L, -1, TOK_L2G
    if u == U_COMPUTE:
        return TOK_L2G, TOK_S2G, TOK_G2L, TOK_G2S
    return TOK_G2S, -1, TOK_S2G, -1


@njit(cache=True, inline="always")
def _fail(S, code, j, field, value, limit):
    S[S_STATUS] = ST_ERROR
    S[S_ERR_CODE] = code
    S[S_ERR_INSN] = j
    S[S_ERR_FIELD] = field
    S[S_ERR_VALUE] = value
    S[S_ERR_LIMIT] = limit


@njit(cache=True, inline="always")
def _vector_path(P):
    """The integer vector kernel of the GEMM mode (``layout.P_GEMM_MODE``): GEMM_SIMD or GEMM_VNNI."""
    mode = P[P_GEMM_MODE]
    if mode == GEMM_VNNI or mode == GEMM_SIMD:
        return mode
    return HOST_VECTOR


@njit(cache=True)
def _execute(u, j, t, S, US, F, P, row, CNT, err, dram, uop32, uop_b, inp_b, inp2, inp16, wgt_b, wgt2, wgt_pairs, wgt_quads, xc, acc_b, acc2,
             xf, wt, wready, ab, pb):
    """Apply instruction j's data effect and schedule its end (or its first DMA request).

    The instruction's fields are decoded once into ``row`` (``row[0, F_*]``), which the kernels take
    as their field matrix with index 0."""
    decode_row(F, P, j, row)
    op = row[0, F_OPCODE]
    dig = np.uint64(0)
    if op == OP_LOAD or op == OP_STORE:
        x, y = row[0, F_X_SIZE], row[0, F_Y_SIZE]
        if x == 0:
            US[u, US_E] = t + 1
            return dig
        mt = row[0, F_MEMORY_TYPE]
        if op == OP_STORE:
            eb = P[P_EB_OUT]   # a STORE moves OUT elements whatever its memory_type field
            dig = store_kernel(row, 0, acc2, acc2.shape[0], eb, dram, err)
            CNT[CNT_OUT] += x * y * eb
            client, pads = C_OUT, 0
        else:
            eb = P[P_EB_UOP + mt]
            n_sram = ((row[0, F_X_PAD_0] + x + row[0, F_X_PAD_1])
                      * (row[0, F_Y_PAD_0] + y + row[0, F_Y_PAD_1]))
            pads = n_sram - x * y
            if mt == MEM_UOP:
                dig = load_kernel(row, 0, uop_b, uop32.size, 4, 4, False, dram, err)
                CNT[CNT_UOP] += x * y * 4
                client = C_UOP
            elif mt == MEM_INP:
                dig = load_kernel(row, 0, inp_b, inp2.shape[0], inp2.shape[1], eb, False, dram, err)
                if err[0] == 0 and (P[P_GEMM_MODE] == GEMM_AUTO or P[P_GEMM_MODE] == GEMM_BLAS):
                    to_float(inp_b, xf.reshape(-1), row[0, F_SRAM_BASE] * inp2.shape[1], n_sram * inp2.shape[1])
                if err[0] == 0 and P[P_GEMM_MODE] != GEMM_INT:     # every mode but int can run a vector kernel
                    if _vector_path(P) == GEMM_VNNI:
                        input_sums(inp_b, xc, row[0, F_SRAM_BASE], n_sram, P[P_BLOCK], P[P_BATCH])
                    else:
                        to_int16(inp_b, inp16.reshape(-1), row[0, F_SRAM_BASE] * inp2.shape[1],
                                 n_sram * inp2.shape[1])
                CNT[CNT_INP] += x * y * eb
                client = C_INP
            elif mt == MEM_WGT:
                dig = load_kernel(row, 0, wgt_b, wgt2.shape[0], wgt2.shape[1], eb, False, dram, err)
                if err[0] == 0:
                    if P[P_GEMM_MODE] != GEMM_INT:    # the GEMM weight copies are made when a GEMM needs them
                        for e in range(row[0, F_SRAM_BASE], row[0, F_SRAM_BASE] + n_sram):
                            wready[e] = 0
                        S[S_PAIRS_STALE] = 1
                    else:
                        pair_weights(wgt2, wgt_pairs, row[0, F_SRAM_BASE], n_sram, P[P_BLOCK])
                CNT[CNT_WGT] += x * y * eb
                client = C_WGT
            elif mt == MEM_ACC or mt == MEM_ACC_8BIT:
                dig = load_kernel(row, 0, acc_b, acc2.shape[0], acc2.shape[1] * 4, eb, mt == MEM_ACC_8BIT,
                                  dram, err)
                CNT[CNT_ACC] += x * y * acc2.shape[1] * 4
                client = C_ACC
            else:
                _fail(S, ERR_DECODE, j, FLD_NONE, mt, 0)
                return dig
        if y == 0:
            US[u, US_E] = t + 1 + pads
        else:
            _xfer_begin(US, u, client, row[0, F_DRAM_BASE] * eb, row[0, F_X_STRIDE] * eb, x * eb, y,
                        t + 1 + pads, P)
        return dig
    if op == OP_GEMM or op == OP_ALU:
        n = (row[0, F_ITER_OUT] * row[0, F_ITER_IN]
             * max(0, row[0, F_UOP_END] - row[0, F_UOP_BGN]))
        if op == OP_GEMM:
            mode = P[P_GEMM_MODE]
            path = GEMM_INT
            if row[0, F_RESET_REG] == 0 and mode != GEMM_INT:
                if ((mode == GEMM_BLAS or mode == GEMM_AUTO) and fast_gemm_fits(row, 0, P, pb)
                        and (mode == GEMM_BLAS or blas_pays(row, 0, uop32, P, wgt2.shape[0]))):
                    path = GEMM_BLAS
                elif simd_fits(P, acc2.shape[1]):
                    path = _vector_path(P)
            if path == GEMM_BLAS:
                dig = gemm_fast(row, 0, uop32, P, xf, wgt2, wt, wready, ab, pb, acc2, err)
            elif path == GEMM_VNNI:
                dig = gemm_vnni(row, 0, uop32, P, inp2, xc, wgt2, wgt_quads, wready, acc2, err)
            elif path == GEMM_SIMD:
                dig = gemm_simd(row, 0, uop32, P, inp16, wgt2, wgt_pairs, wready, acc2, err)
            else:
                if S[S_PAIRS_STALE] != 0 and row[0, F_RESET_REG] == 0:
                    pair_weights(wgt2, wgt_pairs, 0, wgt2.shape[0], P[P_BLOCK])
                    S[S_PAIRS_STALE] = 0
                dig = gemm_kernel(row, 0, uop32, P, inp2, wgt_pairs, acc2, err)
            if row[0, F_RESET_REG] == 0:
                CNT[CNT_GEMM] += n
            dur = n + P[P_GEMM_PIPE]
        else:
            dig = alu_kernel(row, 0, uop32, P, acc2, err)
            CNT[CNT_ALU] += n
            dur = (n if row[0, F_USE_IMM] else 2 * n - 1) + P[P_ALU_PIPE]
        US[u, US_E] = t + (dur if n > 0 else 1)
        return dig
    if op == OP_FINISH:
        US[u, US_E] = t + 1
        return dig
    _fail(S, ERR_DECODE, j, FLD_NONE, op, 0)
    return dig


@njit(cache=True)
def _start(u, j, t, S, US, F, P, row, s_cyc, dig_out, CNT, err, dram, uop32, uop_b, inp_b, inp2, inp16,
           wgt_b, wgt2, wgt_pairs, wgt_quads, xc, acc_b, acc2, xf, wt, wready, ab, pb):
    """Start instruction j on module u at t: pop its tokens, apply its data effect, schedule it."""
    pp, pn, _, _ = _token_slots(u)
    ctl = F[j, 0]
    need_p = (ctl >> CTL_POP_PREV) & np.uint64(1) != 0 and pp >= 0
    need_n = (ctl >> CTL_POP_NEXT) & np.uint64(1) != 0 and pn >= 0
    if need_p:
        S[S_TOK0 + pp] -= 1
    if need_n:
        S[S_TOK0 + pn] -= 1
    US[u, US_NSTART] += 1
    US[u, US_BUSY] = 1
    US[u, US_PIDX] = j
    US[u, US_S] = t
    US[u, US_E] = -1
    s_cyc[j] = t
    d = _execute(u, j, t, S, US, F, P, row, CNT, err, dram, uop32, uop_b, inp_b, inp2, inp16, wgt_b, wgt2, wgt_pairs, wgt_quads, xc, acc_b, acc2,
                 xf, wt, wready, ab, pb)
    dig_out[j] = np.uint32(d)
    if err[0] != 0:
        _fail(S, err[0], j, err[1], err[2], err[3])


@njit(cache=True)
def init_state(S, US, P, chunk_req):
    S[S_T] = 0
    S[S_PORT_UNTIL] = -1
    S[S_PORT_UNIT] = -1
    S[S_CHUNK] = 0
    S[S_FNEXT] = 0
    S[S_FLASTD] = -1
    S[S_FINISH_E] = -1
    for u in range(4):
        US[u, US_REQ] = -1
    _fetch_begin(S, US, P, chunk_req, 0)


@njit(cache=True, nogil=True)
def run_slice(S, US, F, P, module, modq, disp, s_cyc, e_cyc, dig, ret, chunk_req, chunk_done, BD, CNT, dram,
              uop32, uop_b, inp_b, inp2, inp16, wgt_b, wgt2, wgt_pairs, wgt_quads, xc, acc_b, acc2, xf, wt, wready, ab, pb, event_budget):
    """Run at most ``event_budget`` loop iterations; state lives in S/US so the next call resumes.

    The per-event code reads arrays directly rather than through helpers that take arrays: numba counts
    references to an array passed into an inlined helper (two atomic operations per array per call), which
    once cost more than the whole event logic.  Control bits come straight from the instruction word
    (``CTL_*``: the same bits in every format, checked by ``vtasim.sim.cycle.engine.params``) and the unit from
    the program's module array."""
    err = np.zeros(4, np.int64)
    row = np.zeros((1, N_FIELDS), np.int64)
    ended = np.zeros(4, np.int64)
    bucket = np.zeros(4, np.int64)
    L, Q, TQ = P[P_LATENCY], P[P_CMDQ], P[P_TOKQ]
    count, log_bus, log_burst, fetch_mask = P[P_INSN_COUNT], _log2(P[P_BUS_BYTES]), _log2(P[P_BURST]), P[P_FETCH_INSNS] - 1
    for _ in range(event_budget):
        t = S[S_T]
        active = False          # something at t that t + 1 can see: an end, a dispatch or a start
        # A. burst completion
        if S[S_PORT_UNTIL] == t:
            u = S[S_PORT_UNIT]
            S[S_PORT_UNTIL] = -1
            S[S_PORT_UNIT] = -1
            US[u, US_GRANTED] = 0
            US[u, US_W] += US[u, US_BEATS]
            if US[u, US_W] == US[u, US_W1]:
                US[u, US_ROW] += 1
                if US[u, US_ROW] < US[u, US_NROWS]:
                    US[u, US_W], US[u, US_W1] = _row_words(US[u, US_ADDR0], US[u, US_ROW], US[u, US_STRIDE],
                                                           US[u, US_NBYTES], log_bus)
                    US[u, US_BEATS] = _beats(US[u, US_W], US[u, US_W1], log_burst)
            else:
                US[u, US_BEATS] = _beats(US[u, US_W], US[u, US_W1], log_burst)
            if US[u, US_ROW] == US[u, US_NROWS]:
                US[u, US_XFER] = 0
                US[u, US_REQ] = -1
                if u == U_FETCH:
                    chunk_done[S[S_CHUNK]] = t
                    S[S_FPHASE] = FPHASE_DISPATCH
                else:
                    US[u, US_E] = t
            else:
                US[u, US_REQ] = t
        # B. retire
        for u in range(1, 4):
            ended[u] = 0
            if US[u, US_BUSY] and US[u, US_E] == t:
                j = US[u, US_PIDX]
                e_cyc[j] = t
                ret[S[S_NRET]] = j
                S[S_NRET] += 1
                US[u, US_BUSY] = 0
                ended[u] = 1
                active = True
                if F[j, 0] & np.uint64(7) == OP_FINISH:
                    S[S_FINISH_E] = t
        # C. dispatch
        dispatched = False
        if S[S_FPHASE] == FPHASE_DISPATCH:
            j = S[S_FNEXT]
            u = module[j] + 1
            if US[u, US_NDISP] - US[u, US_NSTART] < Q:
                disp[j] = t
                US[u, US_NDISP] += 1
                S[S_FNEXT] = j + 1
                S[S_FLASTD] = t
                dispatched = True
                active = True
                if S[S_FNEXT] == count:
                    S[S_FPHASE] = FPHASE_DONE
                elif S[S_FNEXT] & fetch_mask == 0:
                    S[S_CHUNK] += 1
                    _fetch_begin(S, US, P, chunk_req, t + 1)
        # D. starts
        for u in range(1, 4):
            # the queue head of an idle module starts if it is visible at t and its tokens are there
            if ended[u] or US[u, US_BUSY] or US[u, US_NSTART] >= US[u, US_NDISP]:
                continue
            j = modq[US[u, US_QOFF] + US[u, US_NSTART]]
            if disp[j] >= t:
                continue
            pp, pn, _, _ = _token_slots(u)
            ctl = F[j, 0]
            if ((ctl >> CTL_POP_PREV) & np.uint64(1) != 0 and pp >= 0 and S[S_TOK0 + pp] == 0) or \
                    ((ctl >> CTL_POP_NEXT) & np.uint64(1) != 0 and pn >= 0 and S[S_TOK0 + pn] == 0):
                continue
            _start(u, j, t, S, US, F, P, row, s_cyc, dig, CNT, err, dram, uop32, uop_b, inp_b, inp2, inp16, wgt_b, wgt2,
                   wgt_pairs, wgt_quads, xc, acc_b, acc2, xf, wt, wready, ab, pb)
            active = True
            if S[S_STATUS] == ST_ERROR:
                S[S_T] = t
                return
        # E. arbitration
        if S[S_PORT_UNTIL] < 0:
            best, best_c = -1, 99
            for u in range(4):
                if US[u, US_XFER] and US[u, US_REQ] >= 0 and US[u, US_REQ] <= t \
                        and not US[u, US_GRANTED] and US[u, US_CLIENT] < best_c:
                    best, best_c = u, US[u, US_CLIENT]
            if best >= 0:
                US[best, US_GRANTED] = 1
                S[S_PORT_UNTIL] = t + L + US[best, US_BEATS]
                S[S_PORT_UNIT] = best
        # F. pushes of the instructions that ended at t
        for u in range(1, 4):
            if ended[u]:
                j = US[u, US_PIDX]
                _, _, sp, sn = _token_slots(u)
                ctl = F[j, 0]
                for slot, flag in ((sp, (ctl >> CTL_PUSH_PREV) & np.uint64(1)), (sn, (ctl >> CTL_PUSH_NEXT) & np.uint64(1))):
                    if slot >= 0 and flag != 0:
                        S[S_TOK0 + slot] += 1
                        if S[S_TOK0 + slot] > TQ:
                            _fail(S, ERR_TOKEN_OVERFLOW, j, FLD_TOKEN, slot, TQ)
                            S[S_T] = t
                            return
        # G. accounting buckets for cycle t
        if dispatched:
            bucket[0] = B_BUSY
        elif US[U_FETCH, US_XFER]:
            bucket[0] = B_BUSY if US[U_FETCH, US_GRANTED] else B_MEM_WAIT
        elif S[S_FPHASE] == FPHASE_DISPATCH:
            bucket[0] = B_QUEUE_STALL
        else:
            bucket[0] = B_IDLE
        for u in range(1, 4):
            if US[u, US_BUSY] or ended[u]:
                pending = US[u, US_XFER] and US[u, US_REQ] >= 0 and US[u, US_REQ] <= t and not US[u, US_GRANTED]
                bucket[u] = B_MEM_WAIT if pending else B_BUSY
            elif US[u, US_NSTART] < US[u, US_NDISP] and disp[modq[US[u, US_QOFF] + US[u, US_NSTART]]] < t:
                bucket[u] = B_TOKEN_WAIT
            else:
                bucket[u] = B_IDLE
        S[S_EVENTS] += 1
        if S[S_FINISH_E] == t:
            for u in range(1, 4):
                if US[u, US_BUSY] or US[u, US_NSTART] < US[u, US_NTOTAL]:
                    j = US[u, US_PIDX] if US[u, US_BUSY] else modq[US[u, US_QOFF] + US[u, US_NSTART]]
                    _fail(S, ERR_UNFINISHED, j, FLD_NONE, u, t)
                    S[S_T] = t
                    return
            for u in range(4):
                BD[u, bucket[u]] += 1
            S[S_STATUS] = ST_DONE
            S[S_T] = t
            return
        # next cycle to process
        tn = NO_TIME
        if active:
            tn = t + 1
        else:
            if S[S_PORT_UNTIL] >= 0:
                tn = min(tn, S[S_PORT_UNTIL])
            for u in range(4):
                if u > 0 and US[u, US_BUSY] and US[u, US_E] > t:
                    tn = min(tn, US[u, US_E])
                if US[u, US_XFER] and US[u, US_REQ] > t:
                    tn = min(tn, US[u, US_REQ])
        if tn == NO_TIME:
            S[S_STATUS] = ST_DEADLOCK
            S[S_T] = t
            return
        for u in range(4):
            BD[u, bucket[u]] += tn - t
        S[S_T] = tn


@njit(cache=True, nogil=True)
def replay_data(order, kinds, S, US, F, P, module, CNT, dram, uop32, uop_b, inp_b, inp2, inp16, wgt_b, wgt2, wgt_pairs, wgt_quads, xc, acc_b, acc2,
                xf, wt, wready, ab, pb):
    """The data effects alone: instructions ``order`` in that order through the same kernels as a run, no
    event loop, skipping opcodes whose ``kinds[opcode]`` is 0 (what the engine-speed bench times as the data
    work of a run).  Returns the sum of the digests; stops at an instruction that fails (``S`` then holds
    the error, as after a run)."""
    err = np.zeros(4, np.int64)
    row = np.zeros((1, N_FIELDS), np.int64)
    d = np.uint64(0)
    for k in range(order.size):
        j = order[k]
        if kinds[F[j, 0] & np.uint64(7)] != 0:
            d += _execute(module[j] + 1, j, 0, S, US, F, P, row, CNT, err, dram, uop32, uop_b, inp_b, inp2, inp16, wgt_b,
                          wgt2, wgt_pairs, wgt_quads, xc, acc_b, acc2, xf, wt, wready, ab, pb)
            if err[0] != 0:
                _fail(S, err[0], j, err[1], err[2], err[3])
                break
    return d
