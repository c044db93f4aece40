"""Irregular compute-bound streams for benchmarks and cycle-engine tests.

Where :mod:`vtasim.sim.programs.synthetic`'s GEMM-bound stream repeats one regular uop pattern (the shape a
schedule produces), these streams draw every uop's indices at random, as fuzzing and hand-written kernels
do: the GEMM and ALU cores stay busy, but no two uops need share a weight element or a row.

* :func:`irregular_gemm_image`: GEMMs over random uop ranges with random (dst, src, wgt) indices and
  random loop factors.
* :func:`alu_bound_image`: ALU instructions of every kind the stream can repeat without its outputs
  collapsing to a constant (ADD, MIN, MAX of rows; ADD, MUL by odd immediates, SHR by 1), vector and
  immediate forms, over random uops.

Data are random int8 inputs and weights (GEMM) or int32 accumulators of moderate size (ALU); the STORE
keeps each accumulator's low byte, so the outputs are neither saturated nor constant.  No expected
output: the engines are compared with each other.
"""

from __future__ import annotations

import numpy as np

from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.hw.alu import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR
from vtasim.sim.builder import ProgramBuilder

__all__ = ["irregular_gemm_image", "alu_bound_image"]

MAX_FACTOR = 3        # loop factors are drawn from 0..MAX_FACTOR
MAX_ITER = 4          # iteration counts from 1..MAX_ITER
MARGIN = 2 * MAX_FACTOR * (MAX_ITER - 1) + 1     # index headroom the loop offsets can use


def _nests(rng, n_insns: int, n_uops: int, min_len: int, max_len: int):
    """``n_insns`` random loop nests over uop ranges of ``min_len..max_len`` of the ``n_uops`` uops."""
    for _ in range(n_insns):
        length = int(rng.integers(min_len, max_len + 1))
        bgn = int(rng.integers(0, n_uops - length + 1))
        io, ii = (int(v) for v in rng.integers(1, MAX_ITER + 1, 2))
        f = [int(v) for v in rng.integers(0, MAX_FACTOR + 1, 6)]
        yield dict(uop_bgn=bgn, uop_end=bgn + length, iter_out=io, iter_in=ii, dst_factor_out=f[0],
                   dst_factor_in=f[1], src_factor_out=f[2], src_factor_in=f[3]), f[4:]


def _uops(rng, n: int, limits):
    return [tuple(int(rng.integers(0, lim)) for lim in limits) for _ in range(n)]


def _finish(b: ProgramBuilder, out, rows: int):
    b.store(dram_base=out, x_size=rows, pop_prev=1, push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    return b.build()


def irregular_gemm_image(cfg: VTAConfig, gemms: int = 384, seed: int = 0, min_len: int = 32, max_len: int = 512):
    """A reset of every accumulator row (through uop 0, which is (0, 0, 0)), then ``gemms`` GEMMs, each over a random range of
    ``min_len..max_len`` of ``uop_depth`` random uops, 1..4 x 1..4 iterations and loop factors 0..3 (the
    weight factors too), then a STORE of every accumulator row."""
    rng = np.random.default_rng(seed)
    nb, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    n_in, n_w, n_acc = cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth
    x = rng.integers(-128, 128, (n_in, nb, bi)).astype(np.int8)
    w = rng.integers(-128, 128, (n_w, bo, bi)).astype(np.int8)
    n_uops = min(cfg.uop_depth, 8192)
    b = ProgramBuilder(cfg)
    xb, wb = b.data("x", x), b.data("w", w)
    ub = b.uops([(0, 0, 0)] + _uops(rng, n_uops - 1, (n_acc - MARGIN, n_in - MARGIN, n_w - MARGIN)))
    out = b.output("y", n_acc * cfg.out_elem_bytes)
    b.load(memory_type=MEM_INP, dram_base=xb, x_size=n_in)
    b.load(memory_type=MEM_WGT, dram_base=wb, x_size=n_w, push_next=1)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=n_uops, pop_prev=1)
    b.gemm(reset_reg=1, uop_bgn=0, uop_end=1, iter_out=n_acc, iter_in=1, dst_factor_out=1)
    for g, (nest, (wfo, wfi)) in enumerate(_nests(rng, gemms, n_uops, min(min_len, n_uops), min(max_len, n_uops))):
        b.gemm(**nest, wgt_factor_out=wfo, wgt_factor_in=wfi, **({"push_next": 1} if g == gemms - 1 else {}))
    return _finish(b, out, n_acc)


ALU_KINDS = ((ALU_ADD, False), (ALU_MIN, False), (ALU_MAX, False), (ALU_ADD, True), (ALU_MUL, True),
             (ALU_SHR, True))


ALU_FORMS = ("vector", "imm")


def alu_bound_image(cfg: VTAConfig, insns: int = 512, seed: int = 0, min_len: int = 32, max_len: int = 512,
                    forms=ALU_FORMS):
    """A LOAD of every accumulator row (random int32 in +-2^20), then ``insns`` ALU instructions of
    :data:`ALU_KINDS` (half of them ADDs, which keep the low bytes moving), each over a random range of
    ``min_len..max_len`` random (dst, src) uops with 1..4 x 1..4 iterations and factors 0..3, then a STORE
    of every accumulator row.  ``forms`` (a subset of :data:`ALU_FORMS`) keeps only the vector (two rows)
    or the immediate kinds."""
    bad = [f for f in forms if f not in ALU_FORMS]
    if bad or not forms:
        raise ValueError(f"ALU forms {tuple(forms)!r}: each must be one of {', '.join(ALU_FORMS)}, at least one")
    rng = np.random.default_rng(seed)
    n_acc = cfg.acc_depth
    acc = rng.integers(-(1 << 20), 1 << 20, (n_acc, cfg.batch, cfg.block_out)).astype(np.int32)
    n_uops = min(cfg.uop_depth, 8192)
    b = ProgramBuilder(cfg)
    ab = b.data("a", acc)
    ub = b.uops([(d, s, 0) for d, s in _uops(rng, n_uops, (n_acc - MARGIN, n_acc - MARGIN))])
    out = b.output("y", n_acc * cfg.out_elem_bytes)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=n_uops)
    b.load(memory_type=MEM_ACC, dram_base=ab, x_size=n_acc)
    weights = np.array([3 * (ALU_FORMS[imm_form] in forms) * (1 if op == ALU_ADD else 1 / 3)
                        for op, imm_form in ALU_KINDS], float)
    kinds = rng.choice(len(ALU_KINDS), insns, p=weights / weights.sum())
    for k, (nest, _) in zip(kinds, _nests(rng, insns, n_uops, min(min_len, n_uops), min(max_len, n_uops))):
        op, imm_form = ALU_KINDS[k]
        imm = {ALU_ADD: int(rng.integers(-1000, 1000)) | 1, ALU_MUL: int(rng.integers(1, 8)) * 2 + 1,
               ALU_SHR: 1}.get(op, 0) if imm_form else 0
        b.alu(**nest, alu_opcode=op, use_imm=int(imm_form), imm=imm)
    b.nop("compute", push_next=1)
    return _finish(b, out, n_acc)
