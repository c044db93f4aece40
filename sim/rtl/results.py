"""Turn what the HDL testbench wrote (``trace.txt``, ``dram_out.hex``, status) into a RunResult.

``trace.txt`` lines (interface of ``hw/rtl/tb/tb_top.v``, order of docs/timing.md section 9)::

    R <module 0|1|2> <index_in_module> <program_index> <opcode> <start> <end> <digest hex8>
    D <program_index> <dispatch cycle>
    F <cycles>                      or      E <error_code> <cycle>
    E 4 <cycle> <tokens hex16>      (deadlock: the first quiet cycle, the four counters l2g lowest)
"""

from __future__ import annotations

import numpy as np

from vtasim.sim.rtl.runner import MAX_RTL_CYCLES, parse_hex
from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT
from vtasim.hw.disasm import one_line
from vtasim.hw.isa import (MODULE_NAMES, OP_ALU, OP_GEMM, OP_LOAD, OP_STORE, TOKEN_POPS, TOKEN_PUSHES, TOKEN_QUEUES,
                    decode, decode_fields)
from vtasim.sim.errors import (DeadlockError, ProgramError, RtlIllegalInstruction, RtlRunError, RtlStopped, RtlTokenOverflow,
                        RtlWatchdog, SimError)
from vtasim.hw.isa import module_array
from vtasim.sim.program import check_program
from vtasim.sim.result import COUNTER_NAMES, RetireRecord, RunResult

__all__ = ["ERROR_CODES", "MAX_RTL_CYCLES", "RtlDeadlock", "RtlTrace", "parse_trace", "stream_counters",
           "leftover_tokens", "deadlock_report", "to_run_result"]

ERROR_CODES = {1: "token overflow", 2: "watchdog timeout", 3: "undecodable instruction",
               4: "deadlock (nothing in flight, FINISH not ended)",
               5: "FINISH ended while another instruction had not (docs/timing.md 7)"}


class RtlDeadlock(RtlStopped, DeadlockError):
    """The testbench's deadlock detector stopped the RTL (docs/cosim.md): a :class:`DeadlockError`
    whose one line has the cycle engine's shape, and an :class:`RtlStopped` with what retired."""

    def __init__(self, message, report="", records=(), dispatch_cycle=None, stop_cycle=None):
        RtlStopped.__init__(self, message, records, dispatch_cycle, stop_cycle)
        self.report = report


class RtlTrace:
    """Parsed ``trace.txt``: retire records, dispatch cycles, and the end line."""

    def __init__(self, records, dispatch, cycles, error, tokens=None):
        self.records = records            # list[RetireRecord] in file order
        self.dispatch = dispatch          # {program_index: cycle}
        self.cycles = cycles              # from the F line, or None
        self.error = error                # (code, cycle) from the E line, or None
        self.tokens = tokens              # {l2g, g2l, s2g, g2s} from a deadlock's E line, or None


def parse_trace(text: str) -> RtlTrace:
    records, dispatch, cycles, error, tokens = [], {}, None, None, None
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            kind = parts[0]
            if kind == "R" and len(parts) == 8:
                m, idx, prog, op, s, e = (int(x) for x in parts[1:7])
                records.append(RetireRecord(MODULE_NAMES[m], idx, prog, op, s, e, int(parts[7], 16)))
            elif kind == "D" and len(parts) == 3:
                dispatch[int(parts[1])] = int(parts[2])
            elif kind == "F" and len(parts) == 2:
                cycles = int(parts[1])
            elif kind == "E" and len(parts) in (3, 4):
                error = (int(parts[1]), int(parts[2]))
                if len(parts) == 4:
                    word = int(parts[3], 16)
                    tokens = {name: (word >> (16 * k)) & 0xFFFF for k, name in enumerate(TOKEN_QUEUES)}
            else:
                raise ValueError("unknown line shape")
        except (ValueError, IndexError):
            raise SimError(f"trace.txt line {lineno}: {line!r} is not an R/D/F/E record of the "
                           f"RTL trace format") from None
    return RtlTrace(records, dispatch, cycles, error, tokens)


