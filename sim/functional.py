"""Functional model: fsim semantics (hardware spec 3.1-3.6), one instruction at a time, in numpy.

This is the data oracle of vtasim: the cycle engine and the RTL must leave byte-identical DRAM.
It is deliberately plain - each instruction is executed atomically and vectorised over its whole
loop nest - so that it is obviously correct and still quick (a ResNet-18 C2 stream of ~450k GEMM
uops runs in seconds).  Memory is bounded by the SRAMs and DRAM, never by the loop nest: a nest is
walked in chunks of index arrays, loops that move no index are counted instead of walked (GEMM sums
and immediate ALU powers commute with repetition), rows are counted by convolution, and an ALU nest
whose uops read rows earlier uops wrote runs uop by uop in a small compiled loop of its own
(:func:`_alu_sequential`, independent of the cycle engine's kernels).

Rules for the cases fsim leaves undefined (README "Semantics and timing", identical in every engine):

* ALU operations are the rows of :mod:`vtasim.hw.alu` (their numpy rules, and the closed forms of repeated
  immediates).  SHR by a signed 32-bit amount y: ``0 <= y < 32`` arithmetic right shift; ``y >= 32``
  gives ``x >> 31``; ``-32 < y < 0`` left shift by ``-y`` keeping the low 32 bits; ``y <= -32`` gives 0.
  MUL keeps the low 32 bits; ADD wraps; MIN/MAX are signed.
* ``iter_out == 0``, ``iter_in == 0`` or an empty uop range: no-op, counters add 0.
* A GEMM/ALU index (uop index + loop offsets) at or beyond its buffer depth: ProgramError naming
  the instruction, the index (dst/src/wgt), its value and the depth.  Nothing wraps.
* STORE narrows each int32 lane to int8 by truncation (two's complement wrap).
* Leftover tokens at the end are not an error; they are reported in ``RunResult.leftover_tokens``.
* FINISH with another instruction not yet executed: RunError.

Scheduler (deterministic, unlike fsim's random one): scan load, compute, store in that order; each
module runs its head instruction while the tokens it pops are available and the queues it pushes
are below ``TOKEN_QUEUE_DEPTH``; stop after FINISH.  A full scan without progress before FINISH is
either a token overflow - some head's push would take a queue above ``TOKEN_QUEUE_DEPTH`` and no
order of execution lets the consumer pop first: :class:`~vtasim.sim.errors.TokenOverflowError`
(docs/timing.md section 5) - or a deadlock (:class:`~vtasim.sim.errors.DeadlockError` naming each blocked
module's head and the token it needs).  So the functional model never reports an overflow that a
different (timing-dependent) interleaving would avoid.
"""

from __future__ import annotations

import time
import weakref

import numpy as np
from numba import njit

from vtasim.sim.cycle import jitcache  # noqa: F401  (the cache stamp of _alu_sequential covers hw/alu.py)

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT
from vtasim.hw.alu import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR, by_opcode
from vtasim.hw.isa import (MODULE_COMPUTE, MODULE_LOAD, MODULE_NAMES,
                    MODULE_STORE, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, TOKEN_POPS, TOKEN_PUSHES,
                    TOKEN_QUEUES, decode_uops)
from vtasim.sim.engines import Option
from vtasim.sim.errors import DeadlockError, ProgramError, RunError, SimError, TokenOverflowError
from vtasim.sim.program import Program, load_program
from vtasim.sim.result import COUNTER_NAMES, RunResult

__all__ = ["run_image", "run_program", "schedule", "warm_up", "EXECUTORS", "FunctionalMachine", "alu_apply", "alu_imm_repeated", "TOKEN_QUEUES"]

_CHUNK = 1 << 14          # uops per vectorised loop-nest step: bounds temporary memory to ~40 MB


