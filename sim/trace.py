"""Retire traces and statistics on disk: CSV records, Chrome trace-event JSON, breakdown tables.

* :func:`write_csv` / :func:`read_csv`: one row per :class:`~vtasim.sim.result.RetireRecord`
  (docs/timing.md 9), header ``module,index_in_module,program_index,opcode,start_cycle,end_cycle,digest``
  with the digest as 8 hex digits, so traces from the model and the RTL compare as text.
* :func:`write_perfetto`: Chrome trace-event format (``{"traceEvents": [...]}``), one "X" (complete)
  event per instruction on lanes fetch / load / compute / store of one process.  ``ts`` and ``dur``
  are cycles.  The format has no cycle unit: its readers (ui.perfetto.dev, chrome://tracing) take
  ``ts`` as microseconds whatever ``displayTimeUnit`` says (which accepts only "ms"/"ns" and changes
  the legacy viewer's display, never the reading), so every "us" the viewer shows is one cycle.  The
  file says so where a reader looks: the process is named ``<engine> (1 us shown = 1 cycle)``,
  ``otherData`` carries ``time_unit: "cycle"`` and a note, and each slice's args repeat its first and
  last cycle exactly.  No ``displayTimeUnit`` is written (the default, "ms", keeps the legacy viewer's
  display in the same units as Perfetto's).
* :func:`breakdown_table`: the per-module bucket table of docs/timing.md 8 as text.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from vtasim.hw.isa import OPCODE_NAMES
from vtasim.hw.outfiles import open_out, write_text
from vtasim.sim.result import RetireRecord
from vtasim.waveforms.breakdown import BUCKETS, share_text, shares

__all__ = ["CSV_HEADER", "TIME_NOTE", "process_name", "write_csv", "read_csv", "perfetto_events", "write_perfetto",
           "write_run", "breakdown_table"]

CSV_HEADER = ("module", "index_in_module", "program_index", "opcode", "start_cycle", "end_cycle", "digest")
LANES = ("fetch", "load", "compute", "store")
TIME_NOTE = ("ts and dur are accelerator cycles; trace viewers read them as microseconds, "
             "so 1 us on the time axis is 1 cycle")


def process_name(engine: str) -> str:
    """The Perfetto process (track group) name: the engine and how to read the time axis."""
    return f"{engine} (1 us shown = 1 cycle)"


def write_csv(path, records) -> Path:
    path = Path(path)
    with open_out(path, "w", "--trace file", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_HEADER)
        for r in records:
            w.writerow((r.module, r.index_in_module, r.program_index, r.opcode, r.start_cycle, r.end_cycle,
                        f"{r.digest:08x}"))
    return path


def read_csv(path) -> list:
    with Path(path).open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows or tuple(rows[0]) != CSV_HEADER:
        raise ValueError(f"{path}: not a vtasim retire trace (header must be {','.join(CSV_HEADER)})")
    return [RetireRecord(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6], 16))
            for r in rows[1:]]


def perfetto_events(result) -> list:
    """Trace events of a cycle-engine :class:`~vtasim.sim.result.RunResult` (records + fetch chunks)."""
    ev = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": process_name(result.engine)}}]
    for tid, lane in enumerate(LANES):
        ev.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": lane}})
        ev.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    for k, (first, done) in enumerate(result.fetch_chunks or ()):
        if first >= 0 and done >= 0:
            ev.append({"ph": "X", "pid": 1, "tid": 0, "name": f"chunk {k}", "ts": first,
                       "dur": done - first + 1, "args": {"chunk": k, "start_cycle": first, "end_cycle": done}})
    for r in result.trace or ():
        ev.append({"ph": "X", "pid": 1, "tid": LANES.index(r.module), "name": OPCODE_NAMES.get(r.opcode, "?"),
                   "ts": r.start_cycle, "dur": r.end_cycle - r.start_cycle + 1,
                   "args": {"program_index": r.program_index, "index_in_module": r.index_in_module,
                            "start_cycle": r.start_cycle, "end_cycle": r.end_cycle, "digest": f"{r.digest:08x}"}})
    return ev


def write_perfetto(path, result) -> Path:
    path = Path(path)
    write_text(path, json.dumps({"traceEvents": perfetto_events(result),
                                 "otherData": {"cycles": result.cycles, "time_unit": "cycle", "note": TIME_NOTE}}),
               "--perfetto file")
    return path


def write_run(result, trace=None, perfetto=None) -> None:
    """The trace files of one run (the one writer every engine's ``trace``/``perfetto`` go through,
    :func:`vtasim.sim.engines.run_engine`): ``trace`` the CSV of its retire records, ``perfetto`` the
    trace-event JSON; None writes nothing."""
    if trace is not None:
        write_csv(trace, result.trace)
    if perfetto is not None:
        write_perfetto(perfetto, result)


def breakdown_table(breakdown: dict, cycles: int) -> str:
    """Text table: one row per module, one column per bucket, with percentages of ``cycles``
    (:func:`vtasim.waveforms.breakdown.shares`, which the timeline plot reads too)."""
    rows = shares(breakdown, cycles)
    lines = [f"{'module':<8}" + "".join(f"{b:>20}" for b in BUCKETS)]
    for mod, row in rows.items():
        lines.append(f"{mod:<8}" + "".join(f"{n:>13,} {share_text(pct):>6}" for n, pct in row.values()))
    return "\n".join(lines)