def stream_counters(cfg, f: dict) -> dict:
    """fsim's counters (hardware spec 6) of a stream in which every instruction ran.

    The RTL has no counters, and they depend on instruction fields only, so they are computed from
    the decoded stream; tests hold them against the functional model, which counts as it runs."""
    op, mt, xy = f["opcode"], f["memory_type"], f["x_size"] * f["y_size"]
    n = f["iter_out"] * f["iter_in"] * np.maximum(0, f["uop_end"] - f["uop_bgn"])
    load, store = op == OP_LOAD, op == OP_STORE

    def loaded(types, ebytes):
        return int((xy[load & np.isin(mt, types)] * ebytes).sum())
    out = {"inp_load_nbytes": loaded([MEM_INP], cfg.inp_elem_bytes),
           "wgt_load_nbytes": loaded([MEM_WGT], cfg.wgt_elem_bytes),
           "acc_load_nbytes": loaded([MEM_ACC, MEM_ACC_8BIT], cfg.acc_elem_bytes),
           "uop_load_nbytes": loaded([MEM_UOP], cfg.uop_elem_bytes),
           "out_store_nbytes": int((xy[store] * cfg.out_elem_bytes).sum()),
           "gemm_counter": int(n[(op == OP_GEMM) & (f["reset_reg"] == 0)].sum()),
           "alu_counter": int(n[op == OP_ALU].sum())}
    return {name: out[name] for name in COUNTER_NAMES}


def leftover_tokens(f: dict) -> dict:
    """Pushes minus pops per token queue over the whole stream (every instruction retired)."""
    mods = module_array(f)
    count = {}
    for m in TOKEN_POPS:
        for flag, tok in TOKEN_PUSHES[m]:
            count[tok] = count.get(tok, 0) + int(f[flag][mods == m].sum())
        for flag, tok in TOKEN_POPS[m]:
            count[tok] = count.get(tok, 0) - int(f[flag][mods == m].sum())
    return {k: v for k, v in count.items() if v}


def _dispatch_array(dispatch: dict, n: int) -> np.ndarray:
    out = np.full(n, -1, dtype=np.int64)
    for prog, cyc in dispatch.items():
        if 0 <= prog < n:
            out[prog] = cyc
    return out


def deadlock_report(image, trace: RtlTrace, cycle) -> tuple:
    """The cycle engine's deadlock report (its one line, its lines) rebuilt from what the RTL wrote.

    When the detector fires nothing is in flight, so each module's first instruction that did not
    retire is its queue head (or not dispatched yet), a queue holds the instructions dispatched and
    not retired, and the counters are the RTL's own (the E line)."""
    cfg = image.cfg
    raw = image.insn_bytes()
    f = decode_fields(cfg, raw)
    mods = module_array(f)
    n = len(mods)
    tokens = trace.tokens if trace.tokens is not None else {k: 0 for k in TOKEN_QUEUES}
    retired = np.zeros(n, bool)
    for r in trace.records:
        if 0 <= r.program_index < n:
            retired[r.program_index] = True
    dispatched = np.zeros(n, bool)
    for j in trace.dispatch:
        if 0 <= j < n:
            dispatched[j] = True
    depth = cfg.CMD_QUEUE_DEPTH

    def insn(j):
        return one_line(decode(cfg, bytes(raw[16 * j:16 * j + 16]), j))

    occ = [int((dispatched & ~retired & (mods == m)).sum()) for m in range(3)]
    lines, summary = [f"deadlock at cycle {cycle}: no module can start and FINISH has not ended"], []
    for m, name in enumerate(MODULE_NAMES):
        mine = np.flatnonzero(mods == m)
        left = mine[~retired[mine]]
        queue = f"queue {occ[m]}/{depth}"
        if left.size == 0:
            lines.append(f"  {name}: done ({mine.size} instructions)")
            continue
        j = int(left[0])
        if not dispatched[j]:
            lines.append(f"  {name}: queue empty, next instruction {j} not yet dispatched ({queue})")
            continue
        need = [tok for flag, tok in TOKEN_POPS[m] if f[flag][j] and tokens[tok] == 0]
        if need:
            lines.append(f"  {name}: instruction {j} `{insn(j)}` waits for token {', '.join(need)} ({queue})")
            summary.append(f"{name} insn {j} needs {'/'.join(need)}")
        else:
            lines.append(f"  {name}: instruction {j} `{insn(j)}` queued with its tokens available, not started "
                         f"({queue}; the RTL should have started it)")
            summary.append(f"{name} insn {j} not started with its tokens available")
    nxt = int(np.argmin(dispatched)) if not dispatched.all() else n
    if nxt < n and occ[int(mods[nxt])] >= depth:
        u = MODULE_NAMES[int(mods[nxt])]
        lines.append(f"  fetch: instruction {nxt} `{insn(nxt)}` blocked: {u} queue full ({occ[int(mods[nxt])]}/{depth})")
        summary.append(f"fetch blocked on full {u} queue at insn {nxt}")
    elif nxt < n:
        lines.append(f"  fetch: instruction {nxt} `{insn(nxt)}` not dispatched")
    else:
        lines.append("  fetch: all instructions dispatched")
    tok = ", ".join(f"{k}={tokens[k]}" for k in TOKEN_QUEUES)
    lines.append(f"  tokens: {tok}")
    return f"deadlock at cycle {cycle}: {'; '.join(summary)}; tokens {tok}", "\n".join(lines)