def alu_apply(op: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One ALU operation on int32 lanes: the vector rule of ``op``'s row in :mod:`vtasim.hw.alu`; returns int32."""
    return by_opcode(op).apply(x, y)


def alu_imm_repeated(op: int, x: np.ndarray, imm: int, k: int) -> np.ndarray:
    """``alu_apply(op, ., imm)`` applied ``k >= 1`` times, in one step by the row's closed form."""
    return by_opcode(op).apply_imm_repeated(x, imm, k)


@njit(cache=True)
def _alu_sequential(acc, op, dst, src, iter_out, iter_in, dfo, dfi, sfo, sfi):
    """``acc[d] = op(acc[d], acc[s])`` for every uop of the nest in fsim's order (i_out, i_in, uop), on
    int64 lanes with the rules of this module's docstring; written for the oracle, not shared."""
    lanes = acc.shape[1]
    for io in range(iter_out):
        for ii in range(iter_in):
            for u in range(dst.size):
                d = dst[u] + io * dfo + ii * dfi
                s = src[u] + io * sfo + ii * sfi
                for ln in range(lanes):
                    x = np.int64(acc[d, ln])
                    y = np.int64(acc[s, ln])
                    # one branch per row of vtasim.hw.alu (test_alu_conformance checks that each has one)
                    if op == ALU_ADD:
                        r = x + y
                    elif op == ALU_MUL:
                        r = x * y
                    elif op == ALU_MIN:
                        r = min(x, y)
                    elif op == ALU_MAX:
                        r = max(x, y)
                    elif op == ALU_SHR:
                        if y >= 32:
                            r = x >> 31
                        elif y >= 0:
                            r = x >> y
                        elif y > -32:
                            r = x << (-y)
                        else:
                            r = 0
                    else:
                        raise ValueError("ALU opcode outside vtasim.hw.alu (vtasim.sim.program rejects it at decode)")
                    r &= 0xFFFFFFFF
                    acc[d, ln] = r - (1 << 32) if r >= (1 << 31) else r


class FunctionalMachine:
    """SRAMs + DRAM + token queues + counters; :meth:`execute` runs one checked instruction."""

    def __init__(self, program: Program, dram: np.ndarray):
        cfg = self.cfg = program.cfg
        self.program = program
        self.dram = dram
        # SRAMs as bytes (depth, element bytes); typed views for compute.  Little-endian lanes.
        self.sram = {MEM_UOP: np.zeros((cfg.uop_depth, cfg.uop_elem_bytes), np.uint8),
                     MEM_INP: np.zeros((cfg.inp_depth, cfg.inp_elem_bytes), np.uint8),
                     MEM_WGT: np.zeros((cfg.wgt_depth, cfg.wgt_elem_bytes), np.uint8),
                     MEM_ACC: np.zeros((cfg.acc_depth, cfg.acc_elem_bytes), np.uint8)}
        self.uop = self.sram[MEM_UOP].view("<u4").reshape(cfg.uop_depth)
        self.inp = self.sram[MEM_INP].view(np.int8).reshape(cfg.inp_depth, cfg.batch, cfg.block_in)
        self.wgt = self.sram[MEM_WGT].view(np.int8).reshape(cfg.wgt_depth, cfg.block_out, cfg.block_in)
        self.acc = self.sram[MEM_ACC].view("<i4").reshape(cfg.acc_depth, cfg.batch * cfg.block_out)
        self.tokens = dict.fromkeys(TOKEN_QUEUES, 0)
        self.counters = dict.fromkeys(COUNTER_NAMES, 0)
        self.order: list[int] = []        # program indices in execution order (a line trace)

    # ---- memory instructions ---------------------------------------------------------------------
    def _dram_rows(self, base, y, x, stride, ebytes) -> np.ndarray:
        """Byte indices (y, x*ebytes) of a 2-D DRAM access; the static check keeps them in range."""
        rows = (base + np.arange(y, dtype=np.int64) * stride) * ebytes
        return rows[:, None] + np.arange(x * ebytes, dtype=np.int64)[None, :]

    def load(self, f: dict) -> None:
        x, y, mt = f["x_size"], f["y_size"], f["memory_type"]
        if x == 0:
            return
        cfg = self.cfg
        xt = f["x_pad_0"] + x + f["x_pad_1"]
        yt = f["y_pad_0"] + y + f["y_pad_1"]
        target = MEM_ACC if mt == MEM_ACC_8BIT else mt
        ebytes = cfg.sram_elem_bytes(target)
        block = np.zeros((yt, xt, ebytes), np.uint8)
        if y:
            debytes = cfg.dram_elem_bytes(mt)
            raw = self.dram[self._dram_rows(f["dram_base"], y, x, f["x_stride"], debytes)].reshape(y, x, debytes)
            if mt == MEM_ACC_8BIT:
                raw = raw.view(np.int8).astype("<i4").view(np.uint8).reshape(y, x, ebytes)
            block[f["y_pad_0"]:f["y_pad_0"] + y, f["x_pad_0"]:f["x_pad_0"] + x] = raw
        sb = f["sram_base"]
        self.sram[target][sb:sb + xt * yt] = block.reshape(xt * yt, ebytes)
        name = {MEM_UOP: "uop", MEM_INP: "inp", MEM_WGT: "wgt", MEM_ACC: "acc"}[target]
        self.counters[f"{name}_load_nbytes"] += x * y * ebytes

    def store(self, f: dict) -> None:
        x, y = f["x_size"], f["y_size"]
        if x == 0:
            return
        cfg = self.cfg
        sb = f["sram_base"]
        out = self.acc[sb:sb + x * y].astype(np.int8).view(np.uint8)     # truncation to int8
        ebytes = cfg.out_elem_bytes
        if y > 1 and f["x_stride"] < x:
            # overlapping rows: later rows win, as in fsim's row loop
            for r in range(y):
                start = (f["dram_base"] + r * f["x_stride"]) * ebytes
                self.dram[start:start + x * ebytes] = out[r * x:(r + 1) * x].reshape(-1)
        else:
            idx = self._dram_rows(f["dram_base"], y, x, f["x_stride"], ebytes)
            self.dram[idx] = out.reshape(y, x * ebytes)
        self.counters["out_store_nbytes"] += x * y * ebytes

    # ---- GEMM / ALU --------------------------------------------------------------------------------
    def uop_indices(self, f: dict, index: int, names):
        """Flattened (iter_out, iter_in, uop) index arrays for each name in ``names``, range-checked."""
        d, s, w = decode_uops(self.cfg, self.uop[f["uop_bgn"]:f["uop_end"]])
        base = {"dst": d, "src": s, "wgt": w}
        io = np.arange(f["iter_out"], dtype=np.int64)[:, None, None]
        ii = np.arange(f["iter_in"], dtype=np.int64)[None, :, None]
        depth = {"dst": self.cfg.acc_depth,
                 "src": self.cfg.inp_depth if f["opcode"] == OP_GEMM else self.cfg.acc_depth,
                 "wgt": self.cfg.wgt_depth}
        for name in names:          # every check before any loop-sized array is allocated
            self._check_range(f, index, name, base[name], depth[name])
        return [(base[name][None, None, :] + io * f[f"{name}_factor_out"] + ii * f[f"{name}_factor_in"]).reshape(-1)
                for name in names]

    @staticmethod
    def _check_range(f: dict, index: int, name: str, base: np.ndarray, depth: int) -> None:
        """ProgramError for the first (in execution order) index of ``name`` at or beyond ``depth``.

        Factors are unsigned, so an index grows with i_out and with i_in: the first bad i_out is the
        first whose last i_in reaches ``depth`` with the largest uop, and so on inward."""
        if not base.size or not f["iter_out"] or not f["iter_in"]:
            return
        fo, fi, top = f[f"{name}_factor_out"], f[f"{name}_factor_in"], int(base.max())
        last_in = (f["iter_in"] - 1) * fi
        if top + (f["iter_out"] - 1) * fo + last_in < depth:
            return
        i_out = 0 if top + last_in >= depth else -(-(depth - top - last_in) // fo)
        off = i_out * fo
        i_in = 0 if top + off >= depth else -(-(depth - top - off) // fi)
        off += i_in * fi
        u = int(np.argmax(base + off >= depth))
        kind = "GEMM" if f["opcode"] == OP_GEMM else "ALU"
        raise ProgramError(f"instruction {index}: {kind} {name} index {int(base[u]) + off} (uop {f['uop_bgn'] + u}, "
                           f"i_out {i_out}, i_in {i_in}) is beyond the buffer depth {depth}", index, f"{name}_idx")

    # A loop nest is walked in bounded memory: index arrays are built for at most _CHUNK uops at a
    # time, loops whose factors are all 0 are not walked at all (they repeat the same uops), and the
    # rows a nest writes are counted with convolutions of per-loop histograms (no index arrays).
    def _nest(self, f: dict, names):
        """``(mult, loops)``: the (count, {name: factor}) loops of the nest, outer first, that move some
        index of ``names``; ``mult`` is the product of the counts of the loops that move none."""
        mult, loops = 1, []
        for level in ("out", "in"):
            n = f[f"iter_{level}"]
            fac = {name: f[f"{name}_factor_{level}"] for name in names}
            if any(fac.values()):
                loops.append((n, fac))
            else:
                mult *= n
        return mult, loops

    def _chunks(self, base: dict, loops):
        """Index arrays ``{name: int64[k]}`` of the walked nest (uop innermost), ``_CHUNK`` uops at a time."""
        nu = len(next(iter(base.values())))
        counts = [n for n, _ in loops]
        total = nu * int(np.prod(counts, dtype=np.int64))
        for c in range(0, total, _CHUNK):
            k = np.arange(c, min(total, c + _CHUNK), dtype=np.int64)
            u, rest = k % nu, k // nu
            off = {name: np.zeros(len(k), np.int64) for name in base}
            for n, fac in reversed(loops):            # innermost loop first
                it, rest = rest % n, rest // n
                for name in base:
                    off[name] += it * fac[name]
            yield {name: base[name][u] + off[name] for name in base}

    def _row_counts(self, f: dict, dst: np.ndarray) -> np.ndarray:
        """How many times the nest visits each accumulator row (int64[acc_depth]), by convolving the
        histogram of the uops' dst with each loop's offsets; the range check has kept all below depth."""
        depth = self.cfg.acc_depth
        h = np.bincount(dst, minlength=1).astype(np.int64)
        for level in ("out", "in"):
            n, fac = f[f"iter_{level}"], f[f"dst_factor_{level}"]
            if fac == 0:
                h = h * n
            else:
                g = np.zeros((n - 1) * fac + 1, np.int64)
                g[::fac] = 1
                h = np.convolve(h, g)
        out = np.zeros(depth, np.int64)
        out[:min(depth, h.size)] = h[:depth]
        return out

    def _loop_uops(self, f: dict, index: int, names):
        """Range-checked uop fields ``{name: int64[nu]}`` of a GEMM/ALU (every check before any work)."""
        d, s, w = decode_uops(self.cfg, self.uop[f["uop_bgn"]:f["uop_end"]])
        base = {"dst": d, "src": s, "wgt": w}
        depth = {"dst": self.cfg.acc_depth,
                 "src": self.cfg.inp_depth if f["opcode"] == OP_GEMM else self.cfg.acc_depth,
                 "wgt": self.cfg.wgt_depth}
        for name in names:
            self._check_range(f, index, name, base[name], depth[name])
        return {name: base[name] for name in names}

    def gemm(self, f: dict, index: int) -> None:
        n = f["iter_out"] * f["iter_in"] * max(0, f["uop_end"] - f["uop_bgn"])
        if n == 0:
            return
        cfg = self.cfg
        if f["reset_reg"]:
            base = self._loop_uops(f, index, ("dst",))
            self.acc[self._row_counts(f, base["dst"]) > 0] = 0
            return
        base = self._loop_uops(f, index, ("dst", "src", "wgt"))
        self.counters["gemm_counter"] += n
        # acc[dst] += inp[src] . wgt[wgt]^T summed over the nest.  Addition mod 2^32 commutes, so the
        # sum is taken per row in any order, and a loop that moves no index multiplies it by its count.
        # Each uop's tile is exact in int32 (|sum of BLOCK_IN int8 products| <= BLOCK_IN * 2^14); numpy's
        # integer matmul also keeps BLAS (and its spinning threads) out of a process that times the
        # cycle engine next.  A chunk's per-row sums are exact in float64 (< 2^53); the running sum is
        # kept mod 2^32.
        mult, loops = self._nest(f, ("dst", "src", "wgt"))
        lanes = cfg.batch * cfg.block_out
        delta = np.zeros(cfg.acc_depth * lanes, np.int64)
        lane = np.arange(lanes, dtype=np.int64)
        for idx in self._chunks(base, loops):
            a = self.inp[idx["src"]].astype(np.int32)                    # (k, batch, block_in)
            b = self.wgt[idx["wgt"]].astype(np.int32).transpose(0, 2, 1)  # (k, block_in, block_out)
            prod = np.matmul(a, b).reshape(len(a), lanes)
            bins = (idx["dst"][:, None] * lanes + lane[None, :]).reshape(-1)
            delta += np.bincount(bins, weights=prod.reshape(-1), minlength=delta.size).astype(np.int64)
            delta &= 0xFFFFFFFF
        add = (delta.astype(np.uint64) * np.uint64(mult & 0xFFFFFFFF)) & np.uint64(0xFFFFFFFF)
        acc = self.acc.reshape(-1)
        acc[:] = ((acc.view(np.uint32).astype(np.uint64) + add) & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)

    def alu(self, f: dict, index: int) -> None:
        n = f["iter_out"] * f["iter_in"] * max(0, f["uop_end"] - f["uop_bgn"])
        if n == 0:
            return
        self.counters["alu_counter"] += n
        op, acc = f["alu_opcode"], self.acc
        # src is range-checked even with an immediate, as fsim computes (and checks) it for every uop
        base = self._loop_uops(f, index, ("dst", "src"))
        if f["use_imm"]:
            # A row the loop visits k times gets the same function k times (the value at its dst, never
            # another row's): apply its k-th power in one step.
            times = self._row_counts(f, base["dst"])
            for k in np.unique(times[times > 0]):
                rows = np.flatnonzero(times == k)
                acc[rows] = alu_imm_repeated(op, acc[rows], f["imm"], int(k))
            return
        # Vector form is sequential in uop order: vectorise only if no uop reads (as dst or src) a
        # row an earlier uop of this instruction wrote (so no dst repeats: n <= acc_depth).
        if n <= min(self.cfg.acc_depth, _CHUNK):
            _, loops = self._nest(f, ("dst", "src"))
            mult = n // (len(base["dst"]) * int(np.prod([c for c, _ in loops], dtype=np.int64)))
            if mult == 1:
                idx = next(self._chunks(base, loops))
                dst, src = idx["dst"], idx["src"]
                first_writer = np.full(self.cfg.acc_depth, n, dtype=np.int64)
                first_writer[dst[::-1]] = np.arange(n - 1, -1, -1)
                if np.unique(dst).size == n and not np.any(first_writer[src] < np.arange(n)):
                    acc[dst] = alu_apply(op, acc[dst], acc[src])
                    return
        # Otherwise one uop after the other, as fsim's loop does, in compiled code (no index arrays).
        _alu_sequential(acc, op, base["dst"], base["src"], f["iter_out"], f["iter_in"], f["dst_factor_out"],
                        f["dst_factor_in"], f["src_factor_out"], f["src_factor_in"])

    def execute(self, i: int) -> None:
        f = self.program.row(i)
        op = f["opcode"]
        if op == OP_LOAD:
            self.load(f)
        elif op == OP_STORE:
            self.store(f)
        elif op == OP_GEMM:
            self.gemm(f, i)
        elif op == OP_ALU:
            self.alu(f, i)


def _blocked_report(prog: Program, heads, queues, tokens) -> tuple:
    from vtasim.hw.disasm import one_line
    lines, summary = [], []
    for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
        if heads[m] >= len(queues[m]):
            lines.append(f"  {MODULE_NAMES[m]}: done ({len(queues[m])} instructions)")
            continue
        i = int(queues[m][heads[m]])
        need = [q for flag, q in TOKEN_POPS[m] if prog.row(i)[flag] and tokens[q] == 0]
        lines.append(f"  {MODULE_NAMES[m]}: instruction {i} `{one_line(prog.insn(i))}` waits for "
                     f"token {', '.join(need)} ({len(queues[m]) - heads[m]} left in queue)")
        summary.append(f"{MODULE_NAMES[m]} insn {i} needs {'/'.join(need)}")
    tok = ", ".join(f"{q}={tokens[q]}" for q in TOKEN_QUEUES)
    return "; ".join(summary) + f"; tokens {tok}", "\n".join(lines + [f"  tokens: {tok}"])


def _raise_if_overflow(heads, pushes, tokens, depth) -> None:
    """TokenOverflowError for the first stuck head ``(module, index)`` whose push queue is full."""
    for m, i in heads:
        full = [name for flag, name in pushes[m] if flag[i] and tokens[name] >= depth]
        if full:
            raise TokenOverflowError(f"instruction {i}: push to token queue {full[0]} would exceed "
                                     f"TOKEN_QUEUE_DEPTH = {depth}; no order of execution lets its consumer "
                                     f"pop first", i, full[0])


def run_program(prog: Program, dram: np.ndarray) -> FunctionalMachine:
    """Run ``prog`` on ``dram`` (in place) with the numpy executor; the machine holds the final state."""
    machine = FunctionalMachine(prog, dram)

    def step(i):
        machine.execute(i)
        machine.order.append(i)
    schedule(prog, machine.tokens, step)
    return machine


def schedule(prog: Program, tokens: dict, step) -> None:
    """The deterministic scheduler of the module docstring: calls ``step(i)`` for each instruction in
    execution order, keeping ``tokens`` (queue name -> count); raises its errors (deadlock, overflow,
    early FINISH).  Only the token flags decide the order, never the data."""
    queues = [prog.indices(m) for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)]
    heads = [0, 0, 0]
    depth = prog.cfg.TOKEN_QUEUE_DEPTH
    flags = {flag: prog.field(flag).astype(bool) for flag in ("pop_prev", "pop_next", "push_prev", "push_next")}
    pops = {m: [(flags[flag], q) for flag, q in TOKEN_POPS[m]] for m in TOKEN_POPS}
    pushes = {m: [(flags[flag], q) for flag, q in TOKEN_PUSHES[m]] for m in TOKEN_PUSHES}
    opcode = prog.field("opcode").astype(np.uint8)
    while True:
        progress = False
        for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
            q = queues[m]
            while heads[m] < len(q):
                i = int(q[heads[m]])
                if any(flag[i] and tokens[name] == 0 for flag, name in pops[m]):
                    break
                if any(flag[i] and tokens[name] >= depth for flag, name in pushes[m]):
                    break                  # a full queue: let its consumer catch up first
                for flag, name in pops[m]:
                    if flag[i]:
                        tokens[name] -= 1
                step(i)
                for flag, name in pushes[m]:
                    if flag[i]:
                        tokens[name] += 1
                heads[m] += 1
                progress = True
                if opcode[i] == OP_FINISH:
                    left = [(mm, int(queues[mm][heads[mm]])) for mm in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)
                            if heads[mm] < len(queues[mm])]
                    if left:
                        from vtasim.hw.disasm import one_line
                        _raise_if_overflow(left, pushes, tokens, depth)
                        mm, j = left[0]
                        raise RunError(f"FINISH (instruction {i}) ran while {MODULE_NAMES[mm]} instruction {j} "
                                       f"`{one_line(prog.insn(j))}` had not executed (a FINISH must wait for "
                                       f"every other instruction: give it pops)")
                    return
        if not progress:
            _raise_if_overflow([(m, int(queues[m][heads[m]])) for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)
                                if heads[m] < len(queues[m])], pushes, tokens, depth)
            summary, report = _blocked_report(prog, heads, queues, tokens)
            raise DeadlockError(f"deadlock before FINISH: {summary}", report)


