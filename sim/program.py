"""Static checks of a decoded instruction stream, shared by every engine before it runs.

:func:`load_program` checks the instructions of a memory image (decoded vectorised, :func:`vtasim.hw.isa.decode_fields`,
a block of instructions at a time) and rejects anything that can be known bad without running it; the
:class:`Program` keeps the raw 16-byte words and decodes fields on demand.  The first offending instruction
(lowest index) is reported as a :class:`~vtasim.sim.errors.ProgramError` naming the index, the field, its
value and the rule.  The rules:

* opcode is LOAD, STORE, GEMM, FINISH or ALU;
* memory type valid for the opcode: LOAD takes UOP, WGT, INP, ACC, ACC_8BIT; STORE takes OUT (a
  STORE with ``x_size == 0`` is a NOP and may carry any type - the runtime's NOP-STORE uses UOP;
  under HW_VER 0.0.1 OUT reads as 0, see :func:`vtasim.hw.isa.store_mem_type`);
* ALU opcode is a row of :data:`vtasim.hw.alu.ALU_OPS` that the config's HW_VER has, and an immediate lies in
  that row's ``imm_range`` (message :func:`vtasim.hw.alu.unknown_opcode_message`, the same on every engine);
* STORE pads are 0;
* a load-module instruction (LOAD INP/WGT) has no prev flags, a STORE has no next flags;
* FINISH appears exactly once, as the last instruction;
* SRAM range: ``sram_base + xt*yt <= depth`` for a LOAD, ``sram_base + x_size*y_size <= depth``
  for a STORE (NOPs exempt);
* DRAM range: every byte a LOAD reads or a STORE writes lies inside the image DRAM;
* uop range: a non-empty ``[uop_bgn, uop_end)`` lies inside the uop buffer.

GEMM/ALU SRAM indices depend on uop contents (data), so engines check them when they run.  Token
balance is not static either: the schedulers find it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from vtasim.hw.alu import ops_for, unknown_opcode_message
from vtasim.hw.config import MEM_NAMES, VTAConfig
from vtasim.hw.isa import module_array  # noqa: F401  (re-exported: part of this module's API)
from vtasim.hw.isa import (INSN_BYTES, INSN_FIELDS, LOAD_MEM_TYPES, MODULE_LOAD, OP_ALU, OP_FINISH, OP_GEMM,
                    OP_LOAD, OP_STORE, OPCODE_NAMES, SIGNED_FIELDS, Insn, IsaError, decode_fields, layout,
                    store_mem_type)
from vtasim.sim.errors import ProgramError

__all__ = ["Program", "load_program", "decode_program", "program_from_words", "check_program", "decode_field",
           "module_array"]


_BLOCK = 1 << 16           # instructions decoded at a time by the static checks: bounds their temporaries


class Program:
    """A checked stream, kept as its 16-byte instruction words (``words``: read-only ``uint64[n, 2]``,
    usually sharing the image's bytes) plus the executing module of each (``module``: ``int8[n]``).

    Decoding is on demand so memory stays proportional to the 16 bytes an instruction is:
    :meth:`row` / :meth:`insn` decode one instruction; :attr:`fields` maps every :class:`~vtasim.hw.isa.Insn`
    field to an int64 array, each decoded for the whole stream on first use (then kept); :meth:`field`
    decodes one without keeping it."""

    def __init__(self, cfg: VTAConfig, words: np.ndarray, module: np.ndarray):
        self.cfg = cfg
        self.words = words
        self.module = module
        self._fields = _Fields(self)
        lay = layout(cfg)
        fmts = {OP_LOAD: lay.mem, OP_STORE: lay.mem, OP_GEMM: lay.gemm, OP_ALU: lay.alu, OP_FINISH: lay.finish}
        self._row_fmt = {op: tuple((name, lo, (1 << width) - 1, 1 << (width - 1) if name in SIGNED_FIELDS else 0)
                                   for name, (lo, width) in fmt.items() if name != "opcode")
                         for op, fmt in fmts.items()}

    @property
    def count(self) -> int:
        return len(self.module)

    @property
    def fields(self) -> "_Fields":
        return self._fields

    def row(self, i: int) -> dict:
        """Every :class:`~vtasim.hw.isa.Insn` field of instruction ``i`` as Python ints (0 where the opcode has none)."""
        w = self.words[i]
        word = int(w[0]) | int(w[1]) << 64
        op = word & 7
        out = dict.fromkeys(INSN_FIELDS, 0)
        out["opcode"] = op
        for name, lo, mask, sign in self._row_fmt.get(op, ()):
            v = (word >> lo) & mask
            out[name] = v - (sign << 1) if sign and v & sign else v
        return out

    def insn(self, i: int) -> Insn:
        return Insn(**self.row(i))

    def field(self, name: str) -> np.ndarray:
        """One field of every instruction as a fresh int64 array (not kept; see :attr:`fields`)."""
        return decode_field(self.cfg, self.words, name)

    def indices(self, module: int) -> np.ndarray:
        """Program indices of one module's instructions, in program order."""
        return np.flatnonzero(self.module == module)


class _Fields(Mapping):
    """``{field: int64[n]}`` of a :class:`Program`, each decoded on first use."""

    def __init__(self, prog: Program):
        self._prog = prog
        self._cache = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            if name not in INSN_FIELDS:
                raise KeyError(name)
            self._cache[name] = self._prog.field(name)
        return self._cache[name]

    def __iter__(self):
        return iter(INSN_FIELDS)

    def __len__(self) -> int:
        return len(INSN_FIELDS)


def decode_field(cfg: VTAConfig, words: np.ndarray, name: str) -> np.ndarray:
    """One field of a ``uint64[n, 2]`` word array, as :func:`vtasim.hw.isa.decode_fields` gives it (int64)."""
    opcode = (words[:, 0] & np.uint64(7)).astype(np.uint8)
    if name == "opcode":
        return opcode.astype(np.int64)
    lay = layout(cfg)
    out = np.zeros(len(words), np.int64)
    for ops, fmt in (((OP_LOAD, OP_STORE), lay.mem), ((OP_GEMM,), lay.gemm), ((OP_ALU,), lay.alu),
                     ((OP_FINISH,), lay.finish)):
        if name not in fmt:
            continue
        lo, width = fmt[name]
        rows = np.isin(opcode, ops)
        v = ((words[rows, lo // 64] >> np.uint64(lo % 64)) & np.uint64((1 << width) - 1)).astype(np.int64)
        if name in SIGNED_FIELDS:
            v = np.where(v >> (width - 1), v - (1 << width), v)
        out[rows] = v
    return out


def load_program(image) -> Program:
    """Decode and check the instructions of a :class:`~vtasim.sim.image.MemoryImage`."""
    return program_from_words(image.cfg, image.insn_words(), image.dram_size)


def decode_program(cfg: VTAConfig, raw, dram_size: int) -> Program:
    n = len(raw)
    if n % INSN_BYTES:
        raise IsaError(f"instruction stream of {n} bytes is not a multiple of {INSN_BYTES} "
                       f"(truncated or misaligned: {n % INSN_BYTES} trailing bytes)")
    words = np.frombuffer(raw, dtype="<u8") if n else np.zeros(0, "<u8")
    if not words.flags.aligned:
        words = words.copy()
    return program_from_words(cfg, words.reshape(-1, 2), dram_size)


def program_from_words(cfg: VTAConfig, words: np.ndarray, dram_size: int) -> Program:
    """Check a ``uint64[n, 2]`` instruction array block by block (temporaries bounded by the block, not
    by the stream) and wrap it; the array is not copied."""
    n = len(words)
    if n == 0:
        raise ProgramError("the program has no instructions (no FINISH: a program ends with exactly one FINISH)",
                           None, "opcode")
    finishes = np.concatenate([np.flatnonzero((words[c:c + _BLOCK, 0] & np.uint64(7)) == OP_FINISH) + c
                               for c in range(0, n, _BLOCK)])
    problems = _finish_problems(n, finishes, int(words[-1, 0] & np.uint64(7)))
    module = np.empty(n, np.int8)
    for c in range(0, n, _BLOCK):
        if problems and min(problems)[0] < c:
            break                                 # every later problem has a higher index
        f = decode_fields(cfg, words[c:c + _BLOCK])
        module[c:c + _BLOCK] = module_array(f)
        problems += _block_problems(cfg, f, dram_size, c)
    _raise_first(problems)
    view = words.view()
    view.flags.writeable = False
    return Program(cfg, view, module)


def _first(mask) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def check_program(cfg: VTAConfig, f: dict, dram_size: int) -> None:
    """Raise ProgramError for the lowest-index instruction that breaks a static rule (``f``: the
    :func:`vtasim.hw.isa.decode_fields` arrays of a whole stream)."""
    if len(f["opcode"]) == 0:
        raise ProgramError("the program has no instructions (no FINISH: a program ends with exactly one FINISH)",
                           None, "opcode")
    op = f["opcode"]
    _raise_first(_finish_problems(len(op), np.flatnonzero(op == OP_FINISH), int(op[-1]))
                 + _block_problems(cfg, f, dram_size, 0))


def _raise_first(problems) -> None:
    if problems:
        i, text, field = min(problems, key=lambda p: p[0])
        raise ProgramError(f"instruction {i}: {text}", i, field)


def _finish_problems(n: int, finishes: np.ndarray, last_op: int) -> list:
    """FINISH appears exactly once, as the last instruction (``finishes``: indices of the FINISHes)."""
    if finishes.size == 0:
        return [(n - 1, f"no FINISH: the last instruction is {OPCODE_NAMES.get(last_op, last_op)}, "
                        f"a program must end with exactly one FINISH", "opcode")]
    if finishes[0] != n - 1:
        return [(int(finishes[0]), f"FINISH at {finishes[0]} is not the last instruction "
                                   f"(program has {n}; FINISH must be last and appear once)", "opcode")]
    return []


def _block_problems(cfg: VTAConfig, f: dict, dram_size: int, offset: int) -> list:
    """``(index, text, field)`` of the first instruction breaking each per-instruction rule in the
    block ``f`` whose first instruction is ``offset``."""
    op, mt = f["opcode"], f["memory_type"]
    is_load, is_store = op == OP_LOAD, op == OP_STORE
    is_mem = is_load | is_store
    x, y, stride = f["x_size"], f["y_size"], f["x_stride"]
    active = is_mem & (x > 0)
    problems = []            # (index, message, field)

    def rule(mask, field, text):
        i = _first(mask)
        if i is not None:
            problems.append((i + offset, text(i), field))

    rule(~np.isin(op, list(OPCODE_NAMES)), "opcode",
         lambda i: f"field opcode = {op[i]} is not a VTA opcode "
                   f"({', '.join(f'{k} {v}' for k, v in OPCODE_NAMES.items())})")
    rule(is_load & ~np.isin(mt, list(LOAD_MEM_TYPES)), "memory_type",
         lambda i: f"LOAD field memory_type = {mt[i]} is not a loadable type "
                   f"({', '.join(f'{t} {MEM_NAMES[t]}' for t in LOAD_MEM_TYPES)})")
    out_type = store_mem_type(cfg)
    rule(is_store & (x > 0) & (mt != out_type), "memory_type",
         lambda i: f"STORE field memory_type = {mt[i]} must be {out_type} OUT")
    is_alu, aop = op == OP_ALU, f["alu_opcode"]
    alu_ops = ops_for(cfg.HW_VER)
    rule(is_alu & ~np.isin(aop, [a.opcode for a in alu_ops]), "alu_opcode",
         lambda i: unknown_opcode_message(int(aop[i]), cfg.HW_VER))
    for a in alu_ops:
        lo, hi = a.imm_range
        rule(is_alu & (aop == a.opcode) & (f["use_imm"] != 0) & ((f["imm"] < lo) | (f["imm"] > hi)), "imm",
             lambda i, a=a, lo=lo, hi=hi: f"ALU {a.name} field imm = {f['imm'][i]} is outside its range "
                                          f"[{lo}, {hi}]")
    for pad in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"):
        rule(is_store & (x > 0) & (f[pad] != 0), pad,
             lambda i, pad=pad: f"STORE field {pad} = {f[pad][i]} must be 0 (stores cannot pad)")
    module = module_array(f)
    for flag in ("pop_prev", "push_prev"):
        rule((module == MODULE_LOAD) & (f[flag] != 0), flag,
             lambda i, flag=flag: f"load-module instruction has {flag} = 1; the load module has no "
                                  f"previous stage (only pop_next/push_next)")
    for flag in ("pop_next", "push_next"):
        rule(is_store & (f[flag] != 0), flag,
             lambda i, flag=flag: f"STORE has {flag} = 1; the store module has no next stage "
                                  f"(only pop_prev/push_prev)")
    # SRAM ranges.  Invalid memory types were reported above; give them depth 0 to stay vectorised.
    known = np.isin(mt, list(MEM_NAMES))
    depth = np.array([cfg.sram_depth(t) if t in MEM_NAMES else 0 for t in range(8)], dtype=np.int64)[mt & 7]
    xt = f["x_pad_0"] + x + f["x_pad_1"]
    yt = f["y_pad_0"] + y + f["y_pad_1"]
    load_end = f["sram_base"] + xt * yt
    rule(is_load & active & known & (load_end > depth), "sram_base",
         lambda i: f"LOAD {MEM_NAMES[int(mt[i])]} writes SRAM elements [{f['sram_base'][i]}, {load_end[i]}) "
                   f"(sram_base + (x_pad_0+x_size+x_pad_1)*(y_pad_0+y_size+y_pad_1)) beyond the buffer "
                   f"depth {depth[i]}")
    store_end = f["sram_base"] + x * y
    rule(is_store & active & (store_end > cfg.out_depth), "sram_base",
         lambda i: f"STORE reads SRAM elements [{f['sram_base'][i]}, {store_end[i]}) (sram_base + x_size*y_size) "
                   f"beyond the buffer depth {cfg.out_depth}")

    # DRAM ranges: last byte touched = (dram_base + (y-1)*stride + x) * elem_bytes.
    ebytes = np.array([cfg.dram_elem_bytes(t) if t in MEM_NAMES else 0 for t in range(8)], dtype=np.int64)[mt & 7]
    ebytes = np.where(is_store, cfg.out_elem_bytes, ebytes)        # a STORE always writes OUT elements
    dram_end = (f["dram_base"] + (y - 1) * stride + x) * ebytes
    rule(active & (known | is_store) & (y > 0) & (dram_end > dram_size), "dram_base",
         lambda i: f"{OPCODE_NAMES[int(op[i])]} {'OUT' if is_store[i] else MEM_NAMES[int(mt[i])]} touches DRAM bytes up to {dram_end[i]:#x} "
                   f"((dram_base {f['dram_base'][i]} + (y_size-1)*x_stride + x_size) * {ebytes[i]} B) beyond "
                   f"the image DRAM of {dram_size:#x} bytes")

    is_loop = (op == OP_GEMM) | (op == OP_ALU)
    bgn, end = f["uop_bgn"], f["uop_end"]
    rule(is_loop & (bgn < end) & (end > cfg.uop_depth), "uop_end",
         lambda i: f"{OPCODE_NAMES[int(op[i])]} field uop_end = {end[i]} is beyond the uop buffer depth "
                   f"{cfg.uop_depth}")
    return problems

