"""The acceptance programs of hardware spec 7.1 (TVM unit tests) and 7.2 (hardware tests).

Each entry of :data:`UNIT_PROGRAMS` is ``fn(cfg) -> MemoryImage`` built with the
:class:`~vtasim.sim.builder.ProgramBuilder`, for any valid config.  Every image carries

* ``expected`` outputs computed by a plain numpy reference of the *computation* (matrix products,
  shifts, clips on whole tensors), never by executing the instruction stream, and
* ``expected_counters``: fsim's counters derived from the program's shapes (hardware spec 6).

The streams follow what TVM's runtime emits (hardware spec 5.2-5.4): uop loads on the compute
stage, dependency tokens for every RAW/WAR hazard between modules, and the closing
``NOP-MEMORY(push_next), NOP-COMPUTE(pop_prev, pop_next), FINISH`` tail.  Inputs come from a
fixed-seed generator so every engine sees the same bytes.  The cycle engine and the RTL test
benches reuse these programs.
"""

from __future__ import annotations

import zlib

import numpy as np

from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.hw.alu import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR, by_opcode
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.result import COUNTER_NAMES

__all__ = ["UNIT_PROGRAMS", "build", "tiled_gemm", "counters"]

SEED = 0xDEADB


def counters(**kw) -> dict:
    out = dict.fromkeys(COUNTER_NAMES, 0)
    out.update(kw)
    return out


def _rng(name: str):
    # Seeded by the whole name (crc32), so two programs never share their data by accident.
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def _wrap8(x) -> np.ndarray:
    """int32 wrap then STORE truncation to int8, as raw bytes."""
    return (np.asarray(x, np.int64) & 0xFF).astype(np.uint8)


def _tail(b: ProgramBuilder, g2l_left: int = 0) -> None:
    """TVM's closing sequence after a STORE that pushed s2g (hardware spec 5.4)."""
    for _ in range(max(0, g2l_left - 1)):
        b.nop("load", pop_next=1)
    b.nop("load", pop_next=1 if g2l_left else 0, push_next=1)
    b.nop("compute", pop_prev=1, pop_next=1)
    b.finish()


def _finish(b: ProgramBuilder, expected_counters: dict):
    b.expected_counters = expected_counters
    return b.build()


