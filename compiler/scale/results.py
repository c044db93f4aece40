"""The results CSV: one row per finished point, appended and flushed as each point finishes (a crash
loses at most the row being written; a torn last line is cut off when the file is reopened), read
back to resume (a point whose ``key`` is present is finished, whatever its status)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from hw.config import _ALL_KEYS
from hw.outfiles import check_out, open_out
from compiler.scale.spec import SpecError

__all__ = ["COLUMNS", "CONFIG_COLUMNS", "read_rows", "finished_keys", "ResultsWriter"]

CONFIG_COLUMNS = [k[0] for k in _ALL_KEYS]
COLUMNS = (["key", "status", "reason", "workload", "reduce", "knobs"] + CONFIG_COLUMNS +
           ["bitstream", "cycles", "gemm_uops", "alu_uops", "gemm_util", "dram_bytes", "sram_bytes", "macs",
            "macs_per_cycle", "area_proxy", "insns", "seconds", "knob_detail", "knob_values", "counters"])


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline (the row being written when the process died)."""
    with open_out(path, "r+b", "results file") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        data = path.read_bytes()
        f.truncate(data.rfind(b"\n") + 1)


def read_rows(path) -> list[dict]:
    """Every complete row of a results file (rows with missing fields are ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            raise SpecError(f"results file {path}: its header is not vtasim sweep's ({len(COLUMNS)} columns "
                            f"starting key,status,...); use another --out file")
        return [r for r in reader if None not in r.values() and None not in r]


def finished_keys(path) -> set:
    return {r["key"] for r in read_rows(path)}


class ResultsWriter:
    """Append rows to ``path`` (header written when the file is new); each row is flushed and fsynced."""

    def __init__(self, path):
        self.path = check_out(path, "results file")    # never written through a link (hw.outfiles)
        new = not self.path.exists() or self.path.stat().st_size == 0
        if not new:
            _cut_torn_tail(self.path)
            read_rows(self.path)                    # header check
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
