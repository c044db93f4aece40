"""Memory image: the one interchange format every engine reads and the compiler writes.

An image is a directory holding ``image.json`` and raw segment files::

    {"format": "vta-memory-image", "version": 1,
     "config":   {<vta_config.json keys>},
     "insn":     {"addr": <byte address of instruction 0>, "count": <N>},
     "segments": [{"addr": <byte address>, "file": "<relative path>"}, ...],
     "outputs":  [{"name": "<name>", "addr": <byte address>, "nbytes": <n>}, ...],
     "expected": [{"name": "<output name>", "file": "<relative path>"}, ...],   # optional
     "expected_counters": {"<fsim counter>": <int>, ...},                     # optional
     "dram_size": <bytes>}                                                    # optional

Everything lives in simulated DRAM as on the device: instructions (16 little-endian bytes each),
micro-ops, inputs, weights.  Instructions address DRAM by element index (byte address / element
bytes of their memory type, hardware spec 2.4).

Loading an image is a security boundary, so the rules are checked *before* anything is read,
written or allocated:

* ``dram_size`` defaults to the end of the highest segment or output, rounded up to 4096; anything
  above :data:`MAX_DRAM_BYTES` (1 GiB) is refused before allocation.
* The instruction address is a multiple of 16, and ``count * 16`` bytes lie inside one segment that
  starts at that address.
* Segments do not overlap; every segment and output lies inside the DRAM; the outputs' sizes
  together stay within :data:`MAX_DRAM_BYTES` (overlapping outputs cannot multiply what is read).
* ``image.json`` is a regular file of at most 64 MiB and strict JSON (no key twice in an object, no
  nesting beyond the recursion limit, no integer beyond 4300 digits: :mod:`vtasim.hw.files`); ``version``
  is the integer 1 (not ``true``, not ``1.0``).
* File names are relative, contain no ``..``, and resolve (symlinks followed) to the same place
  inside the image directory - any symlink on the way is refused.  Each file's size is taken with
  ``os.stat`` and checked before it is read.
* Output names are plain (``[A-Za-z0-9_.-]+``, not ``.`` or ``..``) so ``DIR/<name>.bin`` stays in
  the output directory.

No pickle: JSON and raw bytes only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasim.hw.config import INSN_BYTES, ConfigError, VTAConfig
from vtasim.hw.files import brief, load_json, regular_size
from vtasim.hw.outfiles import open_out, out_dir, write_bytes, write_text
from vtasim.sim.errors import ImageError
from vtasim.sim.result import COUNTER_NAMES

__all__ = ["MAX_DRAM_BYTES", "PAGE_BYTES", "FORMAT", "VERSION", "Segment", "Output", "MemoryImage",
           "check_output_name", "safe_child"]

MAX_DRAM_BYTES = 1 << 30
PAGE_BYTES = 4096
FORMAT = "vta-memory-image"
VERSION = 1
MAX_JSON_BYTES = 64 << 20
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")


class Segment:
    """``nbytes`` bytes at DRAM byte address ``addr``: held in memory (``Segment(addr, data)``) or, for an
    image loaded from a directory, read from its checked file when needed (:meth:`from_file`), so a
    loaded image does not keep a second copy of its DRAM contents next to every engine's DRAM."""

    __slots__ = ("addr", "_data", "_path", "_size")

    def __init__(self, addr: int, data: bytes):
        self.addr, self._data, self._path, self._size = addr, data, None, len(data)

    @classmethod
    def from_file(cls, addr: int, path: Path, nbytes: int) -> "Segment":
        seg = cls(addr, b"")
        seg._data, seg._path, seg._size = None, path, nbytes
        return seg

    @property
    def nbytes(self) -> int:
        return self._size

    @property
    def end(self) -> int:
        return self.addr + self._size

    @property
    def data(self) -> bytes:
        """The segment's bytes (a fresh read for a file-backed segment)."""
        if self._data is not None:
            return self._data
        buf = bytearray(self._size)
        self.read_into(memoryview(buf))
        return bytes(buf)

    def read_into(self, out, count: int | None = None) -> None:
        """Copy the first ``count`` (default all) bytes into the writable buffer ``out``."""
        n = self._size if count is None else count
        if self._data is not None:
            memoryview(out)[:n] = memoryview(self._data)[:n]
            return
        _file_size(self._path, f"segment at {self.addr:#x}")     # still a regular file of bounded size
        with open(self._path, "rb") as f:
            got = f.readinto(memoryview(out)[:n])
            size = os.fstat(f.fileno()).st_size
        if got != n or size != self._size:
            raise ImageError(f"{self._path.name!r} changed size while loading ({size} bytes, expected {self._size})")

    def __eq__(self, other):
        return isinstance(other, Segment) and (self.addr, self._size) == (other.addr, other._size) \
            and self.data == other.data

    __hash__ = None

    def __repr__(self) -> str:
        where = f"file={self._path.name!r}" if self._path is not None else "in memory"
        return f"Segment(addr={self.addr:#x}, nbytes={self._size}, {where})"


