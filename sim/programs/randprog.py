"""Seeded generator of random LEGAL VTA programs, for engine-vs-engine and model-vs-RTL fuzzing.

``generate(cfg, seed, **knobs) -> MemoryImage`` builds a program whose result does not depend on
the schedule, so the functional model, the cycle engine and the RTL must agree byte for byte:

* Blocks, each a load part (LOAD INP/WGT or a NOP), a compute part (LOAD UOP/ACC/ACC_8BIT, GEMM,
  ALU) and a store part (STOREs or a NOP), chained by the runtime's token protocol: the load part
  pushes l2g, the compute part pops it and pushes g2l and g2s, the store part pops g2s and pushes s2g.
* ``nbuf`` SRAM halves (1 = single, 2 = double buffering as TVM's virtual threads): block b uses
  half ``b % nbuf`` of the inp, wgt and acc buffers, so with nbuf = 2 the load of block b + 1 and
  the store of block b - 1 overlap the compute of block b.  Block b's load pops the g2l pushed by
  compute(b - nbuf) and its compute pops the s2g pushed by store(b - nbuf): every write-after-read
  between modules is ordered by a token, so no access races.
* Every index stays in bounds: loads with random pads inside their half, loop nests (iter 0
  included) and uop indices sized so the largest index fits, DRAM rows inside their source buffer.
  Stores write output regions no load reads.
* Immediate ALU ops have src = dst, as TVM emits them: the Chisel VTA reads their accumulator operand
  at src, fsim (and vtasim) at dst (README "Semantics and timing"); ``imm_src_ne_dst=True`` also
  emits src != dst.  Every config the validator accepts is covered (HW_VER 0.0.1: no ACC_8BIT, no MUL).
* The tail is the runtime's closing sequence: NOP-MEMORY(s) draining g2l and pushing l2g,
  NOP-COMPUTE(s) popping l2g and every outstanding s2g, then FINISH; ``leftover=True`` skips the
  g2l drain so the run ends with tokens left (reported, not an error).

``coverage_bins(image)`` names what a program exercises (opcodes, memory types, ALU ops with
imm/vector, each pad side, reset GEMMs, empty loops, flags, NOPs per module, multi-row and strided
DMA, shift amounts beyond +-31...) so a fuzz campaign can report functional coverage.
"""

from __future__ import annotations

import numpy as np

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_NAMES, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.hw.alu import ALU_OPS, ALU_SHR, by_opcode, ops_for
from vtasim.hw.isa import (MODULE_NAMES, OP_ALU, OP_GEMM, OP_LOAD,
                    OP_STORE, OPCODE_NAMES, decode_fields, layout)
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import SimError
from vtasim.sim.program import module_array

__all__ = ["generate", "coverage_bins", "bins_report", "check_seed", "ALL_BINS", "DEFAULT_KNOBS"]

DEFAULT_KNOBS = dict(blocks=(1, 4), nbuf=(1, 2), region=16, max_iter=3, max_uops=4, max_pad=2,
                     max_rows=3, leftover=None, imm_src_ne_dst=False)


