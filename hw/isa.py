"""VTA instruction set: bit layouts derived from a :class:`~vtasim.hw.config.VTAConfig`, encode and decode.

Instructions are 128 bits stored as 16 little-endian bytes; micro-ops are 32-bit words.  Field
positions are computed, never tabulated: fields are packed LSB-first and a field that does not fit
in what is left of the first 64-bit word starts at bit 64 (the C bit-field rule of hardware spec
2.1).  For the default config this reproduces the tables of spec 2.4-2.8 exactly::

    >>> from vtasim.hw.config import load_config
    >>> lay = layout(load_config())
    >>> lay.gemm["uop_end"], lay.gemm["dst_factor_out"]
    ((21, 14), (64, 11))

:class:`Insn` is one flat record carrying the union of all fields; fields an opcode does not have
stay 0.  ``encode``/``decode`` convert between it and bytes; :func:`decode_fields` decodes a whole
stream into numpy arrays for the engines.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, asdict

import numpy as np

from vtasim.hw.alu import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_NAMES, ALU_SHR
from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.hw.fields import INSN_BYTES, check_isa_fit, field_specs, pack

__all__ = [
    "OP_LOAD", "OP_STORE", "OP_GEMM", "OP_FINISH", "OP_ALU", "OPCODE_NAMES",
    "ALU_MIN", "ALU_MAX", "ALU_ADD", "ALU_SHR", "ALU_MUL", "ALU_NAMES",
    "MODULE_LOAD", "MODULE_COMPUTE", "MODULE_STORE", "MODULE_NAMES",
    "IsaError", "IsaLayout", "Insn", "layout", "check_isa_fit",
    "encode", "decode", "encode_stream", "decode_stream", "decode_fields", "module_of", "module_array",
    "encode_uop", "decode_uop", "decode_uops", "encode_uops", "store_mem_type",
    "TOKEN_QUEUES", "TOKEN_POPS", "TOKEN_PUSHES",
]

OP_LOAD, OP_STORE, OP_GEMM, OP_FINISH, OP_ALU = 0, 1, 2, 3, 4
OPCODE_NAMES = {OP_LOAD: "LOAD", OP_STORE: "STORE", OP_GEMM: "GEMM", OP_FINISH: "FINISH", OP_ALU: "ALU"}
# the ALU opcodes and names are rows of the table in vtasim.hw.alu (re-exported here for the ISA's users)
MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE = 0, 1, 2
MODULE_NAMES = ("load", "compute", "store")
# Dependency token queues and which flag of which module pops / pushes each (hardware spec 4.2):
# module -> ((flag, queue), ...).  Every engine, report and trace tool reads these.
TOKEN_QUEUES = ("l2g", "g2l", "s2g", "g2s")
TOKEN_POPS = {MODULE_LOAD: (("pop_next", "g2l"),), MODULE_COMPUTE: (("pop_prev", "l2g"), ("pop_next", "s2g")),
              MODULE_STORE: (("pop_prev", "g2s"),)}
TOKEN_PUSHES = {MODULE_LOAD: (("push_next", "l2g"),), MODULE_COMPUTE: (("push_prev", "g2l"), ("push_next", "g2s")),
                MODULE_STORE: (("push_prev", "s2g"),)}

SIGNED_FIELDS = frozenset({"imm"})


class IsaError(ValueError):
    """An instruction or uop field does not fit its layout, or bytes do not decode."""


@dataclass(frozen=True)
class IsaLayout:
    """Bit positions ``name -> (lsb, width)`` of each instruction kind and of the uop."""

    mem: dict
    gemm: dict
    alu: dict
    finish: dict
    uop: dict

    def of(self, opcode: int) -> dict:
        if opcode in (OP_LOAD, OP_STORE):
            return self.mem
        if opcode == OP_GEMM:
            return self.gemm
        if opcode == OP_ALU:
            return self.alu
        if opcode == OP_FINISH:
            return self.finish
        raise IsaError(f"opcode {opcode} is not one of {sorted(OPCODE_NAMES)} ({', '.join(OPCODE_NAMES.values())})")


@functools.lru_cache(maxsize=64)
def layout(cfg: VTAConfig) -> IsaLayout:
    problem = check_isa_fit(cfg)
    if problem:
        raise IsaError(problem)
    specs, uop = field_specs(cfg)
    packed = {k: pack(v)[0] for k, v in specs.items()}
    uop_pos, _, _ = pack(uop)
    return IsaLayout(mem=packed["mem"], gemm=packed["gemm"], alu=packed["alu"], finish=packed["finish"],
                     uop=uop_pos)


@dataclass
class Insn:
    """One instruction; the union of all fields (those the opcode lacks stay 0)."""

    opcode: int = OP_FINISH
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    # LOAD / STORE
    memory_type: int = 0
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0
    # GEMM / ALU
    reset_reg: int = 0
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 0
    iter_in: int = 0
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    # ALU
    alu_opcode: int = 0
    use_imm: int = 0
    imm: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def is_nop(self) -> bool:
        return self.opcode in (OP_LOAD, OP_STORE) and self.x_size == 0

    @property
    def uop_count(self) -> int:
        """Uops executed by a GEMM/ALU: iter_out * iter_in * (uop_end - uop_bgn), 0 if empty."""
        if self.opcode not in (OP_GEMM, OP_ALU):
            return 0
        return self.iter_out * self.iter_in * max(0, self.uop_end - self.uop_bgn)


INSN_FIELDS = tuple(f.name for f in fields(Insn))


def module_of(opcode: int, memory_type: int) -> int:
    """Which module executes an instruction (hardware spec 4.1)."""
    if opcode == OP_STORE:
        return MODULE_STORE
    if opcode == OP_LOAD and memory_type in (MEM_INP, MEM_WGT):
        return MODULE_LOAD
    return MODULE_COMPUTE


def module_array(f: dict) -> np.ndarray:
    """Which module executes each instruction (hardware spec 4.1), vectorised."""
    op, mt = f["opcode"], f["memory_type"]
    mod = np.full(len(op), MODULE_COMPUTE, dtype=np.int64)
    mod[(op == OP_LOAD) & ((mt == MEM_INP) | (mt == MEM_WGT))] = MODULE_LOAD
    mod[op == OP_STORE] = MODULE_STORE
    return mod


def _field_bits(name: str, value: int, width: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise IsaError(f"{where}field {name} = {value!r} must be an integer")
    value = int(value)
    if name in SIGNED_FIELDS:
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        if not lo <= value <= hi:
            raise IsaError(f"{where}field {name} = {value} does not fit {width} signed bits [{lo}, {hi}]")
        return value & ((1 << width) - 1)
    if not 0 <= value < (1 << width):
        raise IsaError(f"{where}field {name} = {value} does not fit {width} bits [0, {(1 << width) - 1}]")
    return value


@functools.lru_cache(maxsize=64)
def _encode_plans(cfg: VTAConfig) -> dict:
    """Per opcode: ``(fields, absent)``, fields as ``(name, lo, mask, min, max)`` and the names the
    opcode lacks (they must be 0) - what :func:`encode` checks, precomputed once per config."""
    lay = layout(cfg)
    plans = {}
    for opcode in OPCODE_NAMES:
        fmt = lay.of(opcode)
        fields = []
        for name, (lo, width) in fmt.items():
            if name in SIGNED_FIELDS:
                vmin, vmax = -(1 << (width - 1)), (1 << (width - 1)) - 1
            else:
                vmin, vmax = 0, (1 << width) - 1
            fields.append((name, lo, (1 << width) - 1, vmin, vmax))
        plans[opcode] = (tuple(fields), tuple(n for n in INSN_FIELDS if n not in fmt))
    return plans


def encode(cfg: VTAConfig, insn: Insn, index=None) -> bytes:
    """16 little-endian bytes of one instruction.  Fields the opcode lacks must be 0."""
    plan = _encode_plans(cfg).get(insn.opcode)
    if plan is not None:            # fast path: plain in-range ints; anything else takes the checked path
        values = insn.__dict__
        word = 0
        for name, lo, mask, vmin, vmax in plan[0]:
            v = values[name]
            if type(v) is not int or v < vmin or v > vmax:
                break
            word |= (v & mask) << lo
        else:
            for name in plan[1]:
                if values[name]:
                    break
            else:
                return word.to_bytes(INSN_BYTES, "little")
    return _encode_checked(cfg, insn, index)


def _encode_checked(cfg: VTAConfig, insn: Insn, index=None) -> bytes:
    where = f"instruction {index}: " if index is not None else ""
    lay = layout(cfg).of(insn.opcode)
    word = 0
    for name in INSN_FIELDS:
        value = getattr(insn, name)
        if name not in lay:
            if value:
                raise IsaError(f"{where}field {name} = {value} is not part of a "
                               f"{OPCODE_NAMES[insn.opcode]} instruction")
            continue
        lo, width = lay[name]
        word |= _field_bits(name, value, width, where) << lo
    return word.to_bytes(INSN_BYTES, "little")


def decode(cfg: VTAConfig, raw: bytes, index=None) -> Insn:
    """Decode 16 bytes; bits not defined for the opcode are ignored (hardware spec 2.1)."""
    where = f"instruction {index}: " if index is not None else ""
    if len(raw) != INSN_BYTES:
        raise IsaError(f"{where}{len(raw)} bytes given, an instruction is {INSN_BYTES}")
    word = int.from_bytes(raw, "little")
    opcode = word & 7
    if opcode not in OPCODE_NAMES:
        raise IsaError(f"{where}field opcode = {opcode} is not a VTA opcode "
                       f"({', '.join(f'{v} {k}' for k, v in OPCODE_NAMES.items())})")
    vals = {}
    for name, (lo, width) in layout(cfg).of(opcode).items():
        v = (word >> lo) & ((1 << width) - 1)
        if name in SIGNED_FIELDS and v >> (width - 1):
            v -= 1 << width
        vals[name] = v
    return Insn(**vals)


def encode_stream(cfg: VTAConfig, insns) -> bytes:
    return b"".join(encode(cfg, insn, i) for i, insn in enumerate(insns))


def decode_stream(cfg: VTAConfig, raw: bytes) -> list:
    if len(raw) % INSN_BYTES:
        raise IsaError(f"instruction stream of {len(raw)} bytes is not a multiple of {INSN_BYTES} "
                       f"(truncated or misaligned: {len(raw) % INSN_BYTES} trailing bytes)")
    return [decode(cfg, raw[i:i + INSN_BYTES], i // INSN_BYTES) for i in range(0, len(raw), INSN_BYTES)]


def decode_fields(cfg: VTAConfig, raw) -> dict:
    """Vectorised decode of a whole stream: ``{field: int64 array}`` for every field of :class:`Insn`.

    Each row takes the fields of its own opcode; the others are 0.  Unknown opcodes decode with
    every field 0 except ``opcode`` (callers validate)."""
    # an ndarray of any dtype is taken as its bytes (a uint32 view must not count 4-byte words as bytes)
    buf = (np.ascontiguousarray(raw).reshape(-1).view(np.uint8) if isinstance(raw, np.ndarray)
           else np.frombuffer(bytes(raw), dtype=np.uint8))
    if buf.size % INSN_BYTES:
        raise IsaError(f"instruction stream of {buf.size} bytes is not a multiple of {INSN_BYTES} "
                       f"(truncated or misaligned: {buf.size % INSN_BYTES} trailing bytes)")
    words = buf.reshape(-1, INSN_BYTES).copy().view("<u8")
    w = (words[:, 0], words[:, 1])
    opcode = (w[0] & np.uint64(7)).astype(np.int64)
    lay = layout(cfg)
    out = {name: np.zeros(len(opcode), dtype=np.int64) for name in INSN_FIELDS}
    for ops, fmt in (((OP_LOAD, OP_STORE), lay.mem), ((OP_GEMM,), lay.gemm), ((OP_ALU,), lay.alu),
                     ((OP_FINISH,), lay.finish)):
        rows = np.isin(opcode, ops)
        if not rows.any():
            continue
        for name, (lo, width) in fmt.items():
            word = w[lo // 64][rows]
            v = ((word >> np.uint64(lo % 64)) & np.uint64((1 << width) - 1)).astype(np.int64)
            if name in SIGNED_FIELDS:
                v = np.where(v >> (width - 1), v - (1 << width), v)
            out[name][rows] = v
    out["opcode"] = opcode
    return out


# ---- micro-ops ---------------------------------------------------------------------------------
def encode_uop(cfg: VTAConfig, dst_idx: int, src_idx: int, wgt_idx: int = 0) -> int:
    lay = layout(cfg).uop
    word = 0
    for name, value in (("dst_idx", dst_idx), ("src_idx", src_idx), ("wgt_idx", wgt_idx)):
        lo, width = lay[name]
        word |= _field_bits(name, value, width, "uop ") << lo
    return word


def decode_uop(cfg: VTAConfig, word: int) -> tuple:
    lay = layout(cfg).uop
    return tuple((int(word) >> lo) & ((1 << w) - 1) for lo, w in (lay["dst_idx"], lay["src_idx"], lay["wgt_idx"]))


def decode_uops(cfg: VTAConfig, words) -> tuple:
    """Vectorised: uint32 array -> (dst, src, wgt) int64 arrays."""
    words = np.asarray(words, dtype=np.uint32).astype(np.int64)
    lay = layout(cfg).uop
    return tuple((words >> lo) & ((1 << w) - 1) for lo, w in (lay["dst_idx"], lay["src_idx"], lay["wgt_idx"]))


def encode_uops(cfg: VTAConfig, triples) -> np.ndarray:
    """List of (dst, src, wgt) -> uint32 array (little-endian when written with ``tobytes``)."""
    return np.array([encode_uop(cfg, *t) for t in triples], dtype="<u4")


# Memory types a LOAD may name (used by validators; the names live in vtasim.hw.config).  A STORE's one
# valid type depends on the layout: store_mem_type below.
LOAD_MEM_TYPES = (MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_ACC_8BIT)


def store_mem_type(cfg: VTAConfig) -> int:
    """The memory_type field value of a STORE.  HW_VER 0.0.1 has a 2-bit field, so the runtime's
    VTA_MEM_ID_OUT (4) lands in it as 4 mod 4 = 0 (hardware spec 2.9); 0.0.2 keeps 4."""
    return MEM_OUT & ((1 << layout(cfg).mem["memory_type"][1]) - 1)