# ---- spec 7.1: element-wise programs on the accumulator -----------------------------------------
def _acc_alu_program(cfg: VTAConfig, name: str, shape, lo, hi, ops, vector=False, pads=(0, 0, 0, 0)):
    """LOAD ACC (with pads) -> ALU ops in place -> STORE: the shape of most of test_vta_insn.py.

    ``ops``: list of (alu_opcode, imm) for immediates, or (alu_opcode, None) for a vector op with a
    second tensor ``b`` loaded right after ``a``.  Returns the image; the reference applies ``ops``
    with numpy to the padded tensor."""
    rng = _rng(name)
    lanes = cfg.batch * cfg.block_out
    ys, xs = shape
    a = rng.integers(lo, hi, size=(ys, xs, lanes), dtype=np.int64)
    bvec = rng.integers(lo, hi, size=(ys, xs, lanes), dtype=np.int64) if vector else None
    yp0, yp1, xp0, xp1 = pads
    yt, xt = yp0 + ys + yp1, xp0 + xs + xp1
    n = yt * xt

    b = ProgramBuilder(cfg)
    abuf = b.data("a", a.astype("<i4"))
    bbuf = b.data("b", bvec.astype("<i4")) if vector else None
    out = b.output("out", n * cfg.out_elem_bytes)
    u = b.uops([(0, n if vector else 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.load(memory_type=MEM_ACC, dram_base=abuf, y_size=ys, x_size=xs, x_stride=xs,
           y_pad_0=yp0, y_pad_1=yp1, x_pad_0=xp0, x_pad_1=xp1)
    if vector:
        b.load(memory_type=MEM_ACC, sram_base=n, dram_base=bbuf, y_size=ys, x_size=xs, x_stride=xs)
    ref = np.zeros((yt, xt, lanes), np.int64)
    ref[yp0:yp0 + ys, xp0:xp0 + xs] = a
    for k, (op, imm) in enumerate(ops):
        last = k == len(ops) - 1
        y = bvec if imm is None else imm
        if imm is None:
            b.alu(alu_opcode=op, uop_end=1, iter_out=yt, iter_in=xt, dst_factor_out=xt, dst_factor_in=1,
                  src_factor_out=xt, src_factor_in=1, push_next=int(last))
        else:
            b.alu(alu_opcode=op, use_imm=1, imm=imm, uop_end=1, iter_out=yt, iter_in=xt, dst_factor_out=xt,
                  dst_factor_in=1, push_next=int(last))
        ref = _alu_ref(op, ref, y)
    b.store(dram_base=out, y_size=yt, x_size=xt, x_stride=xt, pop_prev=1, push_prev=1)
    _tail(b)
    b.expect("out", _wrap8(ref))
    acc_bytes = (ys * xs * (2 if vector else 1)) * cfg.acc_elem_bytes
    return _finish(b, counters(acc_load_nbytes=acc_bytes, uop_load_nbytes=4, alu_counter=n * len(ops),
                               out_store_nbytes=n * cfg.out_elem_bytes))


def _alu_ref(op, x, y):
    """Whole-tensor numpy reference of one ALU op: its row's rule in vtasim.hw.alu (int32 wrap), as int64."""
    return by_opcode(op).apply(x, y).astype(np.int64)


def _imm(name, lo, hi):
    return int(_rng(name + "/imm").integers(lo, hi))


_ALU_UNIT = {   # name: (ops builder, value range, vector)
    "alu_shl_imm": (lambda i: [(ALU_SHR, -i)], (-16, 16), False),
    "alu_max_imm": (lambda i: [(ALU_MAX, i)], (-16, 16), False),
    "alu_max_vec": (lambda i: [(ALU_MAX, None)], (-16, 16), True),
    "alu_add_imm": (lambda i: [(ALU_ADD, i)], (-16, 16), False),
    "alu_add_vec": (lambda i: [(ALU_ADD, None)], (-16, 16), True),
    "alu_shr_imm": (lambda i: [(ALU_SHR, i)], (-16, 16), False),
    # fsim-only extensions, exercised because the functional model supports them
    "alu_min_imm": (lambda i: [(ALU_MIN, -i)], (-16, 16), False),
    "alu_min_vec": (lambda i: [(ALU_MIN, None)], (-16, 16), True),
    "alu_mul_imm": (lambda i: [(ALU_MUL, -i)], (-16, 16), False),
    "alu_mul_vec": (lambda i: [(ALU_MUL, None)], (-16, 16), True),
}


def _make_alu_unit(name):
    ops_of, (lo, hi), vector = _ALU_UNIT[name]
    return lambda cfg: _acc_alu_program(cfg, name, (8, 8), lo, hi, ops_of(_imm(name, 1, 5)), vector)


_PAD_CASES = {"y_pad_0": (2, 0, 0, 0), "x_pad_0": (0, 0, 2, 0), "y_pad_1": (0, 2, 0, 0),
              "x_pad_1": (0, 0, 0, 2), "all": (1, 1, 1, 1)}


def _make_padded(case):
    return lambda cfg: _acc_alu_program(cfg, f"padded_load_{case}", (3, 5), 0, 10, [(ALU_SHR, 0)],
                                        pads=_PAD_CASES[case])


def save_load_out(cfg):
    return _acc_alu_program(cfg, "save_load_out", (6, 6), 1, 10, [(ALU_SHR, 0)])


def relu(cfg):
    return _acc_alu_program(cfg, "relu", (8, 10), -256, 256, [(ALU_MAX, 0), (ALU_MIN, 127)])


def shift_and_scale(cfg):
    shift, scale = _imm("shift", 0, 8), _imm("scale", 1, 5)
    return _acc_alu_program(cfg, "shift_and_scale", (2, 8), -10, 10, [(ALU_ADD, shift), (ALU_SHR, scale)])


# ---- GEMM: one generic tiled builder (spec 7.1 test_gemm, 7.2 gemm/blocked_gemm, the demo) ------
def tiled_gemm(cfg: VTAConfig, name: str, m: int, k: int, n: int, bm: int | None = None,
               bk: int | None = None, bn: int | None = None, vt: int = 1, compress: bool = True,
               requant=None, value_range=(-128, 128), seed_name=None):
    """``out = requant(x @ w.T)`` as int8, x (m, k) int8, w (n, k) int8, tiled into blocks.

    Blocks of ``bm x bk`` inputs, ``bn x bk`` weights and ``bm x bn`` accumulators are processed
    per output block (mb, nb), reducing over kb; ``vt`` virtual threads use separate SRAM regions
    alternately, with the usual tokens: LOAD WGT pushes l2g, GEMM pops it and pushes g2l (freeing
    the region for the load ``vt`` iterations later), the block's last compute instruction pushes
    g2s, STORE pops it and pushes s2g, which the reset GEMM of the block ``vt`` later pops.
    ``requant = (shift, lo, hi)`` adds ALU SHR imm, MAX imm, MIN imm before the store.
    ``compress`` selects the uop shape of spec 7.2 (compressed: one uop per row tile, loops over
    k and n in iter_out/iter_in; uncompressed: one uop per (row, k, n) tile triple)."""
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    bm, bk, bn = bm or m, bk or k, bn or n
    for what, v, t in (("m", m, B), ("k", k, BI), ("n", n, BO), ("bm", bm, B), ("bk", bk, BI), ("bn", bn, BO)):
        if v % t:
            raise ValueError(f"{name}: {what} = {v} is not a multiple of the tile size {t}")
    for what, v, blk in (("m", m, bm), ("k", k, bk), ("n", n, bn)):
        if v % blk:
            raise ValueError(f"{name}: {what} = {v} is not a multiple of its block {blk}")
    mt, kt, nt = m // B, k // BI, n // BO              # whole problem in tiles
    bmt, bkt, bnt = bm // B, bk // BI, bn // BO        # one block in tiles
    inp_blk, wgt_blk, acc_blk = bmt * bkt, bnt * bkt, bmt * bnt
    for what, need, depth in (("inp", inp_blk * vt, cfg.inp_depth), ("wgt", wgt_blk * vt, cfg.wgt_depth),
                              ("acc", acc_blk * vt, cfg.acc_depth)):
        if need > depth:
            raise ValueError(f"{name}: {what} blocks need {need} elements, the buffer has {depth}")

    rng = _rng(seed_name or name)
    x = rng.integers(*value_range, size=(m, k), dtype=np.int64)
    w = rng.integers(*value_range, size=(n, k), dtype=np.int64)
    ref = x @ w.T
    if requant:
        shift, lo, hi = requant
        ref = np.clip(ref >> shift, lo, hi)
    # packed layouts (hardware spec 2.11): tiles of (B, BI), (BO, BI), (B, BO)
    x_t = x.reshape(mt, B, kt, BI).transpose(0, 2, 1, 3)
    w_t = w.reshape(nt, BO, kt, BI).transpose(0, 2, 1, 3)
    ref_t = ref.reshape(mt, B, nt, BO).transpose(0, 2, 1, 3)

    b = ProgramBuilder(cfg)
    xb = b.data("x", x_t.astype(np.int8))
    wb = b.data("w", w_t.astype(np.int8))
    ob = b.output("out", mt * nt * cfg.out_elem_bytes)

    # uop kernels per thread: reset, gemm, alu
    # uop kernels: reset and alu per accumulator region t, gemm per (acc region t, inp/wgt region l)
    uops, kern = [], {}
    for t in range(vt):
        a0 = t * acc_blk
        start = len(uops)
        if compress:
            uops.append((a0, 0, 0))
        else:
            uops += [(a0 + i * bnt + j, 0, 0) for i in range(bmt) for j in range(bnt)]
        kern[t, "reset"] = (start, len(uops))
        kern[t, "alu"] = (len(uops), len(uops) + 1)
        uops.append((a0, a0, 0))
        for lt in range(vt):
            i0, w0 = lt * inp_blk, lt * wgt_blk
            start = len(uops)
            if compress:
                uops += [(a0 + i * bnt, i0 + i * bkt, w0) for i in range(bmt)]
            else:
                uops += [(a0 + i * bnt + o, i0 + i * bkt + j, w0 + o * bkt + j)
                         for i in range(bmt) for j in range(bkt) for o in range(bnt)]
            kern[t, lt, "gemm"] = (start, len(uops))
    if len(uops) > cfg.uop_depth:
        raise ValueError(f"{name}: {len(uops)} uops do not fit the uop buffer of {cfg.uop_depth}")
    ub = b.uops(uops)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=len(uops))

    reset_loop = (dict(iter_out=bmt, iter_in=bnt, dst_factor_out=bnt, dst_factor_in=1) if compress
                  else dict(iter_out=1, iter_in=1))
    gemm_loop = (dict(iter_out=bkt, iter_in=bnt, src_factor_out=1, wgt_factor_out=1, dst_factor_in=1,
                      wgt_factor_in=bkt) if compress else dict(iter_out=1, iter_in=1))
    alu_loop = dict(iter_out=bmt, iter_in=bnt, dst_factor_out=bnt, dst_factor_in=1, src_factor_out=bnt,
                    src_factor_in=1)
    n_blocks, n_k = (mt // bmt) * (nt // bnt), kt // bkt
    load_iter = 0
    block = 0
    for mb in range(mt // bmt):
        for nb in range(nt // bnt):
            t = block % vt
            ub_, ue = kern[t, "reset"]
            b.gemm(reset_reg=1, uop_bgn=ub_, uop_end=ue, pop_next=int(block >= vt), **reset_loop)
            for kb in range(n_k):
                lt = load_iter % vt
                b.load(memory_type=MEM_INP, sram_base=lt * inp_blk, dram_base=xb.elem(MEM_INP, mb * bmt * kt + kb * bkt),
                       y_size=bmt, x_size=bkt, x_stride=kt, pop_next=int(load_iter >= vt))
                b.load(memory_type=MEM_WGT, sram_base=lt * wgt_blk, dram_base=wb.elem(MEM_WGT, nb * bnt * kt + kb * bkt),
                       y_size=bnt, x_size=bkt, x_stride=kt, push_next=1)
                gb, ge = kern[t, lt, "gemm"]
                last = kb == n_k - 1 and not requant
                b.gemm(uop_bgn=gb, uop_end=ge, pop_prev=1, push_prev=1, push_next=int(last), **gemm_loop)
                load_iter += 1
            if requant:
                shift, lo, hi = requant
                ab, ae = kern[t, "alu"]
                for op, imm in ((ALU_SHR, shift), (ALU_MAX, lo), (ALU_MIN, hi)):
                    b.alu(alu_opcode=op, use_imm=1, imm=imm, uop_bgn=ab, uop_end=ae,
                          push_next=int(op == ALU_MIN), **alu_loop)
            b.store(sram_base=t * acc_blk, dram_base=ob.elem(MEM_OUT, mb * bmt * nt + nb * bnt),
                    y_size=bmt, x_size=bnt, x_stride=nt, pop_prev=1, push_prev=1)
            block += 1
    # leftover tokens: the last vt GEMM g2l pushes and the last vt-1 STORE s2g pushes beyond the tail's
    for _ in range(min(vt, n_blocks) - 1):
        b.nop("compute", pop_next=1)
    _tail(b, g2l_left=min(vt, load_iter))
    b.expect("out", _wrap8(ref_t))
    n_alu_ops = 3 if requant else 0
    return _finish(b, counters(
        inp_load_nbytes=n_blocks * n_k * inp_blk * cfg.inp_elem_bytes,
        wgt_load_nbytes=n_blocks * n_k * wgt_blk * cfg.wgt_elem_bytes,
        uop_load_nbytes=len(uops) * cfg.uop_elem_bytes,
        gemm_counter=mt * nt * kt, alu_counter=n_alu_ops * mt * nt,
        out_store_nbytes=mt * nt * cfg.out_elem_bytes))


def _fit_block(cfg, m, k, n, block, vt):
    """Largest block <= ``block`` (halving) whose SRAM regions and uncompressed uops fit ``vt`` times."""
    while block > max(cfg.batch, cfg.block_in):
        bmt, bkt, bnt = block // cfg.batch, block // cfg.block_in, block // cfg.block_out
        n_uops = vt * (bmt * bnt + 1) + vt * vt * bmt * bkt * bnt          # uncompressed kernels
        if (bmt * bkt * vt <= cfg.inp_depth and bnt * bkt * vt <= cfg.wgt_depth
                and bmt * bnt * vt <= cfg.acc_depth and n_uops <= cfg.uop_depth
                and m % block == 0 and k % block == 0 and n % block == 0):
            return block
        block //= 2
    return block


def gemm(cfg):
    """test_gemm "default": x (4 rows x 16) . w (4*BLOCK_OUT x 16)^T, >> 8, clip [0, 127]."""
    return tiled_gemm(cfg, "gemm", 4 * cfg.batch, cfg.block_in, 4 * cfg.block_out, requant=(8, 0, 127))


def gemm_smt(cfg):
    """test_gemm "smt": the same computation split over two virtual threads on the batch axis."""
    return tiled_gemm(cfg, "gemm_smt", 4 * cfg.batch, cfg.block_in, 4 * cfg.block_out, bm=2 * cfg.batch,
                      vt=2, requant=(8, 0, 127), seed_name="gemm")


# ---- spec 7.2: hardware test streams ------------------------------------------------------------
def hw_alu(cfg, op, use_imm, compress, rows=16, vector_size=128):
    """test_lib.cc alu_test: per row LOAD ACC, ALU, STORE, with WAR tokens between rows."""
    name = f"hw_alu_{by_opcode(op).mnemonic}_{'imm' if use_imm else 'vec'}_{'c' if compress else 'u'}"
    rng = _rng(name)
    lanes = cfg.batch * cfg.block_out
    ne = max(1, vector_size // cfg.block_out)           # elements per row
    lo, hi = {ALU_MIN: (-64, 64), ALU_MAX: (-64, 64), ALU_ADD: (-32, 32), ALU_SHR: (-8, 8)}[op]
    # test_lib draws MIN/MAX/ADD immediates from [-16384, 16384) and SHR from [-8, 8); against
    # inputs of +-64 that makes MIN/MAX outputs constant, so MIN/MAX take the input range and SHR
    # [-4, 3) - the outputs then depend on every input (a test that can fail).
    ilo, ihi = {ALU_MIN: (lo, hi), ALU_MAX: (lo, hi), ALU_ADD: (-16384, 16384), ALU_SHR: (-4, 3)}[op]
    imm = int(rng.integers(ilo, ihi))
    width = ne if use_imm else 2 * ne                    # vector: second operand after the first
    data = rng.integers(lo, hi, size=(rows, width, lanes), dtype=np.int64)

    b = ProgramBuilder(cfg)
    inb = b.data("in", data.astype("<i4"))
    out = b.output("out", rows * ne * cfg.out_elem_bytes)
    src_off = 0 if use_imm else ne
    triples = [(0, src_off, 0)] if compress else [(e, e + src_off, 0) for e in range(ne)]
    ub = b.uops(triples)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=len(triples))
    loop = (dict(iter_in=ne, dst_factor_in=1, src_factor_in=1) if compress else dict(iter_in=1))
    ref = []
    for r in range(rows):
        b.load(memory_type=MEM_ACC, dram_base=inb.elem(MEM_ACC, r * width), x_size=width, pop_next=int(r > 0))
        b.alu(alu_opcode=op, use_imm=int(use_imm), imm=imm if use_imm else 0, uop_end=len(triples),
              push_next=1, **loop)
        b.store(dram_base=out.elem(MEM_OUT, r * ne), x_size=ne, pop_prev=1, push_prev=1)
        ref.append(_alu_ref(op, data[r, :ne], imm if use_imm else data[r, ne:]))
    b.finish(pop_next=1)
    b.expect("out", _wrap8(np.stack(ref)))
    return _finish(b, counters(acc_load_nbytes=rows * width * cfg.acc_elem_bytes,
                               uop_load_nbytes=len(triples) * cfg.uop_elem_bytes,
                               alu_counter=rows * ne, out_store_nbytes=rows * ne * cfg.out_elem_bytes))


def hw_gemm(cfg, compress):
    """test_lib.cc gemm_test(4, 64, 64): one block, int8 truncation of the accumulator."""
    return tiled_gemm(cfg, f"hw_gemm_{'c' if compress else 'u'}", 4 * cfg.batch, 64, 64, compress=compress,
                      seed_name="hw_gemm")


def hw_blocked_gemm(cfg, vt):
    """test_lib.cc blocked_gemm_test(256, 256, 64, uncompressed, virtual_threads=vt)."""
    blk = _fit_block(cfg, 256, 256, 256, 64, vt)
    return tiled_gemm(cfg, f"hw_blocked_gemm_vt{vt}", 256, 256, 256, bm=blk, bk=blk, bn=blk, vt=vt,
                      compress=False, seed_name="hw_blocked_gemm")


UNIT_PROGRAMS = {
    "save_load_out": save_load_out,
    **{f"padded_load_{c}": _make_padded(c) for c in _PAD_CASES},
    "gemm": gemm,
    "gemm_smt": gemm_smt,
    **{n: _make_alu_unit(n) for n in _ALU_UNIT},
    "relu": relu,
    "shift_and_scale": shift_and_scale,
    **{f"hw_alu_{by_opcode(op).mnemonic}_{'imm' if imm else 'vec'}_{'c' if c else 'u'}":
       (lambda cfg, op=op, imm=imm, c=c: hw_alu(cfg, op, imm, c))
       for op in (ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR) for imm in (True, False) for c in (True, False)},
    "hw_gemm_c": lambda cfg: hw_gemm(cfg, True),
    "hw_gemm_u": lambda cfg: hw_gemm(cfg, False),
    "hw_blocked_gemm_vt1": lambda cfg: hw_blocked_gemm(cfg, 1),
    "hw_blocked_gemm_vt2": lambda cfg: hw_blocked_gemm(cfg, 2),
}


def build(name: str, cfg: VTAConfig):
    """``UNIT_PROGRAMS[name](cfg)`` with a clear error for an unknown name."""
    if name not in UNIT_PROGRAMS:
        raise KeyError(f"unknown unit program {name!r}; known: {', '.join(UNIT_PROGRAMS)}")
    return UNIT_PROGRAMS[name](cfg)
