"""A GEMM-bound synthetic stream for benchmarks and cycle-engine tests.

ResNet-18 layers and every other operator come from the compiler (``vtasim compile``); this module
keeps only a stream no schedule would produce: one small load of everything, then long GEMMs that
keep the GEMM core busy every cycle - the upper bound of simulated cycles per second.
"""

from __future__ import annotations

import numpy as np

from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.sim.builder import ProgramBuilder

__all__ = ["gemm_bound_image", "maximal_nest_image", "MAXIMAL_KINDS"]


def gemm_bound_image(cfg: VTAConfig, gemms: int = 16, repeat: int = 256, seed: int = 0):
    """A GEMM-bound synthetic stream: one small load of everything, then ``gemms`` GEMMs of
    ``16 * repeat * 16`` uops each (16 uops x 16 row blocks x ``repeat`` passes), one STORE.

    Row ``r = 16 i + u`` of the dot products, ``D[r] = inp[r] . wgt[u]``, goes ``repeat`` times into
    accumulator row ``r`` in every GEMM but the last (inner factors 0: the products repeat), and into
    rows ``r, r + 1, ..., r + repeat - 1`` in the last (``dst_factor_in = 1``).  The STORE truncates
    to the low byte, where ``repeat`` equal terms vanish whenever ``repeat`` is a multiple of 256; the
    last GEMM's sliding sum ``sum_{j < repeat} D[k - j]`` keeps every product visible in the stored
    bytes (one bit of one input, weight or uop changes them).  Same instructions, uops and cycles
    as with every inner factor 0."""
    nb, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    n = 256
    if n + repeat - 1 > cfg.acc_depth:
        raise ValueError(f"gemm_bound_image: repeat = {repeat} must be <= {cfg.acc_depth - n + 1} "
                         f"(the last GEMM's rows 0..{n} + repeat - 2 must fit the {cfg.acc_depth}-row accumulator)")
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, nb, bi)).astype(np.int8)
    w = rng.integers(-128, 128, (16, bo, bi)).astype(np.int8)
    b = ProgramBuilder(cfg)
    xb, wb = b.data("x", x), b.data("w", w)
    ub = b.uops([(u, u, u) for u in range(16)])
    out = b.output("y", n * cfg.out_elem_bytes)
    b.load(memory_type=MEM_INP, dram_base=xb, x_size=n)
    b.load(memory_type=MEM_WGT, dram_base=wb, x_size=16, push_next=1)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=16, pop_prev=1)
    b.gemm(reset_reg=1, uop_bgn=0, uop_end=16, iter_out=16, iter_in=1, dst_factor_out=16)
    for g in range(gemms):
        last = g == gemms - 1
        b.gemm(uop_bgn=0, uop_end=16, iter_out=16, iter_in=repeat, dst_factor_out=16, src_factor_out=16,
               dst_factor_in=int(last), **({"push_next": 1} if last else {}))
    b.store(dram_base=out, x_size=n, pop_prev=1, push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    dots = np.einsum("rubk,uok->rubo", x.reshape(16, 16, nb, bi).astype(np.int64), w.astype(np.int64))
    dots = dots.reshape(n, nb * bo)
    run = np.cumsum(np.concatenate([np.zeros((1, nb * bo), np.int64), dots]), axis=0)   # run[k] = sum D[:k]
    k = np.arange(n)
    window = run[k + 1] - run[np.maximum(k + 1 - repeat, 0)]          # sum of D[k - repeat + 1 .. k]
    acc = dots * (gemms - 1) * repeat + window
    b.expect("y", (acc & 0xFF).astype(np.uint8))
    return b.build()


MAXIMAL_KINDS = ("gemm", "alu-imm", "alu-vec")


def maximal_nest_image(cfg: VTAConfig, kind: str = "gemm", uops: int = 8, seed: int = 0):
    """A legal loop nest as large as the ISA allows: ``iter_out = iter_in`` = the iteration fields'
    maximum, ``uops`` uops, every iteration on the same ``uops`` accumulator rows (factors 0), then a
    STORE of those rows.  ``kind``: ``gemm`` (GEMM accumulate), ``alu-imm`` (ADD of an immediate),
    ``alu-vec`` (ADD of rows ``uops..2*uops-1``: a chain where every uop reads what the one before
    wrote).  No expected output: the engines are compared with each other."""
    from vtasim.hw.isa import ALU_ADD, layout
    if kind not in MAXIMAL_KINDS:
        raise ValueError(f"maximal nest kind {kind!r} is not one of {', '.join(MAXIMAL_KINDS)}")
    n = (1 << layout(cfg).gemm["iter_out"][1]) - 1
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(cfg)
    out = b.output("y", uops * cfg.out_elem_bytes)
    if kind == "gemm":
        x = rng.integers(-128, 128, (uops, cfg.batch, cfg.block_in)).astype(np.int8)
        w = rng.integers(-128, 128, (uops, cfg.block_out, cfg.block_in)).astype(np.int8)
        b.load(memory_type=MEM_INP, dram_base=b.data("x", x), x_size=uops)
        b.load(memory_type=MEM_WGT, dram_base=b.data("w", w), x_size=uops, push_next=1)
        b.load(memory_type=MEM_UOP, dram_base=b.uops([(u, u, u) for u in range(uops)]), pop_prev=1)
        b.gemm(uop_bgn=0, uop_end=uops, iter_out=n, iter_in=n, push_next=1)
    else:
        acc = rng.integers(-1000, 1000, (2 * uops, cfg.batch, cfg.block_out)).astype(np.int32)
        b.load(memory_type=MEM_UOP, dram_base=b.uops([(u, u + uops, 0) for u in range(uops)]))
        b.load(memory_type=MEM_ACC, dram_base=b.data("a", acc), x_size=2 * uops)
        imm = kind == "alu-imm"
        b.alu(uop_bgn=0, uop_end=uops, iter_out=n, iter_in=n, alu_opcode=ALU_ADD, use_imm=int(imm),
              imm=7 if imm else 0, push_next=1)
    b.store(dram_base=out, x_size=uops, pop_prev=1, push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    return b.build()