@njit(cache=True)
def _order(module, pops, pushes, finish, depth):
    """:func:`schedule`'s order, compiled: ``module`` int8[n], ``pops``/``pushes`` int8[n] bit masks over
    :data:`TOKEN_QUEUES`, ``finish`` bool[n].  Returns ``(order int64[n], count, tokens int64[4], ok)``;
    ``ok`` is False where :func:`schedule` raises (it is then run to raise the error)."""
    n = module.size
    queues = np.empty((3, n), np.int64)
    qlen = np.zeros(3, np.int64)
    for i in range(n):
        m = module[i]
        queues[m, qlen[m]] = i
        qlen[m] += 1
    heads = np.zeros(3, np.int64)
    tokens = np.zeros(4, np.int64)
    order = np.empty(n, np.int64)
    count = 0
    while True:
        progress = False
        for m in range(3):
            while heads[m] < qlen[m]:
                i = queues[m, heads[m]]
                blocked = False
                for k in range(4):
                    if (pops[i] >> k) & 1 and tokens[k] == 0:
                        blocked = True
                    if (pushes[i] >> k) & 1 and tokens[k] >= depth:
                        blocked = True
                if blocked:
                    break
                for k in range(4):
                    tokens[k] -= (pops[i] >> k) & 1
                order[count] = i
                count += 1
                for k in range(4):
                    tokens[k] += (pushes[i] >> k) & 1
                heads[m] += 1
                progress = True
                if finish[i]:
                    return order, count, tokens, (heads == qlen).all()
        if not progress:
            return order, count, tokens, False


