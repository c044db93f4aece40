"""ProgramBuilder: assemble a VTA program and its data into a :class:`~vtasim.sim.image.MemoryImage`.

Used by the unit programs, the demo, tests and (later) the compiler's stream builder::

    b = ProgramBuilder(cfg)
    x = b.data("x", acc_tiles)                 # bytes placed in DRAM, page aligned
    y = b.output("y", nbytes)                  # a zero region the program writes
    u = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.load(memory_type=MEM_ACC, dram_base=x, x_size=36)
    b.alu(alu_opcode=ALU_SHR, use_imm=1, imm=0, uop_end=1, iter_in=36, dst_factor_in=1, src_factor_in=1)
    b.store(dram_base=y, x_size=36)
    b.finish()
    image = b.build()

DRAM layout: every buffer starts on a page boundary (4096 bytes, or the largest element size if
that is bigger) from :data:`DATA_BASE` up, so every buffer's byte address is a whole number of
elements of every memory type; the instruction segment goes after the last buffer when
:meth:`ProgramBuilder.build` runs.  Keyword names of the emitters are :class:`vtasim.hw.isa.Insn` field
names; ``dram_base`` may be given as a :class:`Buffer` (converted with the instruction's memory
type).  Instructions are encoded as they are emitted, so a field that does not fit fails at once
with the instruction index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.hw.config import MEM_INP, MEM_OUT, MEM_UOP, MEM_NAMES, VTAConfig
from vtasim.hw.isa import (MODULE_COMPUTE, MODULE_LOAD, MODULE_NAMES, MODULE_STORE, OP_ALU, OP_FINISH, OP_GEMM,
                    OP_LOAD, OP_STORE, Insn, IsaError, encode, encode_uops,
                    store_mem_type)
from vtasim.sim.image import PAGE_BYTES, MemoryImage, Output, Segment, check_output_name
from vtasim.sim.errors import ImageError

__all__ = ["Buffer", "ProgramBuilder", "DATA_BASE"]

# Address 0 is never a valid buffer in TVM's runtime (its page table starts at 0x1000); keep that.
DATA_BASE = 0x1000


@dataclass(frozen=True)
class Buffer:
    """A named DRAM region: ``addr`` is its byte address, ``nbytes`` its size."""

    cfg: VTAConfig
    name: str
    addr: int
    nbytes: int
    count: int = 0          # number of uops, for buffers made by ProgramBuilder.uops

    def elem(self, mem_type: int, offset: int = 0) -> int:
        """Element index of this buffer (+ ``offset`` elements) for ``dram_base`` of ``mem_type``."""
        ebytes = self.cfg.dram_elem_bytes(mem_type)
        if self.addr % ebytes:
            raise ImageError(f"buffer {self.name!r} at {self.addr:#x} is not aligned to the "
                             f"{ebytes}-byte {MEM_NAMES[mem_type]} element")
        return self.addr // ebytes + offset


class ProgramBuilder:
    def __init__(self, cfg: VTAConfig):
        self.cfg = cfg
        self.align = max(PAGE_BYTES, *(cfg.dram_elem_bytes(m) for m in MEM_NAMES))
        self._next = DATA_BASE
        self.segments: list[Segment] = []
        self.outputs: list[Output] = []
        self.buffers: dict[str, Buffer] = {}
        self.expected: dict[str, bytes] = {}
        self.expected_counters: dict | None = None     # fsim counters an independent reference predicts
        self.insns: list[Insn] = []
        self._raw: list[bytes] = []
        self._uop_n = 0

    # ---- DRAM --------------------------------------------------------------------------------
    def _alloc(self, name: str, nbytes: int) -> Buffer:
        check_output_name(name)
        if name in self.buffers:
            raise ImageError(f"buffer name {name!r} is used twice")
        buf = Buffer(self.cfg, name, self._next, nbytes)
        self._next += -(-max(nbytes, 1) // self.align) * self.align
        self.buffers[name] = buf
        return buf

    def data(self, name: str, array) -> Buffer:
        """Place ``array``'s bytes (little-endian, C order) in DRAM."""
        a = np.ascontiguousarray(array)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        raw = a.tobytes()
        buf = self._alloc(name, len(raw))
        self.segments.append(Segment(buf.addr, raw))
        return buf

    def output(self, name: str, nbytes: int) -> Buffer:
        """Reserve a zero-filled region the program writes; it is reported as output ``name``."""
        buf = self._alloc(name, int(nbytes))
        self.outputs.append(Output(name, buf.addr, int(nbytes)))
        return buf

    def uops(self, triples, name: str | None = None) -> Buffer:
        """Encode ``[(dst, src, wgt), ...]`` micro-ops into a DRAM buffer (``count`` = number of uops)."""
        triples = [tuple(t) + (0,) * (3 - len(t)) for t in triples]
        if name is None:
            name = f"uops{self._uop_n}"
            self._uop_n += 1
        words = encode_uops(self.cfg, triples) if triples else np.zeros(0, dtype="<u4")
        buf = self.data(name, words)
        buf = Buffer(self.cfg, buf.name, buf.addr, buf.nbytes, len(triples))
        self.buffers[name] = buf
        return buf

    def expect(self, name: str, data) -> None:
        """Expected final bytes of output ``name`` (from an independent reference)."""
        self.expected[name] = bytes(np.ascontiguousarray(data).tobytes()) if not isinstance(data, bytes) else data

    # ---- instructions ------------------------------------------------------------------------
    def insn(self, insn: Insn) -> int:
        """Append one instruction; returns its index."""
        index = len(self.insns)
        self._raw.append(encode(self.cfg, insn, index))
        self.insns.append(insn)
        return index

    def _emit(self, opcode, fields: dict) -> int:
        fields = dict(fields)
        dram = fields.get("dram_base")
        if isinstance(dram, Buffer):
            fields["dram_base"] = dram.elem(MEM_OUT if opcode == OP_STORE else fields.get("memory_type", 0))
        try:
            return self.insn(Insn(opcode=opcode, **fields))
        except TypeError as exc:
            raise IsaError(f"instruction {len(self.insns)}: {exc}") from None

    def load(self, **f) -> int:
        dram = f.get("dram_base")
        if isinstance(dram, Buffer) and dram.count and "x_size" not in f:
            f["x_size"] = dram.count          # a uop buffer loads all its uops unless told otherwise
        x = f.setdefault("x_size", 0)
        f.setdefault("y_size", 1 if x else 0)
        f.setdefault("x_stride", x)
        return self._emit(OP_LOAD, f)

    def store(self, **f) -> int:
        f.setdefault("memory_type", store_mem_type(self.cfg))
        x = f.setdefault("x_size", 0)
        f.setdefault("y_size", 1 if x else 0)
        f.setdefault("x_stride", x)
        return self._emit(OP_STORE, f)

    def gemm(self, **f) -> int:
        f.setdefault("iter_out", 1)
        f.setdefault("iter_in", 1)
        return self._emit(OP_GEMM, f)

    def alu(self, **f) -> int:
        f.setdefault("iter_out", 1)
        f.setdefault("iter_in", 1)
        return self._emit(OP_ALU, f)

    def nop(self, module, **deps) -> int:
        """The runtime's NOP flavours (hardware spec 2.7); ``module`` is 0/1/2 or load/compute/store."""
        if isinstance(module, str):
            if module not in MODULE_NAMES:
                raise IsaError(f"nop module {module!r} is not one of {MODULE_NAMES}")
            module = MODULE_NAMES.index(module)
        if module == MODULE_LOAD:
            return self._emit(OP_LOAD, dict(memory_type=MEM_INP, **deps))
        if module == MODULE_COMPUTE:
            return self._emit(OP_LOAD, dict(memory_type=MEM_UOP, **deps))
        if module == MODULE_STORE:
            return self._emit(OP_STORE, dict(memory_type=MEM_UOP, **deps))
        raise IsaError(f"nop module {module!r} is not one of 0 load, 1 compute, 2 store")

    def finish(self, **deps) -> int:
        return self._emit(OP_FINISH, deps)

    # ---- result ------------------------------------------------------------------------------
    def build(self) -> MemoryImage:
        insn_addr = self._next
        raw = b"".join(self._raw)
        segments = list(self.segments)
        if raw:
            segments.append(Segment(insn_addr, raw))
        return MemoryImage(self.cfg, insn_addr, len(self._raw), segments, self.outputs, self.expected,
                           expected_counters=self.expected_counters)
