"""Python side of the cycle engine: build the state arrays, run the compiled core in slices, report.

The core (:mod:`vtasim.sim.cycle.core`) is one compiled call per slice of events; slices are large (a
million loop iterations), so Python is touched a handful of times per run, only to print progress.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.hw.timing import TIMING_KEYS
from vtasim.hw.isa import INSN_FIELDS, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, SIGNED_FIELDS, layout
from vtasim.sim.cycle import core
from vtasim.sim.cycle.gemm_fast import float32_exact, scratch
from vtasim.sim.cycle.jitcache import compile_notice
from vtasim.sim.cycle.gemm_simd import HOST_VECTOR
from vtasim.sim.cycle.simd import aligned
from vtasim.sim.cycle.layout import timing_slot
from vtasim.sim.cycle.layout import (GEMM_AUTO, GEMM_BLAS, GEMM_INT, GEMM_SIMD, GEMM_VNNI, BUCKET_NAMES, ERR_TOKEN_OVERFLOW, ERR_UNFINISHED, FIELD_NAMES, N_FIELDS, N_PARAMS,
                              N_S, N_UNITS, N_US, P_BATCH, P_BLOCK,
                              P_BURST, P_BUS_BYTES, P_EB_UOP, P_FETCH_INSNS, P_GEMM_MODE, P_INSN_ADDR, P_INSN_COUNT,
                              P_LAY, P_UOP_DST_LO, P_UOP_DST_MASK, P_UOP_SRC_LO,
                              P_UOP_SRC_MASK, P_UOP_WGT_LO, P_UOP_WGT_MASK, S_ERR_CODE, S_ERR_FIELD,
                              S_ERR_INSN, S_ERR_LIMIT, S_ERR_VALUE, S_NRET, S_PAIRS_STALE, S_STATUS, S_T, S_TOK0, ST_DEADLOCK,
                              ST_DONE, ST_ERROR, TOKEN_NAMES, UNIT_NAMES, US_NTOTAL, US_QOFF)
from vtasim.sim.engines import Option
from vtasim.sim.errors import ProgramError, RunError, SimError, TokenOverflowError
from vtasim.sim.program import Program, load_program
from vtasim.sim.result import COUNTER_NAMES, RetireRecord, RunResult

SLICE_EVENTS = 1 << 20
GEMM_MODES = {"auto": GEMM_AUTO, "int": GEMM_INT, "simd": GEMM_SIMD, "blas": GEMM_BLAS, "vnni": GEMM_VNNI}
GEMM_PATHS = tuple(GEMM_MODES)
PROGRESS_AFTER_S = 2.0


def params(cfg: VTAConfig, insn_addr: int, insn_count: int, gemm: str = "auto") -> np.ndarray:
    """The core's parameter vector.  ``gemm`` (:data:`GEMM_MODES`, meanings at ``layout.P_GEMM_MODE``): "auto" =
    per GEMM the integer SIMD kernel or the float32 BLAS grouping by :func:`vtasim.sim.cycle.gemm_simd.blas_pays`,
    "int" = the integer kernel for every GEMM, "simd" / "vnni" / "blas" = always that path where it applies
    ("simd" the int16-pair kernel, "vnni" the byte-quad one, which "auto" and "blas" take for their integer
    GEMMs where numba targets AVX-512 VNNI; on other CPUs "vnni" runs the same arithmetic slower).  The BLAS
    grouping only where :func:`float32_exact` proves it exact for the config's widths ("auto" and "blas"
    become the integer vector kernel they would take, "vnni" or "simd", elsewhere)."""
    if gemm not in GEMM_PATHS:
        raise SimError(f"gemm = {gemm!r} is not one of {', '.join(GEMM_PATHS)}")
    P = _config_params(cfg, gemm).copy()
    P[P_INSN_ADDR] = insn_addr
    P[P_INSN_COUNT] = insn_count
    return P


@functools.lru_cache(maxsize=64)
def _config_params(cfg: VTAConfig, gemm: str) -> np.ndarray:
    """Everything in P that depends on the config only (built once per config: ~0.1 ms of Python)."""
    P = np.zeros(N_PARAMS, np.int64)
    mode = GEMM_MODES[gemm]
    if mode in (GEMM_AUTO, GEMM_BLAS) and not float32_exact(cfg.inp_width, cfg.wgt_width, cfg.block_in):
        mode = HOST_VECTOR
    P[P_GEMM_MODE] = mode
    for key in TIMING_KEYS:                              # hw/timing.py: every knob has its slot
        P[timing_slot(key)] = key.engine_value(getattr(cfg, key.name))
    for slot in (P_BUS_BYTES, P_BURST, P_FETCH_INSNS):      # the core shifts and masks by them
        value = int(P[slot])
        if value < 1 or value & (value - 1):
            raise SimError(f"timing parameter {value} of the cycle engine's slot {slot} is not a power of two")
    P[P_BATCH] = cfg.batch
    P[P_BLOCK] = cfg.block_in
    uop = layout(cfg).uop
    for lo_i, mask_i, name in ((P_UOP_DST_LO, P_UOP_DST_MASK, "dst_idx"), (P_UOP_SRC_LO, P_UOP_SRC_MASK, "src_idx"),
                               (P_UOP_WGT_LO, P_UOP_WGT_MASK, "wgt_idx")):
        lo, width = uop[name]
        P[lo_i], P[mask_i] = lo, (1 << width) - 1
    for mt in (MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_OUT, MEM_ACC_8BIT):
        P[P_EB_UOP + mt] = cfg.dram_elem_bytes(mt)
    lay = layout(cfg)
    for fmt in (lay.mem, lay.gemm, lay.alu, lay.finish):   # the core reads these bits straight from the word
        assert [fmt[name] for name in ("opcode", "pop_prev", "pop_next", "push_prev", "push_next")] == \
            [(0, 3), (3, 1), (4, 1), (5, 1), (6, 1)], fmt
    for op in range(8):
        fmt = {OP_LOAD: lay.mem, OP_STORE: lay.mem, OP_GEMM: lay.gemm, OP_ALU: lay.alu,
               OP_FINISH: lay.finish}.get(op, {"opcode": lay.mem["opcode"]})
        for k, name in enumerate(INSN_FIELDS):
            if name in fmt:
                lo, width = fmt[name]
                assert lo // 64 == (lo + width - 1) // 64, name      # a field never straddles the halves
                P[P_LAY + (op * N_FIELDS + k) * 3:P_LAY + (op * N_FIELDS + k) * 3 + 3] = \
                    (lo, width, int(name in SIGNED_FIELDS))
    P.flags.writeable = False
    return P


MEMORY_NAMES = ("uop32", "inp2", "inp16", "wgt2", "wgt_pairs", "wgt_quads", "xc", "acc2", "xf", "wt", "wready", "ab",
                "pb")


def new_memories(cfg: VTAConfig) -> dict:
    """The SRAMs (zero, as at reset) and the GEMM fast path's arrays (:func:`vtasim.sim.cycle.gemm_fast.scratch`)
    of one machine, by :data:`MEMORY_NAMES`.  ``wgt_pairs`` is the integer kernel's copy of WGT
    (:func:`vtasim.sim.cycle.kernels.pair_weights`), ``inp16`` / ``wgt_quads`` / ``xc`` the copies of the integer
    vector kernels (:mod:`vtasim.sim.cycle.gemm_simd`).  The arrays the vector steps read start on a cache line
    (:func:`vtasim.sim.cycle.simd.aligned`)."""
    wgt = (cfg.wgt_depth, cfg.wgt_elem_bytes)
    inp = (cfg.inp_depth, cfg.inp_elem_bytes)
    mem = dict(zip(MEMORY_NAMES, (np.zeros(cfg.uop_depth, np.uint32), aligned(inp, np.int8), aligned(inp, np.int16),
                                  aligned(wgt, np.int8), aligned(wgt, np.int8), aligned(wgt, np.uint8),
                                  aligned((cfg.inp_depth, cfg.batch), np.int32),
                                  aligned((cfg.acc_depth, cfg.batch * cfg.block_out), np.int32)) + scratch(cfg)))
    # flat byte views of the SRAMs for the DMA kernels, made once per set (not per core call)
    mem["bytes"] = (mem["uop32"].view(np.uint8), mem["inp2"].view(np.uint8).reshape(-1),
                    mem["wgt2"].view(np.uint8).reshape(-1), mem["acc2"].view(np.uint8).reshape(-1))
    return mem


class _MemoryPool:
    """Machine memories kept between ``run_image`` calls (at most ``keep`` sets, the most recent configs).

    A fresh set is a few MiB of new pages, and the page faults of touching them cost a small layer's run
    more than clearing a used set: a set taken from the pool is cleared to what a new one holds where it
    matters (the SRAMs, the float input copy, no weight copy current; ``wt``, ``ab`` and ``pb`` are written
    before they are read).  One set serves one run at a time."""

    CLEAR = ("uop32", "inp2", "inp16", "xc", "wgt2", "acc2", "xf", "wready")

    def __init__(self, keep: int = 4):
        self._keep, self._free, self._lock = keep, [], threading.Lock()

    def take(self, cfg: VTAConfig) -> dict:
        with self._lock:
            k = next((i for i, (c, _) in enumerate(self._free) if c == cfg), None)
            mem = None if k is None else self._free.pop(k)[1]
        if mem is None:
            return new_memories(cfg)
        for name in self.CLEAR:
            mem[name].fill(0)
        return mem

    def give(self, cfg: VTAConfig, mem: dict) -> None:
        with self._lock:
            self._free.append((cfg, mem))
            del self._free[:-self._keep]


memory_pool = _MemoryPool()


class LazyRows(Sequence):
    """A read-only sequence whose item k is ``make(k)``, built when read (a run's records are not kept as
    Python objects).  Equal to any sequence with equal items; ``list(...)`` gives a plain list."""

    def __init__(self, n: int, make, make_block=None):
        self._n, self._make = n, make
        self._block = make_block or (lambda k0, k1: [make(k) for k in range(k0, k1)])

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self._make(i) for i in range(*k.indices(self._n))]
        if k < 0:
            k += self._n
        if not 0 <= k < self._n:
            raise IndexError(f"index {k} out of range for {self._n} rows")
        return self._make(k)

    def __iter__(self):
        for k0 in range(0, self._n, 4096):
            yield from self._block(k0, min(self._n, k0 + 4096))

    def __eq__(self, other):
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self._n and all(a == b for a, b in zip(self, other))

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self) -> str:
        return f"LazyRows({self._n} rows)"


_program_cache = weakref.WeakKeyDictionary()      # Program -> _program_arrays (cached_program reuses Programs)
_program_lock = threading.Lock()


def _program_arrays(prog: Program) -> tuple:
    """What the core reads of a program and never writes, made once per Program: the read-only words
    ``F`` (``uint64[n, 2]``, usually the image's own bytes), the module of each instruction (int8), the three
    module queues back to back (int32 program indices) and each queue's offset and length."""
    with _program_lock:
        hit = _program_cache.get(prog)
    if hit is not None:
        return hit
    n = prog.count
    F = prog.words
    if not (F.flags.c_contiguous and F.flags.aligned) or F.dtype != np.uint64:
        F = np.ascontiguousarray(F, dtype=np.uint64)
    if F.flags.writeable:                 # one compiled signature: the core takes read-only words
        F = F.view()
        F.flags.writeable = False
    modq = np.empty(n, np.int32)
    qoff, qtotal = np.zeros(3, np.int64), np.zeros(3, np.int64)
    off = 0
    for m in range(3):                    # block by block: no int64 index array of the stream
        qoff[m] = off
        for c in range(0, n, 1 << 16):
            q = np.flatnonzero(prog.module[c:c + (1 << 16)] == m) + c
            modq[off:off + len(q)] = q
            off += len(q)
        qtotal[m] = off - qoff[m]
    hit = (F, np.ascontiguousarray(prog.module, dtype=np.int8), modq, qoff, qtotal)
    with _program_lock:
        _program_cache[prog] = hit
    return hit


class CycleMachine:
    """All arrays of one run.  ``run()`` drives the core to completion; results are read off it.

    Per instruction it keeps about 37 bytes next to the 16 of the instruction itself: the words are
    read by the core in place (``F`` is the program's read-only ``uint64[n, 2]``, usually the image's
    own bytes), then dispatch/start/end cycles (int64), the digest (uint32), the module queues and the
    retire order (int32)."""

    def __init__(self, prog: Program, dram: np.ndarray, insn_addr: int, gemm: str = "auto", memories=None):
        cfg = self.cfg = prog.cfg
        self.prog = prog
        n = prog.count
        self.F, self.module, self.modq, qoff, qtotal = _program_arrays(prog)
        self.P = params(cfg, insn_addr, n, gemm)
        self.S = np.zeros(N_S, np.int64)
        self.S[S_PAIRS_STALE] = 1             # the integer kernel's weight copy is not made yet (memories are reused)
        self.US = np.zeros((N_UNITS, N_US), np.int64)
        self.US[1:, US_QOFF] = qoff
        self.US[1:, US_NTOTAL] = qtotal
        self.disp = np.full(n, -1, np.int64)
        self.s_cyc = np.full(n, -1, np.int64)
        self.e_cyc = np.full(n, -1, np.int64)
        self.dig = np.zeros(n, np.uint32)
        self.ret = np.zeros(n, np.int32)      # program indices in retire order (docs/timing.md 9)
        nchunks = -(-n // cfg.FETCH_INSNS)
        self.chunk_req = np.full(nchunks, -1, np.int64)
        self.chunk_done = np.full(nchunks, -1, np.int64)
        self.BD = np.zeros((N_UNITS, len(BUCKET_NAMES)), np.int64)
        self.CNT = np.zeros(len(COUNTER_NAMES), np.int64)
        self.dram = dram
        mem = new_memories(cfg) if memories is None else memories
        (self.uop32, self.inp2, self.inp16, self.wgt2, self.wgt_pairs, self.wgt_quads, self.xc, self.acc2,
         self.xf, self.wt, self.wready, self.ab, self.pb) = (mem[name] for name in MEMORY_NAMES)
        self.uop_b, self.inp_b, self.wgt_b, self.acc_b = mem["bytes"]
        core.init_state(self.S, self.US, self.P, self.chunk_req)

    def step(self, events: int | None = None) -> int:
        """Run one slice of at most ``events`` loop iterations; returns the status (0 = running)."""
        core.run_slice(self.S, self.US, self.F, self.P, self.module, self.modq, self.disp, self.s_cyc,
                       self.e_cyc, self.dig, self.ret, self.chunk_req, self.chunk_done, self.BD, self.CNT, self.dram,
                       self.uop32, self.uop_b, self.inp_b, self.inp2, self.inp16, self.wgt_b, self.wgt2, self.wgt_pairs, self.wgt_quads, self.xc,
                       self.acc_b, self.acc2, self.xf, self.wt, self.wready, self.ab, self.pb,
                       SLICE_EVENTS if events is None else events)
        return int(self.S[S_STATUS])

    def replay(self, order: np.ndarray, kinds: np.ndarray) -> int:
        """Apply the data effects of instructions ``order`` (opcodes with ``kinds[opcode] != 0``) through the
        run's kernels with no event loop (:func:`vtasim.sim.cycle.core.replay_data`); the data work of a run."""
        return int(core.replay_data(np.ascontiguousarray(order, np.int64), np.ascontiguousarray(kinds, np.int64),
                                    self.S, self.US, self.F, self.P, self.module, self.CNT, self.dram, self.uop32,
                                    self.uop_b, self.inp_b, self.inp2, self.inp16, self.wgt_b, self.wgt2, self.wgt_pairs, self.wgt_quads, self.xc,
                                    self.acc_b, self.acc2, self.xf, self.wt, self.wready,
                                    self.ab, self.pb))

    def run(self, progress=None) -> None:
        """Run to the end; raise the :mod:`vtasim.sim.errors` exception the run ended with, if any."""
        t0 = time.perf_counter()
        shown = False
        while self.step() == 0:
            if progress is not False and time.perf_counter() - t0 > PROGRESS_AFTER_S:
                if progress or sys.stderr.isatty():
                    done = int(self.S[S_NRET])
                    sys.stderr.write(f"\r[vtasim cycle] cycle {int(self.S[S_T]):,}  "
                                     f"retired {done:,}/{self.prog.count:,}  ")
                    sys.stderr.flush()
                    shown = True
        if shown:
            sys.stderr.write("\n")
        status = int(self.S[S_STATUS])
        if status == ST_ERROR:
            raise self.error()
        if status == ST_DEADLOCK:
            from vtasim.sim.cycle.report import deadlock_error
            raise deadlock_error(self)
        assert status == ST_DONE

    def error(self):
        from vtasim.hw.disasm import one_line
        code, j = int(self.S[S_ERR_CODE]), int(self.S[S_ERR_INSN])
        field, value, limit = FIELD_NAMES[int(self.S[S_ERR_FIELD])], int(self.S[S_ERR_VALUE]), int(self.S[S_ERR_LIMIT])
        text = f"`{one_line(self.prog.insn(j))}`"
        if code == ERR_TOKEN_OVERFLOW:
            name = TOKEN_NAMES[value]
            return TokenOverflowError(f"instruction {j} {text}: push to token queue {name} would exceed "
                                      f"TOKEN_QUEUE_DEPTH = {limit} at cycle {int(self.S[S_T])} (its consumer "
                                      f"is {limit} tokens behind)", j, name)
        if code == ERR_UNFINISHED:
            return RunError(f"FINISH ended at cycle {limit} while {UNIT_NAMES[value]} instruction {j} {text} had "
                            f"not ended (a FINISH must wait for every other instruction: give it pops)")
        return ProgramError(f"instruction {j} {text}: {field} = {value} is out of range (limit {limit})", j, field)

    # ---- results ---------------------------------------------------------------------------------
    @property
    def cycles(self) -> int:
        return int(self.S[S_T]) + 1

    def records(self) -> "LazyRows":
        """Retire records in docs/timing.md 9 order (end cycle, then load < compute < store: the order
        the core retires in), each made when it is read."""
        order = self.ret[:int(self.S[S_NRET])]
        # a module's queue lists its instructions in program order: index in module by binary search
        queues = [self.modq[int(self.US[m + 1, US_QOFF]):int(self.US[m + 1, US_QOFF] + self.US[m + 1, US_NTOTAL])]
                  for m in range(3)]
        names, module, words = ("load", "compute", "store"), self.prog.module, self.F
        s_cyc, e_cyc, dig = self.s_cyc, self.e_cyc, self.dig

        def block(k0, k1):
            j = order[k0:k1]
            m = module[j]
            pos = np.zeros(len(j), np.int64)
            for mm in range(3):
                sel = m == mm
                pos[sel] = np.searchsorted(queues[mm], j[sel])
            op = (words[j, 0] & np.uint64(7)).astype(np.int64)
            return [RetireRecord(names[a], b, c, d, e, f, g) for a, b, c, d, e, f, g in
                    zip(m.tolist(), pos.tolist(), j.tolist(), op.tolist(), s_cyc[j].tolist(), e_cyc[j].tolist(),
                        dig[j].tolist())]
        return LazyRows(len(order), lambda k: block(k, k + 1)[0], block)

    def breakdown(self) -> dict:
        return {name: dict(zip(BUCKET_NAMES, row)) for name, row in zip(UNIT_NAMES, self.BD.tolist())}

    def tokens(self) -> dict:
        return dict(zip(TOKEN_NAMES, self.S[S_TOK0:S_TOK0 + len(TOKEN_NAMES)].tolist()))

    def counters(self) -> dict:
        return dict(zip(COUNTER_NAMES, self.CNT.tolist()))


_warmed = []


def warm_up(cfg: VTAConfig | None = None) -> None:
    """Compile (or load from cache) the core once per process, so ``wall_s`` excludes the JIT.

    The compiled types do not depend on the config; ``cfg`` only avoids reading the default file."""
    if _warmed:
        return
    from vtasim.sim.builder import ProgramBuilder
    if cfg is None:
        from vtasim.hw.config import load_config
        cfg = load_config()
    b = ProgramBuilder(cfg)
    b.finish()
    img = b.build()
    with compile_notice():              # one stderr note when numba's on-disk cache misses
        m = CycleMachine(load_program(img), img.dram(), img.insn_addr)
        m.run(progress=False)
    _warmed.append(True)


_programs: "OrderedDict[tuple, Program]" = OrderedDict()     # what a program was checked for -> Program
_PROGRAMS_KEPT = 256                # compiled layers of a few networks
_programs_lock = threading.Lock()


def cached_program(image) -> Program:
    """:func:`vtasim.sim.program.load_program` of ``image``, reused for every image of the same config, DRAM size
    and instruction bytes (the bytes are hashed on every call: a few microseconds for a layer, where
    decoding and checking again costs ~0.4 ms).  Keyed by content, not by image object, so a compiled
    layer whose images differ only in their input segment (one new image per input) decodes once."""
    key = (image.cfg, image.dram_size, image.insn_addr, hashlib.blake2b(image.insn_bytes(), digest_size=16).digest())
    with _programs_lock:
        prog = _programs.get(key)
        if prog is not None:
            _programs.move_to_end(key)
            return prog
    prog = load_program(image)
    with _programs_lock:
        _programs[key] = prog
        while len(_programs) > _PROGRAMS_KEPT:
            _programs.popitem(last=False)
    return prog


# The engine contract (vtasim.sim.engines); trace / perfetto files are written by vtasim.sim.engines.run_engine.
TIMED = True
OPTIONS = (
    Option("progress", (bool,), "a progress line on stderr: None = for runs over 2 s on a terminal, "
                                "True = also when stderr is not one, False = never"),
    Option("gemm", (str,), "GEMM data path (same bytes, records and cycles)", GEMM_PATHS),
)
BATCH_OPTIONS = OPTIONS + (Option("workers", (int,), "images run at a time in threads (None = the CPUs)"),)


def run_image(image, progress=None, gemm="auto") -> RunResult:
    """Run one image (:mod:`vtasim.sim.cycle` says what the result holds)."""
    warm_up(image.cfg)
    prog = cached_program(image)
    t0, c0 = time.perf_counter(), time.process_time()
    mem = memory_pool.take(image.cfg)
    try:
        m = CycleMachine(prog, image.dram(), image.insn_addr, gemm, mem)
        m.run(progress)
    finally:
        memory_pool.give(image.cfg, mem)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return RunResult(engine="cycle", dram=m.dram, counters=m.counters(),
                     outputs=image.outputs_from(m.dram),
                     leftover_tokens={k: v for k, v in m.tokens().items() if v},
                     cycles=m.cycles, trace=m.records(), breakdown=m.breakdown(), wall_s=wall, cpu_s=cpu,
                     dispatch_cycle=m.disp,
                     fetch_chunks=LazyRows(len(m.chunk_req), lambda k: (int(m.chunk_req[k]), int(m.chunk_done[k]))))


def run_in_order(prog: Program, dram: np.ndarray, order, gemm: str = "auto") -> dict | None:
    """The data effects of ``prog``'s instructions ``order`` (program indices), each applied whole in that
    order through this engine's kernels with no timing (:meth:`CycleMachine.replay`), on ``dram`` in place:
    the functional engine's compiled executor.  Returns the counters (:data:`vtasim.sim.result.COUNTER_NAMES`), or
    None when an instruction's indices are out of range (the caller reports the error its own way)."""
    warm_up(prog.cfg)
    mem = memory_pool.take(prog.cfg)
    try:
        m = CycleMachine(prog, dram, 0, gemm, mem)
        m.replay(np.asarray(order, np.int64), _ALL_OPCODES)
    finally:
        memory_pool.give(prog.cfg, mem)
    if int(m.S[S_STATUS]) == ST_ERROR:
        return None
    return m.counters()


_ALL_OPCODES = np.ones(8, np.int64)


def run_images(images, workers: int | None = None, progress=None, gemm="auto") -> list:
    """:func:`run_image` of each image (same options), ``workers`` runs at a time in threads; the results
    in the order of ``images``.  The compiled core releases the GIL, so on a machine with two cores two
    images run side by side (Python setup and result building still take turns).  ``workers``: None =
    the number of CPUs, at most the number of images; 1 = one after the other in this thread.  The first
    run that raises (in image order) raises here."""
    images = list(images)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SimError(f"workers = {workers!r} must be a positive integer")
    n = min(len(images), workers or os.cpu_count() or 1)
    if n <= 1:
        return [run_image(img, progress, gemm) for img in images]
    for img in images:
        warm_up(img.cfg)                      # compile (or load) once, before any thread needs the core
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(run_image, img, progress, gemm) for img in images]
        return [f.result() for f in futures]