_arrays = weakref.WeakKeyDictionary()        # Program -> _order's arrays (cached_program reuses Programs)


def _schedule_arrays(prog: Program) -> tuple:
    """``(_order's arrays, numpy executor pays)``, made once per Program."""
    hit = _arrays.get(prog)
    if hit is None:
        hit = _arrays[prog] = ((np.array(prog.module, np.int8), _token_masks(prog, TOKEN_POPS),
                                _token_masks(prog, TOKEN_PUSHES), prog.field("opcode") == OP_FINISH),
                               _numpy_pays(prog))
    return hit


# uops walked by the compiled executor per uop the numpy one walks: a walked uop costs the numpy executor
# some 20x more, and the compiled one's BLAS grouping computes repeated products once too (bench/engine_speed.py
# prints both executors on the GEMM-bound stream, whose loops repeat 8-fold, and on the maximal nests)
NUMPY_MIN_SAVING = 256
NUMPY_MIN_UOPS = 1 << 20       # below this many uops the compiled executor runs regardless


def _numpy_pays(prog: Program) -> bool:
    """The ``executor="auto"`` rule: the numpy executor when it walks :data:`NUMPY_MIN_SAVING` times fewer
    uops than the compiled one, which walks every uop of every nest.  The numpy executor counts loops that
    move no index of a GEMM (sums repeat) and reads a reset GEMM's or an immediate ALU's rows off
    histograms (see :class:`FunctionalMachine`); it walks a vector ALU's nest whole."""
    f = prog.fields
    op = f["opcode"]
    nu = np.maximum(0, f["uop_end"] - f["uop_bgn"]).astype(np.int64)
    io, ii = f["iter_out"].astype(np.int64), f["iter_in"].astype(np.int64)
    nest = (op == OP_GEMM) | (op == OP_ALU)
    walked = np.where(nest, io * ii * nu, 0)
    moves_out = (f["dst_factor_out"] != 0) | (f["src_factor_out"] != 0) | (f["wgt_factor_out"] != 0)
    moves_in = (f["dst_factor_in"] != 0) | (f["src_factor_in"] != 0) | (f["wgt_factor_in"] != 0)
    gemm_walk = nu * np.where(moves_out, io, 1) * np.where(moves_in, ii, 1)
    counted = ((op == OP_GEMM) & (f["reset_reg"] != 0)) | ((op == OP_ALU) & (f["use_imm"] != 0))
    numpy = np.where(counted, nu, np.where(op == OP_GEMM, gemm_walk, walked))
    total, fewer = int(walked.sum()), int(numpy[nest].sum())
    return total >= NUMPY_MIN_UOPS and total >= NUMPY_MIN_SAVING * fewer


