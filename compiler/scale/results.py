"""The results CSV: one row per finished point, appended and flushed as each point finishes (a crash
loses at most the row being written; a torn last line is cut off when the file is reopened), read
back to resume (a point whose ``key`` is present is finished, whatever its status).

Reading is strict (``vtasim.hw.files.iter_csv``: a regular file of at most :data:`MAX_RESULTS_BYTES`, UTF-8,
the header of :data:`COLUMNS`, one field per column, fields of at most :data:`MAX_FIELD` characters)
and every row is checked (:func:`check_row`): a status of ``ok``/``skipped``/``error``, a catalogue
workload, a reduce and config values that are integers, a knob source, and finite non-negative
numbers in the metric columns (required when the status is ``ok``).  A bad row is one error naming
the line, the column and the rule."""

from __future__ import annotations

import csv
import math
import os
import re
from pathlib import Path

from vtasim.hw.config import CONFIG_KEYS
from vtasim.hw.files import brief, iter_csv, regular_size
from vtasim.hw.outfiles import check_out, open_out
from vtasim.compiler.scale.spec import KNOB_SOURCES, SpecError

__all__ = ["COLUMNS", "CONFIG_COLUMNS", "STATUSES", "MAX_RESULTS_BYTES", "MAX_FIELD", "read_rows", "check_row",
           "finished_keys", "ResultsWriter", "cut_torn_tail"]

MAX_RESULTS_BYTES = 64 << 20    # ~30k rows of ~2 kB: three times MAX_POINTS
MAX_FIELD = 1 << 16             # the longest field (the counters' JSON) is about 1 kB
STATUSES = ("ok", "skipped", "error")
_INT_COLUMNS = ("cycles", "gemm_uops", "alu_uops", "dram_bytes", "sram_bytes", "macs", "area_proxy", "insns")
_FLOAT_COLUMNS = ("gemm_util", "macs_per_cycle", "seconds")
_INT = re.compile(r"-?[0-9]{1,19}$", re.ASCII)
_STR_KEYS = {k.name for k in CONFIG_KEYS if k.type is str}

CONFIG_COLUMNS = [k.name for k in CONFIG_KEYS]
COLUMNS = (["key", "status", "reason", "workload", "reduce", "knobs"] + CONFIG_COLUMNS +
           ["bitstream", "cycles", "gemm_uops", "alu_uops", "gemm_util", "dram_bytes", "sram_bytes", "macs",
            "macs_per_cycle", "area_proxy", "insns", "seconds", "knob_detail", "knob_values", "counters"])


def cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline (the row being written when the process died); the file is
    searched backwards from its end, never read whole."""
    with open_out(path, "r+b", "results file") as f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return
        f.seek(end - 1)
        if f.read(1) == b"\n":
            return
        pos = end
        while pos > 0:
            start = max(0, pos - (1 << 16))
            f.seek(start)
            k = f.read(pos - start).rfind(b"\n")
            if k >= 0:
                f.truncate(start + k + 1)
                return
            pos = start
        f.truncate(0)


def _bad(path, line: int, column: str, value, rule: str) -> SpecError:
    return SpecError(f"results file {path}: line {line}: {column} = {brief(value)} {rule} "
                     f"(rule: the rows vtasim sweep writes)")


def check_row(row: dict, path, line: int, _known: set | None = None) -> dict:
    """``row`` if every column holds what vtasim sweep writes (see the module docstring), else a SpecError."""
    from vtasim.compiler.tuning.workloads import parse_workload
    if row["status"] not in STATUSES:
        raise _bad(path, line, "status", row["status"], f"is not one of {', '.join(STATUSES)}")
    if not row["key"]:
        raise _bad(path, line, "key", "", "is empty (rule: every row has its point's key)")
    if _known is None or row["workload"] not in _known:
        try:
            parse_workload(row["workload"])
        except SpecError:
            raise
        except ValueError as exc:
            raise SpecError(f"results file {path}: line {line}: workload: {exc}") from None
        if _known is not None:
            _known.add(row["workload"])
    if not _INT.match(row["reduce"]) or not 1 <= int(row["reduce"]) <= 1 << 16:
        raise _bad(path, line, "reduce", row["reduce"], "must be an integer in [1, 65536]")
    if row["knobs"] not in KNOB_SOURCES:
        raise _bad(path, line, "knobs", row["knobs"], f"is not one of {', '.join(KNOB_SOURCES)}")
    for k in CONFIG_COLUMNS:
        if k not in _STR_KEYS and not _INT.match(row[k]):
            raise _bad(path, line, k, row[k], "must be an integer (a config value)")
    ok = row["status"] == "ok"
    for k in _INT_COLUMNS + _FLOAT_COLUMNS:
        v = row[k]
        if v == "" and not (ok or k in ("sram_bytes", "area_proxy")):
            continue
        if k in _INT_COLUMNS:
            good = bool(_INT.match(v)) and int(v) >= (1 if k == "cycles" else 0)
        else:
            try:
                good = len(v) <= 40 and math.isfinite(float(v)) and float(v) >= 0
            except ValueError:
                good = False
        if not good:
            kind = "a positive integer" if k == "cycles" else "a non-negative integer" if k in _INT_COLUMNS else \
                "a finite number >= 0"
            raise _bad(path, line, k, v, f"must be {kind}{' (status ok)' if ok else ''}")
    return row


def read_rows(path) -> list[dict]:
    """Every complete row of a results file, each checked by :func:`check_row` (a torn last line, the row
    being written when a sweep died, is ignored)."""
    path = Path(path)
    if not os.path.lexists(path):
        return []
    known: set = set()
    return [check_row(row, path, line, known)
            for line, row in iter_csv(path, "results file", MAX_RESULTS_BYTES, COLUMNS, max_field=MAX_FIELD,
                                      limit="MAX_RESULTS_BYTES", error=SpecError)]


def finished_keys(path) -> set:
    return {r["key"] for r in read_rows(path)}


class ResultsWriter:
    """Append rows to ``path`` (header written when the file is new); each row is flushed and fsynced."""

    def __init__(self, path):
        self.path = check_out(path, "results file")    # never written through a link (vtasim.hw.outfiles)
        if os.path.lexists(self.path):          # never a FIFO, a device or a directory
            regular_size(self.path, "results file", MAX_RESULTS_BYTES, limit="MAX_RESULTS_BYTES", error=SpecError)
        if self.path.exists() and self.path.stat().st_size:
            cut_torn_tail(self.path)
            read_rows(self.path)                    # header and rows checked
        new = not self.path.exists() or self.path.stat().st_size == 0     # (a torn header leaves it empty)
        self._f = open_out(self.path, "a", "results file", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=COLUMNS, restval="", extrasaction="raise")
        if new:
            self._w.writeheader()
            self._sync()

    def _sync(self):
        self._f.flush()
        os.fsync(self._f.fileno())

    def append(self, row: dict) -> None:
        self._w.writerow(row)
        self._sync()

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