# every bin coverage_bins can report for a legal program (LOAD OUT is not legal)
ALL_BINS = tuple(
    [f"op:{n}" for n in OPCODE_NAMES.values()]
    + [f"load:{MEM_NAMES[t]}" for t in (MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_ACC_8BIT)]
    + [f"nop:{m}" for m in MODULE_NAMES]
    + [f"alu:{op.mnemonic}:{k}" for op in ALU_OPS for k in ("imm", "vec")]
    + ["alu:shr:negative", "alu:shr:beyond31"]
    + [f"pad:{p}" for p in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")]
    + ["dma:multi_row", "dma:strided", "gemm:reset", "loop:empty", "loop:2d", "loop:multi_uop"]
    + ["flag:load:pop_next", "flag:load:push_next", "flag:store:pop_prev", "flag:store:push_prev"]
    + [f"flag:compute:{f}" for f in ("pop_prev", "pop_next", "push_prev", "push_next")])


class _Gen:
    def __init__(self, cfg: VTAConfig, rng: np.random.Generator, knobs: dict):
        self.cfg, self.rng, self.k = cfg, rng, knobs
        self.b = ProgramBuilder(cfg)
        # HW_VER 0.0.1 has 2-bit memory_type and alu_opcode fields: ACC_8BIT (5) and MUL (4) do not exist
        lay = layout(cfg)
        self.acc8 = MEM_ACC_8BIT < 1 << lay.mem["memory_type"][1]
        self.alu_ops = ops_for(cfg.HW_VER)         # the rows of vtasim.hw.alu this ISA version has
        self.nbuf = int(rng.integers(knobs["nbuf"][0], knobs["nbuf"][1] + 1))
        r = knobs["region"]
        # each half: `r` elements, capped by the buffer depth
        self.half = {mt: min(r, cfg.sram_depth(mt) // self.nbuf) for mt in (MEM_INP, MEM_WGT, MEM_ACC)}
        self.uop_next = 0
        n = 4 * r
        lanes = cfg.batch * cfg.block_out
        self.src = {
            MEM_INP: self.b.data("inp", rng.integers(-128, 128, (n, cfg.inp_elem_bytes)).astype(np.int8)),
            MEM_WGT: self.b.data("wgt", rng.integers(-128, 128, (n, cfg.wgt_elem_bytes)).astype(np.int8)),
            MEM_ACC: self.b.data("acc", self._acc_values((n, lanes))),
            MEM_ACC_8BIT: self.b.data("acc8", rng.integers(-128, 128, (n, lanes)).astype(np.int8)),
        }
        self.src_n = n
        self.outputs = []

    def _acc_values(self, shape):
        rng = self.rng
        small = rng.integers(-300, 300, shape)
        big = rng.integers(-(1 << 31), 1 << 31, shape)
        return np.where(rng.random(shape) < 0.2, big, small).astype(np.int32)

    # ---- DMA ------------------------------------------------------------------------------------
    def _load(self, mt, region_base, region_len, deps):
        """A LOAD of random shape (pads, rows, stride) that fits [region_base, region_base + region_len)."""
        rng, k = self.rng, self.k
        for _ in range(20):
            xp0, xp1, yp0, yp1 = (int(v) for v in rng.integers(0, k["max_pad"] + 1, 4) * (rng.random(4) < 0.35))
            x = int(rng.integers(1, 5))
            y = int(rng.integers(1, k["max_rows"] + 1))
            if (xp0 + x + xp1) * (yp0 + y + yp1) <= region_len:
                break
        else:
            xp0 = xp1 = yp0 = yp1 = 0
            x, y = 1, 1
        size = (xp0 + x + xp1) * (yp0 + y + yp1)
        base = region_base + int(rng.integers(0, region_len - size + 1))
        stride = x + int(rng.integers(0, 3)) if y > 1 else x
        first = int(rng.integers(0, self.src_n - ((y - 1) * stride + x) + 1))
        return self.b.load(memory_type=mt, sram_base=base, dram_base=self.src[mt].elem(mt, first), y_size=y,
                           x_size=x, x_stride=stride, y_pad_0=yp0, y_pad_1=yp1, x_pad_0=xp0, x_pad_1=xp1, **deps)

    def _store(self, acc_base, region_len, deps):
        rng = self.rng
        x = min(int(rng.integers(1, 4)), region_len)        # a 2-element buffer has 1-element halves
        y = int(rng.integers(1, max(2, min(3, region_len // x)) + 1))
        y = max(1, min(y, region_len // x))
        stride = x + int(rng.integers(0, 3)) if y > 1 else x
        base = acc_base + int(rng.integers(0, region_len - x * y + 1))
        out = self.b.output(f"out{len(self.outputs)}", ((y - 1) * stride + x) * self.cfg.out_elem_bytes)
        self.outputs.append(out)
        return self.b.store(sram_base=base, dram_base=out.elem(MEM_OUT), y_size=y, x_size=x, x_stride=stride, **deps)

    # ---- loop nests -----------------------------------------------------------------------------
    def _nest(self, spans):
        """Random (iter_out, iter_in, factors) and uops whose every index stays inside its region.

        ``spans``: {"dst": (base, len), "src": (base, len), "wgt": (base, len) or None}."""
        rng, k = self.rng, self.k
        io = int(rng.integers(0, k["max_iter"] + 1)) if rng.random() < 0.1 else int(rng.integers(1, k["max_iter"] + 1))
        ii = int(rng.integers(1, k["max_iter"] + 1))
        nu = min(int(rng.integers(1, k["max_uops"] + 1)), self.cfg.uop_depth)
        fac, offs = {}, {}
        for name, span in spans.items():
            if span is None:
                fac[name] = (0, 0)
                continue
            base, length = span
            for _ in range(10):
                fo, fi = int(rng.integers(0, 3)), int(rng.integers(0, 3))
                fo, fi = min(fo, length - 1), min(fi, length - 1)   # fits the log2(depth)-bit field
                reach = max(io - 1, 0) * fo + max(ii - 1, 0) * fi
                if reach < length:
                    break
            else:
                fo = fi = reach = 0
            fac[name] = (fo, fi)
            offs[name] = (base, length - reach)
        uops = []
        for _ in range(nu):
            t = [int(offs[n][0] + rng.integers(0, offs[n][1])) if n in offs else 0 for n in ("dst", "src", "wgt")]
            uops.append(tuple(t))
        return io, ii, fac, uops

    def _uop_load(self, uops, deps):
        depth = self.cfg.uop_depth
        if self.uop_next + len(uops) > depth:
            self.uop_next = 0
        bgn = self.uop_next
        buf = self.b.uops(uops)
        self.uop_next += len(uops)
        self.b.load(memory_type=MEM_UOP, sram_base=bgn, dram_base=buf, x_size=len(uops), **deps)
        return bgn, bgn + len(uops)

    # ---- blocks ---------------------------------------------------------------------------------
    def block(self, bidx):
        rng, nbuf = self.rng, self.nbuf
        h = bidx % nbuf
        inp_r = (h * self.half[MEM_INP], self.half[MEM_INP])
        wgt_r = (h * self.half[MEM_WGT], self.half[MEM_WGT])
        acc_r = (h * self.half[MEM_ACC], self.half[MEM_ACC])
        # load part
        loads = [mt for mt in (MEM_INP, MEM_WGT) if rng.random() < 0.7]
        first_pop = dict(pop_next=1) if bidx >= nbuf else {}
        if not loads:
            self.b.nop("load", push_next=1, **first_pop)
        for n, mt in enumerate(loads):
            deps = dict(first_pop) if n == 0 else {}
            if n == len(loads) - 1:
                deps["push_next"] = 1
            self._load(mt, *(inp_r if mt == MEM_INP else wgt_r), deps)
        # compute part: a list of emitters, flags put on the first and last
        ops = []
        if rng.random() < 0.5:
            ops.append(("acc", MEM_ACC if rng.random() < 0.7 or not self.acc8 else MEM_ACC_8BIT))
        for _ in range(int(rng.integers(1, 4))):
            ops.append(("gemm",) if rng.random() < 0.5 else ("alu",))
        pops = dict(pop_prev=1, **({"pop_next": 1} if bidx >= nbuf else {}))
        pushes = dict(push_prev=1, push_next=1)
        for n, op in enumerate(ops):
            first, last = n == 0, n == len(ops) - 1
            self._compute(op, acc_r, inp_r, wgt_r, pops if first else {}, pushes if last else {})
        # store part
        nst = int(rng.integers(0, 3))
        if nst == 0:
            self.b.nop("store", pop_prev=1, push_prev=1)
        for n in range(nst):
            deps = {}
            if n == 0:
                deps["pop_prev"] = 1
            if n == nst - 1:
                deps["push_prev"] = 1
            self._store(acc_r[0], acc_r[1], deps)

    def _compute(self, op, acc_r, inp_r, wgt_r, pops, pushes):
        rng = self.rng
        kind = op[0]
        if kind == "acc":
            # the pops ride on the ACC load; the pushes (if any) on a trailing NOP
            self._load(op[1], *acc_r, pops)
            if pushes:
                self.b.nop("compute", **pushes)
            return
        if kind == "gemm":
            io, ii, fac, uops = self._nest({"dst": acc_r, "src": inp_r, "wgt": wgt_r})
            bgn, end = self._uop_load(uops, pops)
            self.b.gemm(reset_reg=int(rng.random() < 0.25), uop_bgn=bgn, uop_end=end, iter_out=io, iter_in=ii,
                        dst_factor_out=fac["dst"][0], dst_factor_in=fac["dst"][1],
                        src_factor_out=fac["src"][0], src_factor_in=fac["src"][1],
                        wgt_factor_out=fac["wgt"][0], wgt_factor_in=fac["wgt"][1], **pushes)
            return
        io, ii, fac, uops = self._nest({"dst": acc_r, "src": acc_r, "wgt": None})
        row = by_opcode(int(rng.choice([op.opcode for op in self.alu_ops])))
        alu_op = row.opcode
        use_imm = int(rng.random() < 0.6)
        imm = row.draw_imm(rng)
        if use_imm and not self.k["imm_src_ne_dst"]:
            # An immediate op reads its accumulator operand at src in the Chisel VTA and at dst in fsim
            # (and here); TVM always emits src = dst for them, so by default the generator does too.
            fac["src"] = fac["dst"]
            uops = [(d, d, w) for d, _, w in uops]
        bgn, end = self._uop_load(uops, pops)
        self.b.alu(alu_opcode=alu_op, use_imm=use_imm, imm=imm if use_imm else 0, uop_bgn=bgn, uop_end=end,
                   iter_out=io, iter_in=ii, dst_factor_out=fac["dst"][0], dst_factor_in=fac["dst"][1],
                   src_factor_out=fac["src"][0], src_factor_in=fac["src"][1], **pushes)

    def tail(self, leftover):
        nbuf = self.nbuf
        nblocks = self.nblocks
        # outstanding g2l: compute pushed nblocks, loads popped max(0, nblocks - nbuf)
        g2l = min(nbuf, nblocks)
        drains = 0 if leftover else g2l
        for n in range(max(drains, 1)):
            deps = dict(pop_next=1) if n < drains else {}
            if n == max(drains, 1) - 1:
                deps["push_next"] = 1
            self.b.nop("load", **deps)
        s2g = min(nbuf, nblocks)
        for n in range(s2g):
            deps = dict(pop_next=1)
            if n == s2g - 1:
                deps["pop_prev"] = 1
            self.b.nop("compute", **deps)
        self.b.finish()


def check_seed(seed, what: str = "seed") -> int:
    """``seed`` if it is a non-negative integer (numpy's seed rule), else a one-line SimError."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        shown = seed if not isinstance(seed, int) or seed.bit_length() < 64 else f"<{seed.bit_length()}-bit integer>"
        raise SimError(f"{what} {shown} is not a valid seed (rule: a non-negative integer)")
    return int(seed)


def generate(cfg: VTAConfig, seed: int, **knobs):
    """A random legal program as a :class:`~vtasim.sim.image.MemoryImage` (no ``expected``: compare engines).

    Knobs (defaults in :data:`DEFAULT_KNOBS`): ``blocks`` (min, max), ``nbuf`` (min, max) in 1..2,
    ``region`` elements per SRAM half, ``max_iter``, ``max_uops``, ``max_pad``, ``max_rows``,
    ``leftover`` (None = random), ``imm_src_ne_dst`` (False: every immediate ALU op has src = dst, as
    TVM emits them; True: also src != dst, where the Chisel VTA and fsim disagree - README semantics).

    Every config the validator accepts is covered: HW_VER 0.0.1 programs leave out ACC_8BIT loads (its
    code does not fit the 2-bit field) and the ALU rows of :mod:`vtasim.hw.alu` it lacks (MUL), and buffers of 2 elements get 1-element halves."""
    seed = check_seed(seed)
    unknown = set(knobs) - set(DEFAULT_KNOBS)
    if unknown:
        raise ValueError(f"unknown randprog knob {sorted(unknown)[0]!r}; knobs: {', '.join(DEFAULT_KNOBS)}")
    k = dict(DEFAULT_KNOBS, **knobs)
    rng = np.random.default_rng(seed)
    g = _Gen(cfg, rng, k)
    g.nblocks = int(rng.integers(k["blocks"][0], k["blocks"][1] + 1))
    for bidx in range(g.nblocks):
        g.block(bidx)
    leftover = k["leftover"] if k["leftover"] is not None else bool(rng.random() < 0.2)
    g.tail(leftover)
    return g.b.build()


def coverage_bins(image) -> dict:
    """Functional coverage of one program: ``{bin name: hit count}`` for the bins of :data:`ALL_BINS`
    that were hit."""
    f = decode_fields(image.cfg, image.insn_bytes())
    op, mt, x = f["opcode"], f["memory_type"], f["x_size"]
    mod = module_array(f)
    nop = np.isin(op, (OP_LOAD, OP_STORE)) & (x == 0)
    real = ~nop
    bins = {}

    def hit(name, mask):
        c = int(np.count_nonzero(mask))
        if c and name in ALL_BINS:
            bins[name] = bins.get(name, 0) + c

    for code, name in OPCODE_NAMES.items():
        hit(f"op:{name}", (op == code) & real)
    for t, name in MEM_NAMES.items():
        hit(f"load:{name}", (op == OP_LOAD) & (mt == t) & real)
    for m, name in enumerate(MODULE_NAMES):
        hit(f"nop:{name}", nop & (mod == m))
    alu = op == OP_ALU
    for row in ALU_OPS:
        hit(f"alu:{row.mnemonic}:imm", alu & (f["alu_opcode"] == row.opcode) & (f["use_imm"] == 1))
        hit(f"alu:{row.mnemonic}:vec", alu & (f["alu_opcode"] == row.opcode) & (f["use_imm"] == 0))
    shr_imm = alu & (f["alu_opcode"] == ALU_SHR) & (f["use_imm"] == 1)
    hit("alu:shr:negative", shr_imm & (f["imm"] < 0))
    hit("alu:shr:beyond31", shr_imm & (np.abs(f["imm"]) >= 32))
    for pad in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"):
        hit(f"pad:{pad}", (op == OP_LOAD) & real & (f[pad] > 0))
    mem = np.isin(op, (OP_LOAD, OP_STORE)) & real
    hit("dma:multi_row", mem & (f["y_size"] > 1))
    hit("dma:strided", mem & (f["y_size"] > 1) & (f["x_stride"] > x))
    gemm = op == OP_GEMM
    hit("gemm:reset", gemm & (f["reset_reg"] == 1))
    loops = gemm | alu
    hit("loop:empty", loops & ((f["iter_out"] == 0) | (f["iter_in"] == 0)))
    hit("loop:2d", loops & (f["iter_out"] > 1) & (f["iter_in"] > 1))
    hit("loop:multi_uop", loops & (f["uop_end"] - f["uop_bgn"] > 1))
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        for m, name in enumerate(MODULE_NAMES):
            hit(f"flag:{name}:{flag}", (mod == m) & (f[flag] == 1))     # only legal ones are in ALL_BINS
    return bins


def bins_report(hit: dict, n: int) -> list:
    """The bins of :data:`ALL_BINS` hit by ``n`` programs (``hit``: bin -> programs hitting it), as lines:
    a summary, the hit bins grouped by their first word with their counts, then the bins no program hit."""
    lines = [f"coverage: {len(hit)} of {len(ALL_BINS)} bins hit by {n} programs (bin: programs hitting it)"]
    groups = {}
    for b in ALL_BINS:
        if b in hit:
            groups.setdefault(b.split(":")[0], []).append(f"{b} {hit[b]}")
    for g, items in groups.items():
        lines.append(f"  {g:<6} " + ", ".join(items))
    missed = [b for b in ALL_BINS if b not in hit]
    lines.append("  not hit: " + (", ".join(missed) if missed else "none"))
    return lines