def _token_masks(prog: Program, table) -> np.ndarray:
    """Per instruction, bit k set when it pops (``TOKEN_POPS``) or pushes (``TOKEN_PUSHES``) queue k."""
    mask = np.zeros(prog.count, np.int8)
    for m, pairs in table.items():
        here = prog.module == m
        for flag, name in pairs:
            mask |= ((prog.field(flag) != 0) & here).astype(np.int8) << TOKEN_QUEUES.index(name)
    return mask


EXECUTORS = ("auto", "compiled", "numpy")
_warmed = []

# The engine contract (vtasim.sim.engines): no timing, so no trace files either.
TIMED = False
OPTIONS = (Option("executor", (str,), "how instructions are applied: the cycle engine's data kernels "
                  "(compiled), this module's numpy code (numpy), or the compiled one unless the numpy one walks "
                  "far fewer uops (auto)", EXECUTORS),)
BATCH_OPTIONS = OPTIONS


def warm_up(cfg=None) -> None:
    """Compile (or load from numba's cache) what the compiled executor runs, once per process."""
    if not _warmed:
        from vtasim.sim.builder import ProgramBuilder
        from vtasim.sim.cycle.engine import run_in_order
        if cfg is None:
            from vtasim.hw.config import load_config
            cfg = load_config()
        b = ProgramBuilder(cfg)
        b.finish()
        img = b.build()
        prog = load_program(img)
        order, count, _, _ = _order(*_schedule_arrays(prog)[0], cfg.TOKEN_QUEUE_DEPTH)
        run_in_order(prog, img.dram(), order[:count])
        _warmed.append(True)


