"""ResNet-18 conv2d workloads C2-C11 (hardware spec 7.3) as VTA instruction streams, plus a
GEMM-bound synthetic stream, for benchmarks and cycle-engine tests (until the compiler emits them).

Each layer is conv2d (int8 x int8 -> int32) -> ``>> 8`` -> ``+ bias`` -> ``min 127`` -> ``max 0`` ->
int8, in TVM's packed layouts (data ``(C/BI, H, W)`` of BATCH x BLOCK_IN elements, kernel
``(Cout/BO, Cin/BI, kh, kw)`` of BO x BI elements, output ``(Cout/BO, OH, OW)``).  The schedule is a
simple version of what TVM's conv2d schedule and runtime emit:

* output tiles of ``th`` rows x all columns x ``obs`` output-channel blocks; the reduction over input
  channels split into groups of ``cbs`` blocks when the input tile does not fit;
* per step (tile, channel group): LOAD INP per channel block with the spatial padding done by DMA
  pads (``x_pad`` both sides, ``y_pad`` at the image border), LOAD WGT of the group; compute: GEMM
  reset (first group), one GEMM whose uop kernel covers (ob, cb, ky, kx) and whose two loops walk the
  tile's rows and columns, then SHR 8, ADD bias (vector, the bias lives in the accumulator), MIN 127,
  MAX 0 (last group); one STORE per output-channel block;
* two SRAM halves (TVM's virtual threads) with the runtime's token protocol, so loads and stores of
  neighbouring steps overlap compute; uop kernels loaded once, bias loaded once;
* ``reduce`` shrinks the spatial size (H, W divided by ``reduce``, at least the kernel size) for fast
  tests; channels stay as in the layer.

Every MAC tile is computed exactly once, so ``gemm_counter`` equals the ideal count of spec 7.3 at
full size.  ``expected`` comes from a numpy reference (im2col matrix product in int64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.config import MEM_ACC, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig
from hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_SHR
from sim.builder import ProgramBuilder
from sim.errors import SimError

__all__ = ["Conv", "RESNET18", "conv_image", "conv_reference", "gemm_bound_image", "plan"]


@dataclass(frozen=True)
class Conv:
    name: str
    h: int
    w: int
    cin: int
    cout: int
    k: int
    pad: int
    stride: int

    def reduced(self, reduce: int) -> "Conv":
        if not isinstance(reduce, int) or reduce < 1:
            raise SimError(f"reduce = {reduce!r} must be an integer >= 1")
        h = max(self.h // reduce, self.k)
        w = max(self.w // reduce, self.k)
        return Conv(self.name, h, w, self.cin, self.cout, self.k, self.pad, self.stride)

    @property
    def oh(self):
        return (self.h + 2 * self.pad - self.k) // self.stride + 1

    @property
    def ow(self):
        return (self.w + 2 * self.pad - self.k) // self.stride + 1

    @property
    def macs(self):
        return self.oh * self.ow * self.cout * self.cin * self.k * self.k


RESNET18 = {c.name: c for c in (
    Conv("C2", 56, 56, 64, 64, 3, 1, 1), Conv("C3", 56, 56, 64, 128, 3, 1, 2),
    Conv("C4", 56, 56, 64, 128, 1, 0, 2), Conv("C5", 28, 28, 128, 128, 3, 1, 1),
    Conv("C6", 28, 28, 128, 256, 3, 1, 2), Conv("C7", 28, 28, 128, 256, 1, 0, 2),
    Conv("C8", 14, 14, 256, 256, 3, 1, 1), Conv("C9", 14, 14, 256, 512, 3, 1, 2),
    Conv("C10", 14, 14, 256, 512, 1, 0, 2), Conv("C11", 7, 7, 512, 512, 3, 1, 1))}


def _divisors_desc(n):
    return [d for d in range(n, 0, -1) if n % d == 0]


@dataclass(frozen=True)
class Plan:
    th: int          # output rows per tile
    obs: int         # output-channel blocks per tile
    cbs: int         # input-channel blocks per reduction step
    rows_t: int      # input rows held per channel block (for th output rows)
    wp: int          # padded input width
    inp_half: int
    wgt_half: int
    acc_half: int
    bias_len: int


def plan(cfg: VTAConfig, c: Conv) -> Plan:
    """Choose tile sizes so the inp/wgt/acc tiles of one step fit half of each buffer."""
    n_cb, n_ob = c.cin // cfg.block_in, c.cout // cfg.block_out
    wp = c.w + 2 * c.pad
    bias_len = n_ob
    inp_half, wgt_half = cfg.inp_depth // 2, cfg.wgt_depth // 2
    acc_half = (cfg.acc_depth - bias_len) // 2
    kk = c.k * c.k
    for th in range(c.oh, 0, -1):
        rows_t = (th - 1) * c.stride + c.k
        for obs in _divisors_desc(n_ob):
            if obs * th * c.ow > acc_half:
                continue
            for cbs in _divisors_desc(n_cb):
                # uop kernels: 4 GEMM variants (inp/wgt half x acc half) + per acc half a tile and a
                # bias kernel per output-block group, all resident at once
                uops = 4 * obs * cbs * kk + 2 * obs * (1 + n_ob // obs)
                if cbs * rows_t * wp <= inp_half and obs * cbs * kk <= wgt_half and uops <= cfg.uop_depth:
                    return Plan(th, obs, cbs, rows_t, wp, inp_half, wgt_half, acc_half, bias_len)
    raise SimError(f"{c.name}: no tiling fits the buffers of config {cfg.bitstream}")


def conv_reference(c: Conv, x, w, bias) -> np.ndarray:
    """int8 output (N, Cout, OH, OW) of conv -> >>8 -> +bias -> clip [0, 127] (spec 7.3)."""
    n = x.shape[0]
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (c.pad, c.pad), (c.pad, c.pad)))
    cols = np.empty((n, c.cin, c.k, c.k, c.oh, c.ow), np.int64)
    for ky in range(c.k):
        for kx in range(c.k):
            cols[:, :, ky, kx] = xp[:, :, ky:ky + c.stride * c.oh:c.stride, kx:kx + c.stride * c.ow:c.stride]
    acc = np.einsum("nkp,ok->nop", cols.reshape(n, -1, c.oh * c.ow), w.reshape(c.cout, -1).astype(np.int64))
    acc = ((acc + (1 << 31)) % (1 << 32) - (1 << 31)) >> 8
    acc = acc + bias.astype(np.int64)[None, :, None]
    return np.clip(acc, 0, 127).astype(np.int8).reshape(n, c.cout, c.oh, c.ow)


def _pack_act(cfg, x):
    """(N, C, H, W) -> DRAM elements (C/BI, H, W) of (BATCH, BI), for N = BATCH."""
    n, ch, h, w = x.shape
    return x.reshape(n, ch // cfg.block_in, cfg.block_in, h, w).transpose(1, 3, 4, 0, 2)


def conv_image(cfg: VTAConfig, layer, reduce: int = 1, seed: int = 0):
    """MemoryImage of one conv layer (``layer``: a name of :data:`RESNET18` or a :class:`Conv`)."""
    c = (RESNET18[layer] if isinstance(layer, str) else layer).reduced(reduce)
    if c.cin % cfg.block_in or c.cout % cfg.block_out:
        raise SimError(f"{c.name}: channels {c.cin}->{c.cout} are not multiples of BLOCK {cfg.block_in}")
    p = plan(cfg, c)
    rng = np.random.default_rng([seed, c.h, c.cin, c.cout, c.k, c.stride])
    nb = cfg.batch
    x = rng.integers(-128, 128, (nb, c.cin, c.h, c.w)).astype(np.int8)
    w = rng.integers(-128, 128, (c.cout, c.cin, c.k, c.k)).astype(np.int8)
    bias = rng.integers(-(1 << 14), 1 << 14, c.cout).astype(np.int32)
    bi, bo = cfg.block_in, cfg.block_out
    n_cb, n_ob, kk = c.cin // bi, c.cout // bo, c.k * c.k

    b = ProgramBuilder(cfg)
    xb = b.data("x", _pack_act(cfg, x))
    wb = b.data("w", w.reshape(n_ob, bo, n_cb, bi, c.k, c.k).transpose(0, 2, 4, 5, 1, 3))
    biasb = b.data("bias", np.broadcast_to(bias.reshape(n_ob, 1, bo), (n_ob, nb, bo)))
    out = b.output("y", n_ob * c.oh * c.ow * cfg.out_elem_bytes)

    # ---- uop kernels (absolute SRAM indices; one per buffer half combination) ----
    acc0 = p.bias_len
    kernels, triples = {}, []

    def kernel(key, uops):
        if key not in kernels:
            kernels[key] = (len(triples), len(triples) + len(uops))
            triples.extend(uops)
        return kernels[key]

    def acc_base(h):
        return acc0 + h * p.acc_half

    for hs in (0, 1):
        for ha in (0, 1):
            kernel(("gemm", hs, ha), [
                (acc_base(ha) + o * p.th * c.ow, hs * p.inp_half + cb * p.rows_t * p.wp + ky * p.wp + kx,
                 hs * p.wgt_half + (o * p.cbs + cb) * kk + ky * c.k + kx)
                for o in range(p.obs) for cb in range(p.cbs) for ky in range(c.k) for kx in range(c.k)])
        kernel(("tile", hs), [(acc_base(hs) + o * p.th * c.ow, acc_base(hs) + o * p.th * c.ow, 0)
                              for o in range(p.obs)])
        for ob0 in range(0, n_ob, p.obs):
            # bias add: one uop per output block, its src the block's bias element
            kernel(("bias", hs, ob0), [(acc_base(hs) + o * p.th * c.ow, ob0 + o, 0) for o in range(p.obs)])
    ub = b.uops(triples)
    if len(triples) > cfg.uop_depth:
        raise SimError(f"{c.name}: {len(triples)} uops exceed the uop buffer ({cfg.uop_depth})")
    b.load(memory_type=MEM_UOP, sram_base=0, dram_base=ub, x_size=len(triples))
    b.load(memory_type=MEM_ACC, sram_base=0, dram_base=biasb, x_size=n_ob)

    tiles = [(ob0, oy0) for ob0 in range(0, n_ob, p.obs) for oy0 in range(0, c.oh, p.th)]
    groups = list(range(0, n_cb, p.cbs))
    step = 0
    for t, (ob0, oy0) in enumerate(tiles):
        th = min(p.th, c.oh - oy0)
        ha = t % 2
        for g, cb0 in enumerate(groups):
            hs = step % 2
            # load part
            rows = (th - 1) * c.stride + c.k
            top = oy0 * c.stride - c.pad
            yp0, yp1 = max(0, -top), max(0, top + rows - c.h)
            for cb in range(p.cbs):
                deps = {"pop_next": 1} if cb == 0 and step >= 2 else {}
                b.load(memory_type=MEM_INP, sram_base=hs * p.inp_half + cb * p.rows_t * p.wp,
                       dram_base=xb.elem(MEM_INP, ((cb0 + cb) * c.h + top + yp0) * c.w),
                       y_size=rows - yp0 - yp1, x_size=c.w, x_stride=c.w, y_pad_0=yp0, y_pad_1=yp1,
                       x_pad_0=c.pad, x_pad_1=c.pad, **deps)
            b.load(memory_type=MEM_WGT, sram_base=hs * p.wgt_half,
                   dram_base=wb.elem(MEM_WGT, (ob0 * n_cb + cb0) * kk), y_size=p.obs, x_size=p.cbs * kk,
                   x_stride=n_cb * kk, push_next=1)
            # compute part
            last = g == len(groups) - 1
            loops = dict(iter_out=th, iter_in=c.ow, dst_factor_out=c.ow, dst_factor_in=1)
            first = dict(pop_prev=1, **({"pop_next": 1} if g == 0 and t >= 2 else {}))
            if g == 0:
                ubgn, uend = kernels[("tile", ha)]
                b.gemm(reset_reg=1, uop_bgn=ubgn, uop_end=uend, **loops, **first)
                first = {}
            ubgn, uend = kernels[("gemm", hs, ha)]
            tail = dict(push_prev=1, **({"push_next": 1} if last else {}))
            b.gemm(uop_bgn=ubgn, uop_end=uend, src_factor_out=c.stride * p.wp, src_factor_in=c.stride,
                   **loops, **first, **(tail if not last else {}))
            if last:
                ubgn, uend = kernels[("tile", ha)]
                for op, imm in ((ALU_SHR, 8), (ALU_ADD, None), (ALU_MIN, 127), (ALU_MAX, 0)):
                    deps = tail if op == ALU_MAX else {}
                    if imm is None:
                        bb, be = kernels[("bias", ha, ob0)]
                        b.alu(alu_opcode=op, use_imm=0, uop_bgn=bb, uop_end=be, **loops, **deps)
                    else:
                        b.alu(alu_opcode=op, use_imm=1, imm=imm, uop_bgn=ubgn, uop_end=uend,
                              src_factor_out=c.ow, src_factor_in=1, **loops, **deps)
                # store part
                for o in range(p.obs):
                    deps = {}
                    if o == 0:
                        deps["pop_prev"] = 1
                    if o == p.obs - 1:
                        deps["push_prev"] = 1
                    b.store(sram_base=acc_base(ha) + o * p.th * c.ow,
                            dram_base=out.elem(MEM_OUT, ((ob0 + o) * c.oh + oy0) * c.ow),
                            y_size=th, x_size=c.ow, x_stride=c.ow, **deps)
            step += 1
    # closing sequence: drain g2l, l2g + s2g into the final compute NOPs, FINISH
    for n in range(min(2, step)):
        b.nop("load", pop_next=1, **({"push_next": 1} if n == min(2, step) - 1 else {}))
    for n in range(min(2, len(tiles))):
        b.nop("compute", pop_next=1, **({"pop_prev": 1} if n == min(2, len(tiles)) - 1 else {}))
    b.finish()
    b.expect("y", _pack_act(cfg, conv_reference(c, x, w, bias)))
    return b.build()


def gemm_bound_image(cfg: VTAConfig, gemms: int = 16, repeat: int = 256, seed: int = 0):
    """A GEMM-bound synthetic stream: one small load of everything, then ``gemms`` GEMMs of
    ``16 * repeat * 16`` uops each (16 uops x 16 row blocks x ``repeat`` passes), one STORE.

    Accumulator element ``16 r + u`` receives ``gemms * repeat`` times ``inp[16 r + u] . wgt[u]``;
    the expected bytes are that sum, wrapped to int32 and truncated to int8 by the STORE."""
    rng = np.random.default_rng(seed)
    nb, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    n = 256
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
        b.gemm(uop_bgn=0, uop_end=16, iter_out=16, iter_in=repeat, dst_factor_out=16, src_factor_out=16,
               **({"push_next": 1} if g == gemms - 1 else {}))
    b.store(dram_base=out, x_size=n, pop_prev=1, push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    dots = np.einsum("rubk,uok->rubo", x.reshape(16, 16, nb, bi).astype(np.int64), w.astype(np.int64))
    acc = (dots * gemms * repeat).reshape(n, nb * bo)
    b.expect("y", (acc & 0xFF).astype(np.uint8))
    return b.build()
