"""Functional model: fsim semantics (hardware spec 3.1-3.6), one instruction at a time, in numpy.

This is the data oracle of vtasim: the cycle engine and the RTL must leave byte-identical DRAM.
It is deliberately plain - each instruction is executed atomically and vectorised over its whole
loop nest - so that it is obviously correct and still quick (a ResNet-18 C2 stream of ~450k GEMM
uops runs in seconds).

Rules for the cases fsim leaves undefined (README "Semantics and timing", identical in every engine):

* SHR by a signed 32-bit amount y: ``0 <= y < 32`` arithmetic right shift; ``y >= 32`` gives
  ``x >> 31``; ``-32 < y < 0`` left shift by ``-y`` keeping the low 32 bits; ``y <= -32`` gives 0.
* MUL keeps the low 32 bits; ADD wraps; MIN/MAX are signed.
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
order of execution lets the consumer pop first: :class:`~sim.errors.TokenOverflowError`
(docs/timing.md section 5) - or a deadlock (:class:`~sim.errors.DeadlockError` naming each blocked
module's head and the token it needs).  So the functional model never reports an overflow that a
different (timing-dependent) interleaving would avoid.
"""

from __future__ import annotations

import time

import numpy as np

from hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT
from hw.isa import (ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR, MODULE_COMPUTE, MODULE_LOAD, MODULE_NAMES,
                    MODULE_STORE, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, TOKEN_POPS, TOKEN_PUSHES,
                    TOKEN_QUEUES, decode_uops)
from sim.errors import DeadlockError, ProgramError, RunError, TokenOverflowError
from sim.program import Program, load_program
from sim.result import COUNTER_NAMES, RunResult

__all__ = ["run_image", "FunctionalMachine", "alu_apply", "alu_imm_repeated", "TOKEN_QUEUES"]

_GEMM_CHUNK = 1 << 14     # uops per vectorised GEMM step: bounds temporary memory to ~20 MB