def _error(status: dict, trace: RtlTrace, max_cycles: int, insn_count: int, image=None) -> RtlStopped:
    code = status.get("error_code") or (trace.error[0] if trace.error else 0)
    cycle = trace.error[1] if trace.error else status.get("cycles")
    last = trace.records[-1] if trace.records else None
    where = (f"; last retirement: {last.module} #{last.index_in_module} (instruction {last.program_index}) "
             f"ended at cycle {last.end_cycle}" if last else "; nothing retired")
    what = ERROR_CODES.get(code, f"error code {code}")
    if code == 4 and image is not None:
        summary, report = deadlock_report(image, trace, cycle)
        return RtlDeadlock(summary, report, trace.records, _dispatch_array(trace.dispatch, insn_count),
                           cycle)
    if code == 1:
        cls, msg = RtlTokenOverflow, f"RTL stopped at cycle {cycle}: {what} (a push above TOKEN_QUEUE_DEPTH){where}"
    elif code == 2:
        if max_cycles >= MAX_RTL_CYCLES:
            why = "the RTL's 32-bit cycle counter is exhausted: longer programs cannot run on the RTL"
        else:
            why = "a livelock, or a run longer than the budget: raise --max-cycles"
        cls, msg = RtlWatchdog, f"RTL watchdog: no FINISH within max_cycles={max_cycles} ({why}){where}"
    elif code == 3:
        cls, msg = RtlIllegalInstruction, f"RTL stopped at cycle {cycle}: {what}{_decode_reason(image, trace)}{where}"
    else:
        cls, msg = RtlRunError, f"RTL stopped at cycle {cycle}: {what}{where}"
    # What the RTL did before it stopped, so `vtasim diff` can still point at the first divergence.
    return cls(msg, trace.records, _dispatch_array(trace.dispatch, insn_count), cycle)


def _decode_reason(image, trace: RtlTrace) -> str:
    """``: <the static check's message>`` for the instruction the fetch unit refused (the first one not
    dispatched; fetch dispatches in program order), so the RTL names a bad opcode in the very words of
    the other engines (vtasim.sim.program's decode rules); empty when the static checks find nothing there."""
    if image is None:
        return ""
    nxt = next((i for i in range(image.insn_count) if i not in trace.dispatch), None)
    try:
        check_program(image.cfg, decode_fields(image.cfg, image.insn_bytes()), image.dram_size)
    except ProgramError as exc:
        if exc.index == nxt:
            return f": {exc}"
    return ""


def to_run_result(image, outcome, max_cycles: int) -> RunResult:
    """Build the rtl RunResult of one job, or raise the error the RTL signalled."""
    trace = parse_trace(outcome.trace_text)
    status = outcome.status
    if status.get("error") or not status.get("finish"):
        raise _error(status, trace, max_cycles, image.insn_count, image)
    dram = parse_hex(outcome.dram_hex, image.cfg.bus_bytes, image.dram_size)
    if dram.size != image.dram_size:
        raise SimError(f"dram_out.hex holds {dram.size} bytes, the image DRAM has {image.dram_size}")
    if trace.cycles is None:
        raise SimError(f"RTL finished at cycle {status['cycles']} but trace.txt has no 'F' line "
                       f"({len(trace.records)} retire records): the retire trace is incomplete")
    if trace.cycles != status["cycles"]:
        raise SimError(f"RTL trace says F {trace.cycles} but the cycles port latched {status['cycles']}")
    f = decode_fields(image.cfg, image.insn_bytes())
    return RunResult(engine="rtl", dram=dram, counters=stream_counters(image.cfg, f),
                     outputs=image.outputs_from(dram), leftover_tokens=leftover_tokens(f),
                     cycles=int(status["cycles"]), trace=trace.records, wall_s=status.get("wall_s"),
                     dispatch_cycle=_dispatch_array(trace.dispatch, image.insn_count),
                     launch_ns=status.get("launch_ns"), clock_ns=status.get("clock_ns"),
                     waves=str(outcome.waves) if outcome.waves else None)