@dataclass(frozen=True)
class Output:
    name: str
    addr: int
    nbytes: int

    @property
    def end(self) -> int:
        return self.addr + self.nbytes


def check_output_name(name) -> str:
    """Refuse names that could leave an output directory as ``DIR/<name>.bin``."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ImageError(f"output name {name!r} is not a plain name (rule: [A-Za-z0-9_.-]+, not '.' or '..')")
    return name


def safe_child(base: Path, rel, what: str) -> Path:
    """``base/rel`` if ``rel`` is relative, has no ``..`` and no symlink on the way, else ImageError."""
    if not isinstance(rel, str) or not rel:
        raise ImageError(f"{what}: file {rel!r} must be a non-empty relative path string")
    p = Path(rel)
    if p.is_absolute() or rel.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", rel):
        raise ImageError(f"{what}: file {rel!r} is an absolute path (rule: relative to the image directory)")
    if ".." in p.parts or "\\" in rel:
        raise ImageError(f"{what}: file {rel!r} escapes the image directory (rule: no '..')")
    if "\0" in rel:
        raise ImageError(f"{what}: file {rel!r} contains a NUL byte (rule: a plain relative path)")
    base_r = base.resolve()
    target = base_r.joinpath(*p.parts)
    resolved = target.resolve()
    if resolved != target or not resolved.is_relative_to(base_r):
        raise ImageError(f"{what}: file {rel!r} is or passes through a symlink "
                         f"(rule: files must lie inside the image directory, no links)")
    return resolved


def _int(value, what: str, lo: int = 0, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ImageError(f"{what} = {value!r} must be an integer")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        raise ImageError(f"{what} = {value} is out of range [{lo}, {hi if hi is not None else 'inf'}]")
    return value


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


class MemoryImage:
    """Config + DRAM contents (segments) + instruction location + named output regions.

    Construction validates every rule of the module docstring; an image object is always sane."""

    def __init__(self, cfg: VTAConfig, insn_addr: int, insn_count: int, segments, outputs=(),
                 expected=None, dram_size: int | None = None, expected_counters=None):
        if not isinstance(cfg, VTAConfig):
            raise ImageError(f"config must be a VTAConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.insn_addr = _int(insn_addr, "insn.addr", 0, MAX_DRAM_BYTES)
        self.insn_count = _int(insn_count, "insn.count", 0, MAX_DRAM_BYTES // INSN_BYTES)
        self.segments = sorted((s if isinstance(s, Segment) and s._path is not None
                                else Segment(_int(s.addr, "segment addr", 0, MAX_DRAM_BYTES), bytes(s.data))
                                for s in segments), key=lambda s: s.addr)
        self.outputs = [Output(check_output_name(o.name), _int(o.addr, f"output {o.name!r} addr", 0, MAX_DRAM_BYTES),
                               _int(o.nbytes, f"output {o.name!r} nbytes", 0, MAX_DRAM_BYTES)) for o in outputs]
        self.expected = dict(expected or {})
        self.expected_counters = _check_counters(expected_counters)
        self.explicit_dram_size = dram_size
        self.dram_size = self._check_layout(
            [(s.addr, s.nbytes) for s in self.segments], dram_size)
        self._check_outputs()

    # ---- validation shared with load() (which checks before reading files) -------------------
    def _check_layout(self, extents, dram_size):
        return check_layout(self.insn_addr, self.insn_count, extents,
                            [(o.name, o.addr, o.nbytes) for o in self.outputs], dram_size)

    def _check_outputs(self):
        names = set()
        for o in self.outputs:
            if o.name in names:
                raise ImageError(f"output {o.name!r} is declared twice")
            names.add(o.name)
        for name, data in self.expected.items():
            out = self.output(name)
            if len(data) != out.nbytes:
                raise ImageError(f"expected {name!r} has {len(data)} bytes, the output region has {out.nbytes}")
            self.expected[name] = bytes(data)

    def output(self, name: str) -> Output:
        for o in self.outputs:
            if o.name == name:
                return o
        raise ImageError(f"no output named {name!r} (outputs: {', '.join(o.name for o in self.outputs) or 'none'})")

    # ---- contents ------------------------------------------------------------------------------
    def dram(self) -> np.ndarray:
        """A fresh simulated DRAM (``np.uint8``, ``dram_size`` bytes) with every segment laid in.

        File-backed segments are read straight into it: the DRAM is the only full-size copy."""
        mem = np.zeros(self.dram_size, dtype=np.uint8)
        for s in self.segments:
            s.read_into(mem[s.addr:s.end])
        return mem

    def insn_bytes(self) -> bytes:
        """The ``insn_count * 16`` raw instruction bytes."""
        if not self.insn_count:
            return b""
        seg = next(s for s in self.segments if s.addr == self.insn_addr)   # guaranteed by check_layout
        n = self.insn_count * INSN_BYTES
        if seg._data is not None:
            return seg._data if len(seg._data) == n else seg._data[:n]
        buf = bytearray(n)
        seg.read_into(memoryview(buf), n)
        return bytes(buf)

    def insn_words(self) -> np.ndarray:
        """The instructions as a read-only ``uint64[count, 2]`` array (little-endian 64-bit halves)
        sharing the in-memory segment's bytes when it can (no copy)."""
        raw = self.insn_bytes()
        words = np.frombuffer(raw, dtype="<u8") if len(raw) else np.zeros(0, "<u8")
        if not words.flags.aligned:
            words = words.copy()
        return words.reshape(-1, 2)

    def output_bytes(self, dram: np.ndarray, name: str) -> bytes:
        o = self.output(name)
        return bytes(np.asarray(dram, dtype=np.uint8)[o.addr:o.end])

    def relocated(self, base: int) -> "MemoryImage":
        """The same program placed ``base`` bytes higher in DRAM (as a driver that gets its buffer at a
        physical address other than 0 needs it, TVM's fsim for one): every segment, output and the
        instructions move up by ``base``, and every LOAD's and STORE's ``dram_base`` (counted in
        elements of its memory type) with them.  ``base`` must be a multiple of every element size the
        program's LOADs and STOREs use (a 4096-byte page is, on every config) and the moved addresses
        must fit their fields: otherwise one-line :class:`ImageError`."""
        from vtasim.hw.isa import OP_LOAD, OP_STORE, IsaError, decode_stream, encode_stream
        from vtasim.hw.config import MEM_NAMES
        base = _int(base, "relocation base", 0, MAX_DRAM_BYTES - self.dram_size)
        insns = decode_stream(self.cfg, self.insn_bytes())
        for k, insn in enumerate(insns):
            if insn.opcode in (OP_LOAD, OP_STORE):
                elem = self.cfg.dram_elem_bytes(insn.memory_type)
                if base % elem:
                    raise ImageError(f"relocation base {base:#x} is not a multiple of the {elem}-byte "
                                     f"{MEM_NAMES[insn.memory_type]} elements instruction {k} moves")
                insn.dram_base += base // elem
        try:
            raw = encode_stream(self.cfg, insns)
        except IsaError as exc:
            raise ImageError(f"relocation by {base:#x}: {exc}") from None
        segments = []
        for seg in self.segments:
            data = seg.data
            if seg.addr == self.insn_addr:
                data = raw + data[len(raw):]
            segments.append(Segment(seg.addr + base, data))
        return MemoryImage(self.cfg, self.insn_addr + base, self.insn_count, segments,
                           [Output(o.name, o.addr + base, o.nbytes) for o in self.outputs], self.expected,
                           None if self.explicit_dram_size is None else self.explicit_dram_size + base,
                           self.expected_counters)

    def outputs_from(self, dram: np.ndarray) -> "OutputBytes":
        """``{name: bytes}`` of the output regions of ``dram``, each copied out only when it is read
        (one at a time: a run's outputs never all live next to its DRAM)."""
        return OutputBytes(self.outputs, dram)

    # ---- files ---------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write ``image.json`` and one file per segment / expected output into directory ``path``."""
        d = out_dir(path, "image directory")     # a real directory; no file written through a link
        segs = []
        for i, s in enumerate(self.segments):
            fname = f"seg{i:03d}_{s.addr:08x}.bin"
            _write_segment(d / fname, s)
            segs.append({"addr": s.addr, "file": fname})
        exp = []
        for name, data in self.expected.items():
            fname = f"expected_{name}.bin"
            write_bytes(d / fname, data, "image file")
            exp.append({"name": name, "file": fname})
        doc = {"format": FORMAT, "version": VERSION, "config": self.cfg.to_dict(),
               "insn": {"addr": self.insn_addr, "count": self.insn_count},
               "segments": segs,
               "outputs": [{"name": o.name, "addr": o.addr, "nbytes": o.nbytes} for o in self.outputs]}
        if exp:
            doc["expected"] = exp
        if self.explicit_dram_size is not None:
            doc["dram_size"] = self.dram_size
        if self.expected_counters is not None:
            doc["expected_counters"] = dict(self.expected_counters)
        write_text(d / "image.json", json.dumps(doc, indent=1) + "\n", "image file")
        return d

    @classmethod
    def load(cls, path) -> "MemoryImage":
        d = Path(path)
        meta = d / "image.json"
        # a regular file (no FIFO, device or link) of at most MAX_JSON_BYTES, strict JSON (vtasim.hw.files)
        doc = load_json(meta, "image", MAX_JSON_BYTES, limit="MAX_JSON_BYTES", error=ImageError,
                        follow_symlinks=False)
        if not isinstance(doc, dict):
            raise ImageError(f"{meta}: top level must be a JSON object")
        if doc.get("format") != FORMAT:
            raise ImageError(f"{meta}: format = {brief(doc.get('format'))}, expected {FORMAT!r}")
        version = doc.get("version")
        if type(version) is not int or version != VERSION:    # not true, not 1.0: the integer
            raise ImageError(f"{meta}: version = {brief(version)}, this reader knows {VERSION} "
                             f"(rule: the JSON integer {VERSION})")
        unknown = sorted(set(doc) - {"format", "version", "config", "insn", "segments", "outputs",
                                     "expected", "dram_size", "expected_counters"})
        if unknown:
            raise ImageError(f"{meta}: unknown key {brief(unknown[0])}")
        try:
            cfg = VTAConfig.from_dict(doc.get("config"), source=f"{meta} config")
        except ConfigError as exc:
            raise ImageError(str(exc)) from None
        insn = doc.get("insn")
        if not isinstance(insn, dict) or set(insn) != {"addr", "count"}:
            raise ImageError(f"{meta}: 'insn' must be an object with exactly 'addr' and 'count'")
        insn_addr = _int(insn["addr"], "insn.addr", 0, MAX_DRAM_BYTES)
        insn_count = _int(insn["count"], "insn.count", 0, MAX_DRAM_BYTES // INSN_BYTES)

        files = []           # (addr, path, size): everything is checked before anything is read
        for i, s in enumerate(_list(doc, "segments", meta)):
            if not isinstance(s, dict) or set(s) != {"addr", "file"}:
                raise ImageError(f"{meta}: segments[{i}] must be an object with exactly 'addr' and 'file'")
            addr = _int(s["addr"], f"segments[{i}].addr", 0, MAX_DRAM_BYTES)
            p = safe_child(d, s["file"], f"segments[{i}]")
            files.append((addr, p, _file_size(p, f"segments[{i}]")))
        outputs = []
        for i, o in enumerate(_list(doc, "outputs", meta)):
            if not isinstance(o, dict) or set(o) != {"name", "addr", "nbytes"}:
                raise ImageError(f"{meta}: outputs[{i}] must be an object with exactly 'name', 'addr', 'nbytes'")
            outputs.append(Output(check_output_name(o["name"]),
                                  _int(o["addr"], f"outputs[{i}].addr", 0, MAX_DRAM_BYTES),
                                  _int(o["nbytes"], f"outputs[{i}].nbytes", 0, MAX_DRAM_BYTES)))
        out_sizes = {o.name: o.nbytes for o in outputs}
        exp_files = []
        for i, e in enumerate(_list(doc, "expected", meta)):
            if not isinstance(e, dict) or set(e) != {"name", "file"}:
                raise ImageError(f"{meta}: expected[{i}] must be an object with exactly 'name' and 'file'")
            check_output_name(e["name"])
            if any(name == e["name"] for name, _ in exp_files):
                raise ImageError(f"{meta}: expected[{i}] names {e['name']!r} a second time (one entry per output)")
            if e["name"] not in out_sizes:
                raise ImageError(f"{meta}: expected[{i}] names {e['name']!r}, which is not an output")
            p = safe_child(d, e["file"], f"expected[{i}]")
            size = _file_size(p, f"expected[{i}]")
            if size != out_sizes[e["name"]]:
                raise ImageError(f"expected[{i}] file {e['file']!r} has {size} bytes, "
                                 f"output {e['name']!r} has {out_sizes[e['name']]}")
            exp_files.append((e["name"], p))
        dram_size = doc.get("dram_size")
        if dram_size is not None:
            dram_size = _int(dram_size, "dram_size", 0, MAX_DRAM_BYTES)
        check_layout(insn_addr, insn_count, [(a, n) for a, _, n in files],
                     [(o.name, o.addr, o.nbytes) for o in outputs], dram_size)

        segments = [Segment.from_file(a, p, n) for a, p, n in files]     # read when a DRAM is built
        expected = {name: _read_exact(p, out_sizes[name]) for name, p in exp_files}
        return cls(cfg, insn_addr, insn_count, segments, outputs, expected, dram_size,
                   _check_counters(doc.get("expected_counters")))


class OutputBytes(Mapping):
    """Read-only ``{output name: bytes}`` over a DRAM array; each value is copied out when it is read.

    Compares equal to any mapping with the same names and bytes, one output at a time."""

    def __init__(self, outputs, dram: np.ndarray):
        self._outputs = {o.name: o for o in outputs}
        self._dram = np.asarray(dram, dtype=np.uint8)

    def __getitem__(self, name) -> bytes:
        o = self._outputs[name]
        return bytes(self._dram[o.addr:o.end])

    def __iter__(self):
        return iter(self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def __eq__(self, other):
        if not isinstance(other, Mapping):
            return NotImplemented
        if set(self) != set(other):
            return False
        if isinstance(other, OutputBytes):
            return all(np.array_equal(self.view(k), other.view(k)) for k in self)
        for k in self:
            theirs = other[k]
            if not isinstance(theirs, (bytes, bytearray, memoryview)) or len(theirs) != self._outputs[k].nbytes:
                return False
            if not np.array_equal(self.view(k), np.frombuffer(theirs, np.uint8)):
                return False
        return True

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def view(self, name) -> np.ndarray:
        """The output region as a ``uint8`` view of the DRAM (no copy)."""
        o = self._outputs[name]
        return self._dram[o.addr:o.end]

    def __repr__(self) -> str:
        return "OutputBytes({" + ", ".join(f"{k!r}: <{o.nbytes} bytes>" for k, o in self._outputs.items()) + "})"


def _write_segment(path: Path, seg: Segment, chunk: int = 16 << 20) -> None:
    """Write a segment's bytes to ``path`` without a whole extra copy of a file-backed segment."""
    if seg._data is not None:
        write_bytes(path, seg._data, "image file")
        return
    if not path.is_symlink() and path.resolve() == seg._path:   # saving over the file it is read from
        return
    buf = np.empty(min(chunk, max(seg.nbytes, 1)), np.uint8)
    with open(seg._path, "rb") as src, open_out(path, "wb", "image file") as dst:
        left = seg.nbytes
        while left:
            got = src.readinto(memoryview(buf)[:min(left, buf.size)])
            if not got:
                raise ImageError(f"{seg._path.name!r} changed size while saving (expected {seg.nbytes} bytes)")
            dst.write(memoryview(buf)[:got])
            left -= got


def check_layout(insn_addr, insn_count, extents, outputs, dram_size=None) -> int:
    """Check the address rules; return the DRAM size.  ``extents``: (addr, nbytes) per segment."""
    if insn_addr % INSN_BYTES:
        raise ImageError(f"insn.addr = {insn_addr:#x} is not a multiple of {INSN_BYTES} (instruction alignment)")
    ext = sorted(extents)
    for (a0, n0), (a1, n1) in zip(ext, ext[1:]):
        if a0 + n0 > a1:
            raise ImageError(f"segments overlap: [{a0:#x}, {a0 + n0:#x}) and [{a1:#x}, {a1 + n1:#x})")
    for a, n in ext:
        if a + n > MAX_DRAM_BYTES:
            raise ImageError(f"segment at {a:#x} of {n} bytes ends at {a + n:#x}, beyond the "
                             f"{MAX_DRAM_BYTES:#x}-byte DRAM limit (MAX_DRAM_BYTES)")
    for name, a, n in outputs:
        if a + n > MAX_DRAM_BYTES:
            raise ImageError(f"output {name!r} at {a:#x} of {n} bytes ends at {a + n:#x}, beyond the "
                             f"{MAX_DRAM_BYTES:#x}-byte DRAM limit (MAX_DRAM_BYTES)")
    total = sum(n for _, _, n in outputs)
    if total > MAX_DRAM_BYTES:       # each output (and its expected file) becomes its own bytes object
        raise ImageError(f"outputs total {total} bytes, more than MAX_DRAM_BYTES = {MAX_DRAM_BYTES} "
                         f"(rule: output regions together fit the DRAM limit)")
    high = max([a + n for a, n in ext] + [a + n for _, a, n in outputs] + [0])
    if dram_size is None:
        dram_size = _round_up(high, PAGE_BYTES)
    if dram_size > MAX_DRAM_BYTES:
        raise ImageError(f"dram_size = {dram_size} exceeds MAX_DRAM_BYTES = {MAX_DRAM_BYTES}")
    if high > dram_size:
        raise ImageError(f"segments/outputs reach byte {high:#x}, beyond dram_size = {dram_size:#x}")
    if insn_count:
        need = insn_count * INSN_BYTES
        seg = [(a, n) for a, n in ext if a == insn_addr]
        if not seg:
            raise ImageError(f"no segment starts at insn.addr = {insn_addr:#x} (instructions are a segment)")
        if seg[0][1] < need:
            raise ImageError(f"insn.count = {insn_count} needs {need} bytes but the instruction segment at "
                             f"{insn_addr:#x} has {seg[0][1]} (count larger than the segment)")
    return dram_size


def _check_counters(c):
    """Optional fsim counters the run must reproduce: {COUNTER_NAMES member: int}."""
    if c is None:
        return None
    if not isinstance(c, dict):
        raise ImageError(f"expected_counters must be an object, got {type(c).__name__}")
    for k, v in c.items():
        if k not in COUNTER_NAMES:
            raise ImageError(f"expected_counters key {k!r} is not one of {', '.join(COUNTER_NAMES)}")
        _int(v, f"expected_counters.{k}")
    return dict(c)


def _list(doc, key, meta):
    v = doc.get(key, [])
    if not isinstance(v, list):
        raise ImageError(f"{meta}: {key!r} must be a list")
    return v


def _file_size(p: Path, what: str) -> int:
    return regular_size(p, what, MAX_DRAM_BYTES, limit="MAX_DRAM_BYTES", error=ImageError,
                        follow_symlinks=False, shown=repr(p.name))


def _read_exact(p: Path, n: int) -> bytes:
    with open(p, "rb") as f:
        data = f.read(n + 1)
    if len(data) != n:
        raise ImageError(f"{p.name!r} changed size while loading ({len(data)} bytes, expected {n})")
    return data
