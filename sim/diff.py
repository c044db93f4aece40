"""Compare two runs of one image and report the first divergence (see docs/cosim.md).

``compare(expected, actual, image)`` matches retire records by program index, finds the earliest
divergence in time (a start that differs shows at the earlier start, an end at the earlier end, a
digest at the end), compares the output bytes and the final DRAM, and returns a :class:`Diff`.
Items counted in ``N matched, M mismatched``: retire records (matched by program index, one per
instruction) and output regions (plus one item for DRAM bytes outside every output, when they
differ); the report names both kinds: ``22 instructions and 1 output matched, 0 mismatched``.
``Diff.report()`` is the multi-line text of ``vtasim diff``: module, the instruction disassembled,
the cycle on each side, expected vs actual lanes, the last retirements on both sides, command-queue
and token state at that cycle (rebuilt from dispatch/start/end cycles), the waveform window and a
command that reproduces it; it ends with that tally.

Against the functional model only data is compared (it has no cycles).  :func:`render` is the text of
the report (:meth:`Diff.report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasim.hw.disasm import one_line
from vtasim.hw.isa import MODULE_NAMES, OPCODE_NAMES, TOKEN_POPS, TOKEN_PUSHES, TOKEN_QUEUES, decode
from vtasim.sim.program import load_program

__all__ = ["Diff", "Divergence", "DataDiff", "compare", "machine_state", "render", "tally", "format_record",
           "WINDOW_CYCLES", "LAST_N", "TOKENS"]

WINDOW_CYCLES = 20          # half-width of the waveform window named by a report
LAST_N = 5                  # retirements shown on each side
RECORD_FIELDS = ("module", "index_in_module", "opcode", "start_cycle", "end_cycle", "digest")

TOKENS = TOKEN_QUEUES        # token counters (hardware spec 4.2); TOKEN_POPS/PUSHES from vtasim.hw.isa


@dataclass
class Divergence:
    program_index: int | None       # None for a data-only divergence without an instruction
    cycle: int | None               # when it first shows (expected-side numbering)
    fields: tuple                   # differing record fields, or ("missing",) / ("extra",)
    expected: object = None         # RetireRecord or None
    actual: object = None


@dataclass
class DataDiff:
    name: str                       # output name, or "dram" for bytes outside every output
    offset: int                     # first differing byte inside the region
    address: int                    # its DRAM byte address
    elem_bytes: int
    expected: np.ndarray            # lanes of the element holding that byte
    actual: np.ndarray
    nbytes_differing: int


@dataclass
class Diff:
    image: object
    expected_engine: str
    actual_engine: str
    matched: int = 0                                 # retire records and output regions
    mismatched: int = 0
    records_matched: int | None = None               # of ``matched``: retire records (None: not compared)
    outputs_matched: int | None = None               # of ``matched``: output regions (None: not compared)
    first: Divergence | None = None
    data: list = field(default_factory=list)        # DataDiff per differing region
    cycles: tuple = (None, None)
    expected_result: object = None
    actual_result: object = None
    reproduce: str = ""
    waves: dict = field(default_factory=dict)       # side -> path of a waveform of that run
    expected_lanes: str | None = None                # functional-model view of the divergent write
    error: str | None = None                         # the actual side stopped with this error

    @property
    def ok(self) -> bool:
        return self.error is None and self.mismatched == 0 and self.cycles[0] == self.cycles[1]

    def report(self) -> str:
        return render(self)


def _key(rec):
    return (rec.end_cycle, MODULE_NAMES.index(rec.module))


def _first_cycle(e, a, fields):
    if "start_cycle" in fields:
        return min(e.start_cycle, a.start_cycle)
    if "end_cycle" in fields:
        return min(e.end_cycle, a.end_cycle)
    return e.end_cycle


def compare_traces(exp_trace, act_trace):
    """(matched, mismatched, first Divergence or None) over records matched by program index."""
    exp = {r.program_index: r for r in exp_trace}
    act = {r.program_index: r for r in act_trace}
    matched = mismatched = 0
    candidates = []
    for prog in sorted(set(exp) | set(act)):
        e, a = exp.get(prog), act.get(prog)
        if e is None or a is None:
            mismatched += 1
            rec = e or a        # a record on one side only shows from the cycle it started
            candidates.append(((rec.start_cycle, MODULE_NAMES.index(rec.module)),
                               Divergence(prog, rec.start_cycle, ("missing",) if a is None else ("extra",), e, a)))
            continue
        diff = tuple(f for f in RECORD_FIELDS if getattr(e, f) != getattr(a, f))
        if not diff:
            matched += 1
            continue
        mismatched += 1
        cyc = _first_cycle(e, a, diff)
        candidates.append(((cyc, MODULE_NAMES.index(e.module)), Divergence(prog, cyc, diff, e, a)))
    first = min(candidates, key=lambda c: c[0])[1] if candidates else None
    return matched, mismatched, first


def _lanes(buf: np.ndarray, start: int, nbytes: int, dtype):
    return np.frombuffer(bytes(buf[start:start + nbytes]), dtype=dtype).copy()


def compare_data(image, exp_dram, act_dram):
    """DataDiff per output region (then the rest of DRAM) whose bytes differ."""
    cfg = image.cfg
    out = []
    exp_dram = np.asarray(exp_dram, dtype=np.uint8)
    act_dram = np.asarray(act_dram, dtype=np.uint8)
    n = min(exp_dram.size, act_dram.size)
    covered = np.zeros(n, dtype=bool)
    for o in image.outputs:
        covered[o.addr:o.addr + o.nbytes] = True
        e, a = exp_dram[o.addr:o.addr + o.nbytes], act_dram[o.addr:o.addr + o.nbytes]
        bad = np.flatnonzero(e != a)
        if bad.size:
            eb = cfg.out_elem_bytes
            first = int(bad[0])
            base = first - first % eb
            out.append(DataDiff(o.name, first, o.addr + first, eb, _lanes(e, base, eb, np.int8),
                                _lanes(a, base, eb, np.int8), int(bad.size)))
    bad = np.flatnonzero((exp_dram[:n] != act_dram[:n]) & ~covered)
    if bad.size or exp_dram.size != act_dram.size:
        first = int(bad[0]) if bad.size else n
        base = first - first % 4
        out.append(DataDiff("dram", first, first, 4, _lanes(exp_dram, base, 4, np.uint8),
                            _lanes(act_dram, base, 4, np.uint8), int(bad.size)))
    return out


def machine_state(program, trace, dispatch, t: int) -> dict:
    """Command-queue occupancies, token counters and what each module runs, at cycle ``t``.

    docs/timing.md 3 and 5: occupancy(t) = dispatched before t - started before t; a counter at t =
    pushes at end cycles < t - pops at start cycles < t."""
    f, mod = program.fields, program.module
    queues = {name: 0 for name in MODULE_NAMES}
    if dispatch is not None:
        d = np.asarray(dispatch)
        for i in np.flatnonzero((d >= 0) & (d < t)):
            queues[MODULE_NAMES[mod[i]]] += 1
    tokens = dict.fromkeys(TOKENS, 0)
    running = {name: None for name in MODULE_NAMES}
    for r in trace or ():
        m = MODULE_NAMES.index(r.module)
        i = r.program_index
        if r.start_cycle < t:
            queues[r.module] -= 1
            for flag, tok in TOKEN_POPS[m]:
                tokens[tok] -= int(f[flag][i])
        if r.end_cycle < t:
            for flag, tok in TOKEN_PUSHES[m]:
                tokens[tok] += int(f[flag][i])
        if r.start_cycle <= t <= r.end_cycle:
            running[r.module] = r
    if dispatch is None:
        queues = None
    return {"queues": queues, "tokens": tokens, "running": running}


def compare(expected, actual, image, reproduce: str = "", timing: bool = True, error: str | None = None) -> Diff:
    """Diff two RunResults of ``image``; ``timing=False`` compares data only (functional side).

    ``error``: the actual run stopped with this error; ``actual`` then holds only its partial trace
    (``dram`` None) and the data is not compared."""
    d = Diff(image, expected.engine, actual.engine, expected_result=expected, actual_result=actual,
             reproduce=reproduce, error=error)
    if timing and expected.trace is not None and actual.trace is not None:
        d.matched, d.mismatched, d.first = compare_traces(expected.trace, actual.trace)
        d.records_matched = d.matched
        d.cycles = (expected.cycles, actual.cycles)
        if d.first is not None and d.first.program_index is not None and "digest" in d.first.fields:
            order = [r.program_index for r in sorted(expected.trace, key=_key)]
            d.expected_lanes = functional_lanes(image, order, d.first.program_index)
    if actual.dram is None:
        return d
    d.data = compare_data(image, expected.dram, actual.dram)
    # Output regions count as items next to the retire records, so a data-only divergence is counted.
    bad_outputs = len({x.name for x in d.data if x.name != "dram"})
    d.outputs_matched = len(image.outputs) - bad_outputs
    d.matched += d.outputs_matched
    d.mismatched += len(d.data)
    return d


def opcode_name(op: int) -> str:
    return OPCODE_NAMES.get(op, f"op{op}")


def functional_lanes(image, order, index: int) -> str | None:
    """Re-run the functional model over ``order`` (program indices, retire order) up to ``index``
    and show the lanes of the first SRAM element or DRAM element that instruction writes."""
    from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_NAMES, MEM_UOP
    from vtasim.hw.isa import OP_ALU, OP_GEMM, OP_LOAD, OP_STORE
    from vtasim.sim.functional import FunctionalMachine
    program = load_program(image)
    machine = FunctionalMachine(program, image.dram())
    for i in order:
        machine.execute(int(i))
        if int(i) == index:
            break
    f = {name: int(v[index]) for name, v in program.fields.items()}
    op, cfg = f["opcode"], image.cfg
    if op == OP_LOAD and f["x_size"]:
        mt = MEM_ACC if f["memory_type"] == MEM_ACC_8BIT else f["memory_type"]
        row = machine.sram[mt][f["sram_base"]]
        lanes = row.view("<u4") if mt == MEM_UOP else row.view("<i4") if mt == MEM_ACC else row.view(np.int8)
        where = f"SRAM {MEM_NAMES[mt]}[{f['sram_base']}]"
    elif op in (OP_GEMM, OP_ALU) and f["iter_out"] * f["iter_in"] * max(0, f["uop_end"] - f["uop_bgn"]):
        (dst,) = machine.uop_indices(f, index, ("dst",))
        row = int(dst[-1])
        lanes, where = machine.acc[row], f"ACC[{row}] (its last write)"
    elif op == OP_STORE and f["x_size"]:
        addr = f["dram_base"] * cfg.out_elem_bytes
        lanes, where = machine.dram[addr:addr + cfg.out_elem_bytes].view(np.int8), f"DRAM {addr:#x}"
    else:
        return None
    return (f"  expected lanes after it (functional model, retire order): {where} = "
            "[" + " ".join(str(int(v)) for v in lanes) + "]")


# ---- the report text ----------------------------------------------------------------------------
def format_record(r) -> str:
    if r is None:
        return "(none)"
    return (f"{r.module:<7} #{r.index_in_module:<4} insn {r.program_index:<5} {opcode_name(r.opcode):<6} "
            f"start {r.start_cycle:<8} end {r.end_cycle:<8} digest {r.digest:08x}")


def _insn(image, index):
    raw = image.insn_bytes()[index * 16:(index + 1) * 16]
    return decode(image.cfg, raw, index)


def _last(trace, before_key, n=LAST_N):
    recs = sorted(trace or (), key=lambda r: (r.end_cycle, MODULE_NAMES.index(r.module)))
    recs = [r for r in recs if (r.end_cycle, MODULE_NAMES.index(r.module)) < before_key]
    return recs[-n:]


def _state_lines(tag, program, result, t):
    st = machine_state(program, result.trace, result.dispatch_cycle, t)
    q = st["queues"]
    qtxt = " ".join(f"{k} {v}" for k, v in q.items()) if q is not None else "(no dispatch cycles recorded)"
    ttxt = " ".join(f"{k} {v}" for k, v in st["tokens"].items())
    run = ", ".join(f"{m} " + (f"insn {r.program_index} ({opcode_name(r.opcode)} {r.start_cycle}..{r.end_cycle})"
                               if r else "idle") for m, r in st["running"].items())
    return [f"  {tag:<8} queues: {qtxt}", f"  {'':<8} tokens: {ttxt}", f"  {'':<8} running: {run}"]


def _lanes_text(arr: np.ndarray) -> str:
    return "[" + " ".join(str(int(v)) for v in arr) + "]"


def _waves_lines(diff, cycle):
    lo, hi = max(0, cycle - WINDOW_CYCLES), cycle + WINDOW_CYCLES
    out = [f"waveform window: cycles {lo}..{hi}"]
    rtl = diff.actual_result if diff.actual_result is not None and diff.actual_result.engine == "rtl" else None
    if rtl is not None and rtl.launch_ns is not None:
        # The model VCD is written on the RTL's time base (launch time + cycle * clock period).
        t0, p = rtl.launch_ns, rtl.clock_ns
        span = f"time {t0 + lo * p:g}..{t0 + hi * p:g} ns"
    else:
        span = f"time {lo * 10}..{hi * 10} ns"
    for side, res in (("expected", diff.expected_result), ("actual", diff.actual_result)):
        path = diff.waves.get(side) or (res.waves if res is not None else None)
        if path:
            out.append(f"  {side} ({res.engine}): {path}  {span}")
    if diff.waves.get("gtkw"):
        out.append(f"  gtkwave {diff.waves['gtkw']}   (opens the RTL waves zoomed on this window)")
    if len(out) == 1:
        out.append("  (no waveforms recorded: add --waves to write rtl.fst (or --waves vcd) and model.vcd)")
    return out


def render(diff) -> str:
    """The multi-line report of a :class:`Diff` (what ``vtasim diff`` prints)."""
    image = diff.image
    E, A = diff.expected_engine, diff.actual_engine
    lines = [f"vtasim diff: {E} (expected) vs {A} (actual), {image.insn_count} instructions"]
    if diff.error:
        lines.append(f"{A.upper()} ERROR: {diff.error}")
    first = diff.first
    if first is not None:
        program = load_program(image)
        e, a = first.expected, first.actual
        rec = e or a
        insn = _insn(image, first.program_index)
        lines += [
            f"FIRST DIVERGENCE at cycle {first.cycle}: {rec.module} module, instruction {first.program_index} "
            f"(#{rec.index_in_module} in {rec.module})",
            f"  instruction : {one_line(insn)}",
            f"  differs     : {', '.join(first.fields)}",
            f"  expected    : {format_record(e)}",
            f"  actual      : {format_record(a)}",
        ]
        if e is not None and a is not None:
            lines.append(f"  cycles      : start {e.start_cycle} vs {a.start_cycle}, end {e.end_cycle} vs "
                         f"{a.end_cycle} (expected vs actual)")
        if diff.expected_lanes:
            lines.append(diff.expected_lanes)
        key = (first.cycle, MODULE_NAMES.index(rec.module))
        lines.append(f"last {LAST_N} retirements before it:")
        for tag, res in (("expected", diff.expected_result), ("actual", diff.actual_result)):
            lines.append(f"  {tag}:")
            lines += [f"    {format_record(r)}" for r in _last(res.trace, key)] or ["    (none)"]
        lines.append(f"queue and token state at cycle {first.cycle}:")
        lines += _state_lines("expected", program, diff.expected_result, first.cycle)
        lines += _state_lines("actual", program, diff.actual_result, first.cycle)
        lines += _waves_lines(diff, first.cycle)
    elif diff.cycles[0] != diff.cycles[1]:
        lines.append(f"every retirement matches but cycles differ: {diff.cycles[0]} vs {diff.cycles[1]}")
    for d in diff.data:
        where = f"output {d.name!r} byte {d.offset}" if d.name != "dram" else f"DRAM byte {d.address:#x} (no output)"
        lines += [f"DATA DIFFERS: {where} (address {d.address:#x}), {d.nbytes_differing} bytes differ",
                  f"  element {d.offset // d.elem_bytes} lanes expected {_lanes_text(d.expected)}",
                  f"  element {d.offset // d.elem_bytes} lanes actual   {_lanes_text(d.actual)}"]
    if diff.reproduce:
        lines.append(f"reproduce: {diff.reproduce}")
    if diff.cycles != (None, None):
        lines.append(f"cycles: {diff.cycles[0]} ({E}) vs {diff.cycles[1]} ({A})")
    lines.append(tally(diff))
    return "\n".join(lines)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def tally(diff) -> str:
    """The report's last line: what matched, by kind (instructions' retire records, output regions),
    and how many items mismatched."""
    kinds = [_count(n, what) for n, what in ((diff.records_matched, "instruction"), (diff.outputs_matched, "output"))
             if n is not None]
    return f"{' and '.join(kinds) if kinds else diff.matched} matched, {diff.mismatched} mismatched"
