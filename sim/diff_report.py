"""Text of a ``vtasim diff`` report (see :mod:`sim.diff` for what is compared)."""

from __future__ import annotations

import numpy as np

from hw.disasm import one_line
from hw.isa import MODULE_NAMES, decode
from sim.diff import LAST_N, WINDOW_CYCLES, machine_state, opcode_name

__all__ = ["render", "format_record"]


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
    st = machine_state(program, result.trace, result.extra.get("dispatch_cycle"), t)
    q = st["queues"]
    qtxt = " ".join(f"{k} {v}" for k, v in q.items()) if q is not None else "(no dispatch cycles recorded)"
    ttxt = " ".join(f"{k} {v}" for k, v in st["tokens"].items())
    run = ", ".join(f"{m} " + (f"insn {r.program_index} ({opcode_name(r.opcode)} {r.start_cycle}..{r.end_cycle})"
                               if r else "idle") for m, r in st["running"].items())
    return [f"  {tag:<8} queues: {qtxt}", f"  {'':<8} tokens: {ttxt}", f"  {'':<8} running: {run}"]


def _lanes(arr: np.ndarray) -> str:
    return "[" + " ".join(str(int(v)) for v in arr) + "]"


def _waves_lines(diff, cycle):
    lo, hi = max(0, cycle - WINDOW_CYCLES), cycle + WINDOW_CYCLES
    out = [f"waveform window: cycles {lo}..{hi}"]
    rtl = diff.actual_result if diff.actual_result is not None and diff.actual_result.engine == "rtl" else None
    if rtl is not None and rtl.extra.get("launch_ns") is not None:
        # The model VCD is written on the RTL's time base (launch time + cycle * clock period).
        t0, p = rtl.extra["launch_ns"], rtl.extra["clock_ns"]
        span = f"time {t0 + lo * p:g}..{t0 + hi * p:g} ns"
    else:
        span = f"time {lo * 10}..{hi * 10} ns"
    for side, res in (("expected", diff.expected_result), ("actual", diff.actual_result)):
        path = diff.waves.get(side) or (res.extra.get("waves") if res is not None else None)
        if path:
            out.append(f"  {side} ({res.engine}): {path}  {span}")
    if diff.waves.get("gtkw"):
        out.append(f"  gtkwave {diff.waves['gtkw']}   (opens the RTL waves zoomed on this window)")
    if len(out) == 1:
        out.append("  (no waveforms recorded: add --waves to write rtl.vcd and model.vcd)")
    return out


def render(diff) -> str:
    image, cfg = diff.image, diff.image.cfg
    E, A = diff.expected_engine, diff.actual_engine
    lines = [f"vtasim diff: {E} (expected) vs {A} (actual), {image.insn_count} instructions"]
    if diff.error:
        lines.append(f"{A.upper()} ERROR: {diff.error}")
    first = diff.first
    if first is not None:
        from sim.program import load_program
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
                  f"  element {d.offset // d.elem_bytes} lanes expected {_lanes(d.expected)}",
                  f"  element {d.offset // d.elem_bytes} lanes actual   {_lanes(d.actual)}"]
    if diff.reproduce:
        lines.append(f"reproduce: {diff.reproduce}")
    if diff.cycles != (None, None):
        lines.append(f"cycles: {diff.cycles[0]} ({E}) vs {diff.cycles[1]} ({A})")
    lines.append(f"{diff.matched} matched, {diff.mismatched} mismatched")
    return "\n".join(lines)
