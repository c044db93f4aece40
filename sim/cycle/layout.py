"""Index constants shared by the compiled core and its Python wrapper.

The numba core keeps all of its state in plain int64 arrays so that a run can stop after a slice of
events and resume (progress reporting) without any Python per cycle.  These names say which slot
holds what; numba folds module-level ints into constants.
"""

from vtasim.hw.isa import INSN_FIELDS, TOKEN_QUEUES
from vtasim.sim.errors import SimError

# ---- field numbers (order of vtasim.hw.isa.Insn).  The core reads fields straight from the 16-byte
# instruction words F[n_insn, 2] (uint64 halves) with the bit table P_LAY, never a decoded matrix ----
(F_OPCODE, F_POP_PREV, F_POP_NEXT, F_PUSH_PREV, F_PUSH_NEXT, F_MEMORY_TYPE, F_SRAM_BASE, F_DRAM_BASE,
 F_Y_SIZE, F_X_SIZE, F_X_STRIDE, F_Y_PAD_0, F_Y_PAD_1, F_X_PAD_0, F_X_PAD_1, F_RESET_REG, F_UOP_BGN,
 F_UOP_END, F_ITER_OUT, F_ITER_IN, F_DST_FACTOR_OUT, F_DST_FACTOR_IN, F_SRC_FACTOR_OUT,
 F_SRC_FACTOR_IN, F_WGT_FACTOR_OUT, F_WGT_FACTOR_IN, F_ALU_OPCODE, F_USE_IMM, F_IMM) = range(29)
assert INSN_FIELDS == ("opcode", "pop_prev", "pop_next", "push_prev", "push_next", "memory_type",
                       "sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1",
                       "x_pad_0", "x_pad_1", "reset_reg", "uop_bgn", "uop_end", "iter_out", "iter_in",
                       "dst_factor_out", "dst_factor_in", "src_factor_out", "src_factor_in",
                       "wgt_factor_out", "wgt_factor_in", "alu_opcode", "use_imm", "imm")

# ---- parameter vector P (filled from VTAConfig by vtasim.sim.cycle.engine) ----
(P_LATENCY, P_BUS_BYTES, P_BURST, P_CMDQ, P_TOKQ, P_FETCH_INSNS, P_GEMM_PIPE, P_ALU_PIPE, P_INSN_ADDR,
 P_INSN_COUNT, P_BATCH, P_BLOCK, P_UOP_DST_LO, P_UOP_DST_MASK, P_UOP_SRC_LO, P_UOP_SRC_MASK,
 P_UOP_WGT_LO, P_UOP_WGT_MASK, P_EB_UOP, P_EB_WGT, P_EB_INP, P_EB_ACC, P_EB_OUT, P_EB_ACC8, P_GEMM_MODE) = range(25)
N_FIELDS = 29
P_LAY = 25
# P_LATENCY .. P_ALU_PIPE hold the timing keys, one slot per row of vtasim.hw.timing.TIMING_KEYS (its ``slot``
# names P_<slot>), filled with TimingKey.engine_value by vtasim.sim.cycle.engine.
N_PARAMS = P_LAY + 8 * N_FIELDS * 3
# P_BUS_BYTES, P_BURST and P_FETCH_INSNS are powers of two (hw/timing.py; vtasim.sim.cycle.engine.params checks), so the
# event loop's bus-word and burst arithmetic is shifts and masks, not divisions.
# P_EB_<mem> are DRAM element bytes indexed by memory type (P_EB_UOP + memory_type).
# P_GEMM_MODE: how non-reset GEMMs run (reset GEMMs always take the integer kernel, kernels.gemm_kernel):
GEMM_INT, GEMM_AUTO, GEMM_SIMD, GEMM_BLAS, GEMM_VNNI = 0, 1, 2, 3, 4
# GEMM_INT the integer kernel for every GEMM; GEMM_AUTO vtasim.sim.cycle.gemm_simd's cost rule between its integer
# SIMD kernel and the grouped float32 products of vtasim.sim.cycle.gemm_fast; GEMM_SIMD / GEMM_VNNI / GEMM_BLAS always that one
# (GEMM_SIMD the pair kernel gemm_simd, GEMM_VNNI the byte-quad kernel gemm_vnni; AUTO and BLAS take gemm_vnni for
# their integer GEMMs when numba targets AVX-512 VNNI, vtasim.sim.cycle.simd.VNNI, else gemm_simd)
# (where it applies: the BLAS path needs its products to fit the scratch, the SIMD kernel a tile shape it has
# a vector step for; else the integer kernel).  AUTO and BLAS only where the widths prove float32 exact.
# P_LAY + (opcode * N_FIELDS + field) * 3 + (0, 1, 2) = (lsb, width, signed) of a field in an
# instruction of that opcode (width 0: the opcode has no such field, it reads as 0).