def alu_apply(op: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One ALU operation on int32 lanes (the documented rules above); returns int32."""
    x = x.astype(np.int64)
    y = y.astype(np.int64)
    if op == ALU_MIN:
        r = np.minimum(x, y)
    elif op == ALU_MAX:
        r = np.maximum(x, y)
    elif op == ALU_ADD:
        r = x + y
    elif op == ALU_MUL:
        r = x * y
    elif op == ALU_SHR:
        right = x >> np.clip(y, 0, 31)
        left = x << np.clip(-y, 0, 31)
        r = np.where(y >= 0, right, np.where(y > -32, left, 0))
    else:
        raise ValueError(f"alu opcode {op}")
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def alu_imm_repeated(op: int, x: np.ndarray, imm: int, k: int) -> np.ndarray:
    """``alu_apply(op, ., imm)`` applied ``k >= 1`` times, computed in one step (same rules)."""
    if op in (ALU_MIN, ALU_MAX) or k == 1:             # MIN/MAX with a constant are idempotent
        y = imm
    elif op == ALU_ADD:
        y = k * imm                                    # wraps mod 2^32 as k single additions do
    elif op == ALU_MUL:
        y = pow(imm, k, 1 << 32)                       # low 32 bits of imm^k
    elif imm >= 32 or imm == 0:                        # SHR: x >> 31 and x >> 0 are fixed points
        y = imm
    elif imm > 0:
        y = min(k * imm, 31)                           # arithmetic shifts add up, saturating at 31
    else:
        y = -min(-k * imm, 32)                         # left shifts add up; 32 or more leaves 0
    return alu_apply(op, x, np.int64(y))


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
    def _indices(self, f: dict, index: int, names):
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

    def gemm(self, f: dict, index: int) -> None:
        n = f["iter_out"] * f["iter_in"] * max(0, f["uop_end"] - f["uop_bgn"])
        if n == 0:
            return
        if f["reset_reg"]:
            (dst,) = self._indices(f, index, ("dst",))
            self.acc[dst] = 0
            return
        dst, src, wgt = self._indices(f, index, ("dst", "src", "wgt"))
        self.counters["gemm_counter"] += n
        # acc[dst] += inp[src] . wgt[wgt]^T; addition mod 2^32 commutes, so np.add.at's order of
        # repeated dst indices cannot change the result.
        for c in range(0, n, _GEMM_CHUNK):
            sl = slice(c, c + _GEMM_CHUNK)
            a = self.inp[src[sl]].astype(np.int32)                       # (k, batch, block_in)
            b = self.wgt[wgt[sl]].astype(np.int32).transpose(0, 2, 1)    # (k, block_in, block_out)
            prod = np.matmul(a, b).reshape(a.shape[0], -1)               # exact: |sum| < 2^31
            np.add.at(self.acc, dst[sl], prod)

    def alu(self, f: dict, index: int) -> None:
        n = f["iter_out"] * f["iter_in"] * max(0, f["uop_end"] - f["uop_bgn"])
        if n == 0:
            return
        self.counters["alu_counter"] += n
        op, acc = f["alu_opcode"], self.acc
        # src is range-checked even with an immediate, as fsim computes (and checks) it for every uop
        dst, src = self._indices(f, index, ("dst", "src"))
        if f["use_imm"]:
            # A row the loop visits k times gets the same function k times: apply its k-th power in
            # one step (a row-by-row Python loop took minutes for a 10^8-uop loop over a few rows).
            udst, times = np.unique(dst, return_counts=True)
            for k in np.unique(times):
                rows = udst[times == k]
                acc[rows] = alu_imm_repeated(op, acc[rows], f["imm"], int(k))
            return
        # Vector form is sequential in uop order: vectorise only if no uop reads (as dst or src) a
        # row an earlier uop of this instruction wrote.
        first_writer = np.full(self.cfg.acc_depth, n, dtype=np.int64)
        first_writer[dst[::-1]] = np.arange(n - 1, -1, -1)
        order = np.arange(n)
        if np.unique(dst).size == n and not np.any(first_writer[src] < order):
            acc[dst] = alu_apply(op, acc[dst], acc[src])
        else:
            for d, s in zip(dst, src):
                acc[d] = alu_apply(op, acc[d], acc[s])

    def execute(self, i: int) -> None:
        f = {name: int(v[i]) for name, v in self.program.fields.items()}
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
    from hw.disasm import one_line
    lines, summary = [], []
    for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
        if heads[m] >= len(queues[m]):
            lines.append(f"  {MODULE_NAMES[m]}: done ({len(queues[m])} instructions)")
            continue
        i = int(queues[m][heads[m]])
        need = [q for flag, q in TOKEN_POPS[m] if prog.fields[flag][i] and tokens[q] == 0]
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
    machine = FunctionalMachine(prog, dram)
    f = prog.fields
    queues = [prog.indices(m) for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)]
    heads = [0, 0, 0]
    tokens = machine.tokens
    depth = prog.cfg.TOKEN_QUEUE_DEPTH
    pops = {m: [(np.asarray(f[flag], bool), q) for flag, q in TOKEN_POPS[m]] for m in TOKEN_POPS}
    pushes = {m: [(np.asarray(f[flag], bool), q) for flag, q in TOKEN_PUSHES[m]] for m in TOKEN_PUSHES}
    opcode = f["opcode"]
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
                machine.execute(i)
                machine.order.append(i)
                for flag, name in pushes[m]:
                    if flag[i]:
                        tokens[name] += 1
                heads[m] += 1
                progress = True
                if opcode[i] == OP_FINISH:
                    left = [(mm, int(queues[mm][heads[mm]])) for mm in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)
                            if heads[mm] < len(queues[mm])]
                    if left:
                        from hw.disasm import one_line
                        _raise_if_overflow(left, pushes, tokens, depth)
                        mm, j = left[0]
                        raise RunError(f"FINISH (instruction {i}) ran while {MODULE_NAMES[mm]} instruction {j} "
                                       f"`{one_line(prog.insn(j))}` had not executed (a FINISH must wait for "
                                       f"every other instruction: give it pops)")
                    return machine
        if not progress:
            _raise_if_overflow([(m, int(queues[m][heads[m]])) for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)
                                if heads[m] < len(queues[m])], pushes, tokens, depth)
            summary, report = _blocked_report(prog, heads, queues, tokens)
            raise DeadlockError(f"deadlock before FINISH: {summary}", report)


def run_image(image, **opts) -> RunResult:
    """Run a :class:`~sim.image.MemoryImage` on the functional model.

    Options other engines take (``trace``, ``perfetto``, ...) are accepted and ignored."""
    t0 = time.perf_counter()
    prog = load_program(image)
    machine = run_program(prog, image.dram())
    wall = time.perf_counter() - t0
    return RunResult(engine="functional", dram=machine.dram, counters=dict(machine.counters),
                     outputs=image.outputs_from(machine.dram),
                     leftover_tokens={k: v for k, v in machine.tokens.items() if v},
                     cycles=None, wall_s=wall, order=machine.order)

