"""Static checks of a decoded instruction stream, shared by every engine before it runs.

:func:`load_program` decodes the instructions of a memory image (vectorised, :func:`hw.isa.decode_fields`)
and rejects anything that can be known bad without running it.  The first offending instruction
(lowest index) is reported as a :class:`~sim.errors.ProgramError` naming the index, the field, its
value and the rule.  The rules:

* opcode is LOAD, STORE, GEMM, FINISH or ALU;
* memory type valid for the opcode: LOAD takes UOP, WGT, INP, ACC, ACC_8BIT; STORE takes OUT (a
  STORE with ``x_size == 0`` is a NOP and may carry any type - the runtime's NOP-STORE uses UOP;
  under HW_VER 0.0.1 OUT reads as 0, see :func:`hw.isa.store_mem_type`);
* ALU opcode is MIN, MAX, ADD, SHR or MUL;
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

from dataclasses import dataclass

import numpy as np

from hw.config import MEM_NAMES, VTAConfig
from hw.isa import module_array  # noqa: F401  (re-exported: part of this module's API)
from hw.isa import (ALU_NAMES, INSN_FIELDS, LOAD_MEM_TYPES, MODULE_LOAD, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD,
                    OP_STORE, OPCODE_NAMES, Insn,
                    decode_fields, store_mem_type)
from sim.errors import ProgramError

__all__ = ["Program", "load_program", "decode_program", "check_program", "module_array"]


@dataclass
class Program:
    """A checked stream: ``fields`` maps every :class:`~hw.isa.Insn` field to an int64 array."""

    cfg: VTAConfig
    fields: dict
    module: np.ndarray        # MODULE_LOAD / MODULE_COMPUTE / MODULE_STORE per instruction

    @property
    def count(self) -> int:
        return len(self.module)

    def insn(self, i: int) -> Insn:
        return Insn(**{name: int(self.fields[name][i]) for name in INSN_FIELDS})

    def indices(self, module: int) -> np.ndarray:
        """Program indices of one module's instructions, in program order."""
        return np.flatnonzero(self.module == module)


def load_program(image) -> Program:
    """Decode and check the instructions of a :class:`~sim.image.MemoryImage`."""
    return decode_program(image.cfg, image.insn_bytes(), image.dram_size)


def decode_program(cfg: VTAConfig, raw: bytes, dram_size: int) -> Program:
    f = decode_fields(cfg, raw)
    check_program(cfg, f, dram_size)
    return Program(cfg, f, module_array(f))


def _first(mask) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def check_program(cfg: VTAConfig, f: dict, dram_size: int) -> None:
    """Raise ProgramError for the lowest-index instruction that breaks a static rule."""
    n = len(f["opcode"])
    if n == 0:
        raise ProgramError("the program has no instructions (no FINISH: a program ends with exactly one FINISH)",
                           None, "opcode")
    op, mt = f["opcode"], f["memory_type"]
    is_load, is_store = op == OP_LOAD, op == OP_STORE
    is_mem = is_load | is_store
    x, y, stride = f["x_size"], f["y_size"], f["x_stride"]
    active = is_mem & (x > 0)
    problems = []            # (index, message, field)

    def rule(mask, field, text):
        i = _first(mask)
        if i is not None:
            problems.append((i, text(i), field))

    rule(~np.isin(op, list(OPCODE_NAMES)), "opcode",
         lambda i: f"field opcode = {op[i]} is not a VTA opcode "
                   f"({', '.join(f'{k} {v}' for k, v in OPCODE_NAMES.items())})")
    rule(is_load & ~np.isin(mt, list(LOAD_MEM_TYPES)), "memory_type",
         lambda i: f"LOAD field memory_type = {mt[i]} is not a loadable type "
                   f"({', '.join(f'{t} {MEM_NAMES[t]}' for t in LOAD_MEM_TYPES)})")
    out_type = store_mem_type(cfg)
    rule(is_store & (x > 0) & (mt != out_type), "memory_type",
         lambda i: f"STORE field memory_type = {mt[i]} must be {out_type} OUT")
    rule((op == OP_ALU) & ~np.isin(f["alu_opcode"], list(ALU_NAMES)), "alu_opcode",
         lambda i: f"field alu_opcode = {f['alu_opcode'][i]} is not an ALU opcode "
                   f"({', '.join(f'{k} {v}' for k, v in ALU_NAMES.items())})")
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
    finishes = np.flatnonzero(op == OP_FINISH)
    if finishes.size == 0:
        problems.append((n - 1, f"no FINISH: the last instruction is {OPCODE_NAMES.get(int(op[-1]), op[-1])}, "
                                f"a program must end with exactly one FINISH", "opcode"))
    elif finishes[0] != n - 1:
        problems.append((int(finishes[0]), f"FINISH at {finishes[0]} is not the last instruction "
                                           f"(program has {n}; FINISH must be last and appear once)", "opcode"))

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
    if problems:
        i, text, field = min(problems, key=lambda p: p[0])
        raise ProgramError(f"instruction {i}: {text}", i, field)