# ---- units: fetch plus the three modules (vtasim.hw.isa MODULE_* = unit - 1) ----
U_FETCH, U_LOAD, U_COMPUTE, U_STORE = 0, 1, 2, 3
N_UNITS = 4

# ---- memory clients, in priority order (docs/timing.md 4.2) ----
C_FETCH, C_UOP, C_INP, C_WGT, C_ACC, C_OUT = range(6)

# ---- per-unit state US[N_UNITS, N_US] ----
(US_XFER, US_CLIENT, US_REQ, US_GRANTED, US_BEATS, US_ROW, US_NROWS, US_ADDR0, US_STRIDE, US_NBYTES,
 US_W, US_W1, US_BUSY, US_PIDX, US_S, US_E, US_NSTART, US_NDISP, US_NTOTAL, US_QOFF) = range(20)
N_US = 20
# US_XFER: a DMA transfer is in progress; US_REQ: cycle its current burst request is issued (-1 none)
# US_BUSY/US_PIDX/US_S/US_E: the module's executing instruction (US_E = -1 while a DMA decides it)
# US_NSTART/US_NDISP/US_NTOTAL/US_QOFF: module queue (started, dispatched, total, offset in modq)

# ---- global state S ----
(S_T, S_STATUS, S_PORT_UNTIL, S_PORT_UNIT, S_CHUNK, S_FPHASE, S_FNEXT, S_FLASTD, S_FINISH_E,
 S_TOK0, S_TOK1, S_TOK2, S_TOK3, S_ERR_CODE, S_ERR_FIELD, S_ERR_VALUE, S_ERR_LIMIT, S_ERR_INSN,
 S_EVENTS, S_NRET, S_PAIRS_STALE) = range(21)
N_S = 21
# S_NRET: instructions retired so far (the next free slot of the retire-order array)
# S_PAIRS_STALE: 1 = WGT was loaded since the integer kernel's weight copy (kernels.pair_weights) was made
TOK_L2G, TOK_G2L, TOK_S2G, TOK_G2S = 0, 1, 2, 3
TOKEN_NAMES = TOKEN_QUEUES
FPHASE_XFER, FPHASE_DISPATCH, FPHASE_DONE = 0, 1, 2

# ---- run status ----
ST_RUNNING, ST_DONE, ST_ERROR, ST_DEADLOCK = 0, 1, 2, 3

# ---- error codes and the fields they name ----
ERR_SRAM_RANGE, ERR_DRAM_RANGE, ERR_UOP_RANGE, ERR_TOKEN_OVERFLOW, ERR_UNFINISHED, ERR_DECODE = 1, 2, 3, 4, 5, 6
FLD_NONE, FLD_SRAM_BASE, FLD_DRAM_BASE, FLD_DST_IDX, FLD_SRC_IDX, FLD_WGT_IDX, FLD_UOP_END, FLD_TOKEN = range(8)
FIELD_NAMES = ("-", "sram_base", "dram_base", "dst_idx", "src_idx", "wgt_idx", "uop_end", "token")

# ---- per-module accounting buckets BD[N_UNITS, 5] (docs/timing.md 8) ----
B_BUSY, B_MEM_WAIT, B_TOKEN_WAIT, B_QUEUE_STALL, B_IDLE = range(5)
BUCKET_NAMES = ("busy", "mem_wait", "token_wait", "queue_stall", "idle")
UNIT_NAMES = ("fetch", "load", "compute", "store")

# ---- counters CNT (order of vtasim.sim.result.COUNTER_NAMES) ----
CNT_INP, CNT_WGT, CNT_ACC, CNT_UOP, CNT_OUT, CNT_GEMM, CNT_ALU = range(7)


def timing_slot(key) -> int:
    """The index ``P_<key.slot>`` of a timing key (a :class:`vtasim.hw.timing.TimingKey`); a SimError names a
    row with no slot here."""
    slot = globals().get(f"P_{key.slot}")
    if not isinstance(slot, int):
        raise SimError(f"timing key {key.name}: the cycle engine has no parameter slot P_{key.slot} "
                       f"(sim/cycle/layout.py)")
    return slot
