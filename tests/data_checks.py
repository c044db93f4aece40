"""Checks that can fail: a workload's outputs must move when its data, its program or its engine moves.

A comparison against expected bytes only checks something when those bytes depend on the data; an
output stuck at a clip bound (or a product count that cancels in the stored byte) makes any engine
"bit-exact".  These helpers mutate one thing in a memory image and report whether the outputs moved:

* :func:`flip_data_bit`: bit 6 of the first byte the first LOAD of a memory type reads (a weight, an
  input element, an accumulator operand);
* :func:`flip_uop_bit`: the low bit of the ``wgt`` (GEMM) or ``src`` (vector ALU) index of the middle
  uop of the first working GEMM/ALU instruction (an index flip keeps it inside the SRAM; the middle
  uop of a 3x3 conv kernel is its centre tap, which never reads padding);
* :func:`drop_product`: a functional engine whose GEMM loses one product (batch 0, output lane 0,
  input lane 0) of every tile - one broken multiplier;
* :func:`saturation`: fractions of the expected outputs at the bounds and strictly between.

Addresses come from the instruction stream (the LOADs' ``dram_base``), so one helper serves compiled
workloads, tutorials, ONNX regions and hand-built streams alike.
"""

from __future__ import annotations

import contextlib

import numpy as np

from vtasim.compiler.ops.data import clip_fractions
from vtasim.hw.config import MEM_UOP
from vtasim.hw.isa import OP_ALU, OP_GEMM, OP_LOAD, layout
from vtasim.sim.image import MemoryImage, Segment
from vtasim.sim.program import load_program

__all__ = ["flip_data_bit", "flip_uop_bit", "flip_byte", "drop_product", "saturation", "outputs_move",
           "mutants", "has_load"]

UPPER_LIMIT = 0.10       # at most this fraction of the outputs at the upper clip bound
BETWEEN_LIMIT = 0.25     # at least this fraction strictly between the bounds


def flip_byte(image, addr: int, bit: int) -> MemoryImage:
    """A copy of ``image`` with bit ``bit`` of DRAM byte ``addr`` flipped (the byte must be in a segment)."""
    segs = []
    hit = False
    for s in image.segments:
        data = s.data
        if s.addr <= addr < s.addr + len(data):
            buf = bytearray(data)
            buf[addr - s.addr] ^= 1 << bit
            data, hit = bytes(buf), True
        segs.append(Segment(s.addr, data))
    assert hit, f"DRAM byte {addr} is in no segment"
    return MemoryImage(image.cfg, image.insn_addr, image.insn_count, segs, image.outputs, image.expected,
                       dram_size=image.dram_size, expected_counters=image.expected_counters)


def _fields(image):
    prog = load_program(image)
    return prog, prog.fields


def has_load(image, mem_type: int) -> bool:
    prog, f = _fields(image)
    return any(f["opcode"][k] == OP_LOAD and f["memory_type"][k] == mem_type and f["x_size"][k] > 0
               for k in range(prog.count))


def flip_data_bit(image, mem_type: int, bit: int = 6) -> MemoryImage:
    """Flip ``bit`` of the first byte the first non-empty LOAD of ``mem_type`` reads."""
    prog, f = _fields(image)
    k = next(k for k in range(prog.count)
             if f["opcode"][k] == OP_LOAD and f["memory_type"][k] == mem_type and f["x_size"][k] > 0)
    return flip_byte(image, int(f["dram_base"][k]) * image.cfg.sram_elem_bytes(mem_type), bit)


def flip_uop_bit(image) -> MemoryImage:
    """Flip the low bit of the wgt index (GEMM) or src index (vector ALU) of the middle uop of the first
    working GEMM (else vector ALU), at its DRAM source (the LOAD UOP that put it in the SRAM)."""
    prog, f = _fields(image)
    work = [k for k in range(prog.count) if f["iter_out"][k] * f["iter_in"][k] * (f["uop_end"][k] - f["uop_bgn"][k]) > 0]
    gemms = [k for k in work if f["opcode"][k] == OP_GEMM and not f["reset_reg"][k]]
    alus = [k for k in work if f["opcode"][k] == OP_ALU and not f["use_imm"][k]]
    k, field = (gemms[0], "wgt_idx") if gemms else (alus[0], "src_idx")
    slot = (int(f["uop_bgn"][k]) + int(f["uop_end"][k])) // 2
    load = next(j for j in range(k - 1, -1, -1)
                if f["opcode"][j] == OP_LOAD and f["memory_type"][j] == MEM_UOP
                and f["sram_base"][j] <= slot < f["sram_base"][j] + f["x_size"][j])
    addr = (int(f["dram_base"][load]) + slot - int(f["sram_base"][load])) * image.cfg.uop_elem_bytes
    lo = layout(image.cfg).uop[field][0]
    return flip_byte(image, addr + lo // 8, lo % 8)


def mutants(image) -> dict:
    """name -> mutated image: one weight bit, one input bit (accumulator operand for ALU-only streams),
    one uop bit."""
    from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_WGT
    out = {}
    if has_load(image, MEM_WGT):
        out["weight bit"] = flip_data_bit(image, MEM_WGT)
    out["input bit"] = flip_data_bit(image, MEM_INP if has_load(image, MEM_INP) else MEM_ACC)
    out["uop bit"] = flip_uop_bit(image)
    return out


def outputs_move(base_result, result) -> bool:
    return dict(result.outputs) != dict(base_result.outputs)


class _DropOneProduct:
    """numpy for vtasim.sim.functional, except that ``matmul`` (its GEMM tile product) loses the product of
    batch row 0, output lane 0 and input lane 0."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def matmul(a, b):
        out = np.matmul(a, b)
        out[:, 0, 0] -= a[:, 0, 0] * b[:, 0, 0]
        return out


@contextlib.contextmanager
def drop_product():
    """Within the block, vtasim.sim.functional's GEMM drops one product of every tile (a broken multiplier)."""
    import vtasim.sim.functional
    real = vtasim.sim.functional.np
    vtasim.sim.functional.np = _DropOneProduct()
    try:
        yield
    finally:
        vtasim.sim.functional.np = real


def saturation(values, lo: int, hi: int) -> tuple[float, float, float]:
    """(at hi, at lo, strictly between) of ``values``."""
    return clip_fractions(values, lo, hi)
