"""Import TVM artefacts into a memory image.

(a) Raw buffers: the instruction buffer TVM's runtime hands to ``VTADeviceRun`` (16-byte
    little-endian instructions) plus DRAM contents (uop buffer, inputs, weights ...) given as
    ``file@address`` pairs, with a config -> :class:`~vtasim.sim.image.MemoryImage`.  Instructions already
    hold absolute element addresses (``dram_base``), so data files must be placed at the byte
    addresses the runtime used.
(b) Text: TVM's ``DUMP_INSN`` output -> instructions.  That text lacks fields (ALU immediates,
    ``use_imm`` of SHR/MUL, the memory type of ACC_8BIT loads); each missing field is reported as a
    Python warning (the CLI prints them on stderr) and filled with 0 (ACC_8BIT for a nameless LOAD).

Output regions are declared as ``name@address:nbytes``; no DRAM region is guessed.  Every input is
a regular file of bounded size (:mod:`vtasim.hw.files`), and a stream of 0 instructions (an empty buffer, a
dump of only other text) is refused here rather than written as an image no engine runs.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from vtasim.hw.config import INSN_BYTES, load_config
from vtasim.hw.disasm import assemble
from vtasim.hw.files import brief, read_regular
from vtasim.hw.isa import decode_stream, encode_stream
from vtasim.sim.errors import ImageError
from vtasim.sim.image import MAX_DRAM_BYTES, MemoryImage, Output, Segment, check_output_name

__all__ = ["from_buffers", "from_dump_text", "parse_placement", "parse_output", "add_arguments", "import_cli",
           "MAX_DUMP_BYTES"]

MAX_DUMP_BYTES = 64 << 20     # DUMP_INSN text: about 200k instructions (--insn and --dram: MAX_DRAM_BYTES)


class TvmImportWarning(UserWarning):
    """A field TVM's text dump does not contain was filled with a default."""


def _num(text: str, what: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise ImageError(f"{what}: {brief(text)} is not a number (decimal or 0x hex, at most 4300 digits)") from None
    if not 0 <= v <= MAX_DRAM_BYTES:
        raise ImageError(f"{what}: {v} is out of range [0, MAX_DRAM_BYTES = {MAX_DRAM_BYTES}]")
    return v


def parse_placement(spec: str):
    """``FILE@ADDR`` -> (path, byte address)."""
    path, sep, addr = spec.rpartition("@")
    if not sep or not path:
        raise ImageError(f"--dram {brief(spec)}: expected FILE@ADDRESS (e.g. dram.bin@0x1000)")
    return Path(path), _num(addr, f"--dram {brief(spec)} address")


def parse_output(spec: str) -> Output:
    """``NAME@ADDR:NBYTES`` -> Output."""
    m = re.fullmatch(r"([^@]+)@([^:]+):(.+)", spec)
    if not m:
        raise ImageError(f"--output {brief(spec)}: expected NAME@ADDRESS:NBYTES (e.g. out@0x8000:1024)")
    return Output(check_output_name(m.group(1)), _num(m.group(2), f"--output {brief(spec)} address"),
                  _num(m.group(3), f"--output {brief(spec)} size"))


def _read(path: Path, what: str, max_bytes: int = MAX_DRAM_BYTES, limit: str = "MAX_DRAM_BYTES") -> bytes:
    """A regular file of at most ``max_bytes`` (vtasim.hw.files: no FIFO, no /dev/zero)."""
    return read_regular(path, what, max_bytes, limit=limit, error=ImageError, shown=repr(str(path)))


def from_buffers(cfg, insn: bytes, insn_addr: int, dram=(), outputs=(), dram_size=None) -> MemoryImage:
    """Raw instruction bytes + [(bytes, addr)] DRAM contents -> MemoryImage (checked decodable)."""
    if len(insn) % INSN_BYTES:
        raise ImageError(f"instruction buffer of {len(insn)} bytes is not a multiple of {INSN_BYTES} "
                         f"(truncated or misaligned: {len(insn) % INSN_BYTES} trailing bytes)")
    if not insn:
        raise ImageError("instruction buffer is empty: 0 instructions (rule: a program has at least one "
                         "instruction, ending with FINISH)")
    decode_stream(cfg, insn)                    # unknown opcodes fail here with their index
    segments = [Segment(addr, data) for data, addr in dram] + [Segment(insn_addr, insn)]
    return MemoryImage(cfg, insn_addr, len(insn) // INSN_BYTES, segments, outputs, dram_size=dram_size)


def from_dump_text(cfg, text: str) -> list:
    """TVM DUMP_INSN text -> list of Insn, warning once per field the text lacks."""
    insns, missing = assemble(text, tvm=True)
    by_field = {}
    for idx, fields in missing.items():
        for f in fields:
            by_field.setdefault(f, []).append(idx)
    for f, idxs in sorted(by_field.items()):
        shown = ", ".join(map(str, idxs[:8])) + (" ..." if len(idxs) > 8 else "")
        fill = "ACC_8BIT (the only type TVM leaves unnamed)" if f == "memory_type" else "0"
        warnings.warn(f"TVM dump lacks field {f} for {len(idxs)} instruction(s) ({shown}); filled with {fill}",
                      TvmImportWarning, stacklevel=2)
    encode_stream(cfg, insns)                   # fields must fit this config's layout
    return insns


def add_arguments(p) -> None:
    p.add_argument("--insn", type=Path, help="raw instruction buffer (16 bytes per instruction)")
    p.add_argument("--dump", type=Path, help="TVM DUMP_INSN text instead of --insn (lacks some fields; "
                                              "at most 64 MiB)")
    p.add_argument("--insn-addr", default=None, help="byte address of the instructions in DRAM "
                                                      "(default: first 4 KiB page after the data)")
    p.add_argument("--dram", action="append", default=[], metavar="FILE@ADDR", help="DRAM contents at a byte address")
    p.add_argument("--output", action="append", default=[], metavar="NAME@ADDR:NBYTES", help="an output region")
    p.add_argument("--config", type=Path, default=None, help="vta_config.json the stream was built for")
    p.add_argument("--out", type=Path, required=True, help="memory image directory to write")


def import_cli(args) -> MemoryImage:
    if (args.insn is None) == (args.dump is None):
        raise ImageError("import-tvm: give exactly one of --insn FILE or --dump FILE")
    cfg = load_config(args.config)
    dram = [(_read(p, "--dram"), a) for p, a in map(parse_placement, args.dram)]
    outputs = [parse_output(s) for s in args.output]
    if args.insn is not None:
        insn = _read(args.insn, "--insn")
        if not insn:
            raise ImageError(f"--insn {str(args.insn)!r} is empty: 0 instructions (rule: a program has at "
                             f"least one instruction, ending with FINISH)")
    else:
        text = _read(args.dump, "--dump", MAX_DUMP_BYTES, "MAX_DUMP_BYTES").decode("utf-8", "replace")
        insns = from_dump_text(cfg, text)
        if not insns:
            raise ImageError(f"--dump {str(args.dump)!r} holds no TVM DUMP_INSN instruction (0 \"INSTRUCTION n:\" "
                             f"lines; rule: a program has at least one instruction, ending with FINISH)")
        insn = encode_stream(cfg, insns)
    if args.insn_addr is not None:
        insn_addr = _num(args.insn_addr, "--insn-addr")
    else:
        high = max([a + len(d) for d, a in dram] + [o.end for o in outputs] + [0])
        insn_addr = -(-high // 4096) * 4096
    return from_buffers(cfg, insn, insn_addr, dram, outputs)