def run_image(image, executor: str = "auto") -> RunResult:
    """Run a :class:`~vtasim.sim.image.MemoryImage` on the functional model.

    ``executor``: "compiled" applies each instruction, in the scheduler's order, through the cycle engine's
    data kernels with no timing (:func:`vtasim.sim.cycle.engine.run_in_order`: the same bytes, orders of magnitude
    faster on GEMM-heavy layers); "numpy" runs this module's own executor (:class:`FunctionalMachine`,
    independent of the cycle engine: the reference the tests hold the compiled executor and the cycle
    engine to); "auto" (default) the compiled one unless the numpy one walks far fewer uops
    (:func:`_numpy_pays`: nests that repeat loops moving no index).  A run that ends in an error is run
    again on the numpy executor, so every executor raises the same error."""
    if executor not in EXECUTORS:
        raise SimError(f"executor = {executor!r} is not one of {', '.join(EXECUTORS)}")
    if executor != "numpy":
        warm_up(image.cfg)                           # wall_s excludes the JIT, as the cycle engine's
    t0 = time.perf_counter()
    if executor != "numpy":
        from vtasim.sim.cycle.engine import cached_program, run_in_order
        prog = cached_program(image)
        arrays, numpy_pays = _schedule_arrays(prog)
        if executor == "compiled" or not numpy_pays:
            order, count, tokens, ok = _order(*arrays, prog.cfg.TOKEN_QUEUE_DEPTH)
            if ok:        # else a deadlock, overflow or early FINISH: the numpy executor raises it, after any
                dram = image.dram()       # error of an instruction before it
                counters = run_in_order(prog, dram, order[:count])
                if counters is not None:
                    return RunResult(engine="functional", dram=dram, counters=counters,
                                     outputs=image.outputs_from(dram),
                                     leftover_tokens={q: int(v) for q, v in zip(TOKEN_QUEUES, tokens) if v},
                                     cycles=None, wall_s=time.perf_counter() - t0, order=order[:count].tolist())
    else:
        prog = load_program(image)
    machine = run_program(prog, image.dram())
    wall = time.perf_counter() - t0
    return RunResult(engine="functional", dram=machine.dram, counters=dict(machine.counters),
                     outputs=image.outputs_from(machine.dram),
                     leftover_tokens={k: v for k, v in machine.tokens.items() if v},
                     cycles=None, wall_s=wall, order=machine.order)


def run_images(images, executor: str = "auto") -> list:
    """:func:`run_image` of each image, in order (the first that raises raises here)."""
    return [run_image(img, executor) for img in images]
