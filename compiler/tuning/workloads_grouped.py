"""Grouped, depthwise, dilated and transposed convolutions in the workload catalogue.

Names (``vtasim compile NAME``)::

    group_conv2d.H.W.CIN.COUT.K.PAD.STRIDE.GROUPS     grouped conv2d, the fused epilogue of conv2d.*
    depthwise_conv2d.H.W.C.K.PAD.STRIDE               groups = C = CIN = COUT
    dilated_conv2d.H.W.CIN.COUT.K.PAD.STRIDE.DILATION one group, the taps DILATION pixels apart
    conv2d_transpose.H.W.CIN.COUT.K.PAD.STRIDE        transposed conv2d (the zero taps skipped)

How a grouped layer maps onto the blocks (:meth:`GroupConv2d.packing`): when a group's input and
output channels are whole blocks (``CIN/GROUPS`` a multiple of BLOCK_IN, ``COUT/GROUPS`` of
BLOCK_OUT) every group is its own GEMM; when they divide a block (depthwise: one channel per
group), ``BLOCK_IN / (CIN/GROUPS)`` neighbouring groups share one block and their weights are a
block-diagonal matrix (zeros between groups).  Each such "super-group" is then a GEMM over whole
blocks, so both cases run one schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from vtasim.compiler.errors import CompileError

__all__ = ["ConvShape", "GroupConv2d", "Conv2dTranspose", "GROUPED_PATTERNS", "GROUPED_NAMES"]


def _fail(name, what, value, rule):
    raise CompileError(f"{name}: {what} = {value} {rule}")


@dataclass(frozen=True)
class ConvShape:
    """The fields every catalogue convolution has: a square kernel ``k``, equal strides and pads."""

    name: str
    h: int
    w: int
    cin: int
    cout: int
    k: int
    pad: int
    stride: int
    out_bounds = (0, 127)           # the requantising epilogue clips to [0, 127]


@dataclass(frozen=True)
class GroupConv2d(ConvShape):
    """A conv2d with ``groups`` groups and ``dilation`` (square kernel, equal strides)."""

    groups: int = 1
    dilation: int = 1
    batch: int = 1
    kind = "group_conv2d"

    @property
    def span(self) -> int:
        """Rows (and columns) of input one output pixel reads: the dilated kernel."""
        return self.dilation * (self.k - 1) + 1

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad - self.span) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad - self.span) // self.stride + 1

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.cin == self.cout

    @property
    def macs(self) -> int:
        """Multiply-accumulates the layer needs (those of its groups only)."""
        return self.batch * self.oh * self.ow * self.cout * (self.cin // self.groups) * self.k * self.k

    def packing(self, cfg) -> tuple:
        """``(super_groups, in_blocks, out_blocks, groups_per_block)``: the GEMM groups VTA runs, the
        input and output channel blocks of each, and how many real groups share one block (1 when
        every group is whole blocks; BLOCK_IN for depthwise)."""
        cpg, opg = self.cin // self.groups, self.cout // self.groups
        if cpg % cfg.block_in == 0 and opg % cfg.block_out == 0:
            return self.groups, cpg // cfg.block_in, opg // cfg.block_out, 1
        fold = cfg.block_in // cpg
        if cfg.block_in % cpg or cfg.block_out % opg or cfg.block_out // opg != fold:
            raise CompileError(
                f"{self.name}: {cpg} input and {opg} output channels per group fit neither whole blocks "
                f"(multiples of BLOCK_IN {cfg.block_in} and BLOCK_OUT {cfg.block_out}) nor one block "
                f"(BLOCK_IN / {cpg} must equal BLOCK_OUT / {opg}, both whole)")
        if self.groups % fold:
            raise CompileError(f"{self.name}: groups = {self.groups} must be a multiple of {fold}, the groups "
                               f"that share one block")
        return self.groups // fold, 1, 1, fold

    def ideal_gemm_uops(self, cfg) -> int:
        """One GEMM uop per (batch block, output pixel, tap, super-group, input block, output block)."""
        sg, ib, ob, _ = self.packing(cfg)
        return (self.batch // cfg.batch) * self.oh * self.ow * self.k * self.k * sg * ib * ob

    def split_extents(self, cfg) -> dict:
        _, ib, ob, _ = self.packing(cfg)
        return {"tile_b": self.batch // cfg.batch, "tile_h": self.oh, "tile_w": self.ow,
                "tile_ci": ib, "tile_co": ob}

    def thread_rules(self, cfg) -> tuple:
        """``(thread knob, extent its value must divide, what)``: oc_nthread splits the super-group loop."""
        return (("oc_nthread", self.packing(cfg)[0], "the super-groups"),
                ("h_nthread", None, "tile_h"))

    def extra_knobs(self) -> dict:
        """``dw_alu``: 0 the block-diagonal GEMM, 1 the ALU form (depthwise, stride 1)."""
        return {"dw_alu": [0, 1]} if self.depthwise and self.stride == 1 else {}

    def tile_fits(self, cfg, b, h, w, ci, co, acc_tensors, acc_tiles: int = 1) -> bool:
        """One tile (inner factors) in the scratchpads: the input window with its dilated halo, the
        weights, ``acc_tiles`` accumulator tiles and ``acc_tensors`` per-channel vectors; the GEMM kernel (one
        uop per output element of the tile, the taps as hardware loops) in the uop buffer."""
        ih, iw = (h - 1) * self.stride + self.span, (w - 1) * self.stride + self.span
        return (b * ci * ih * iw <= cfg.inp_depth and co * ci * self.k * self.k <= cfg.wgt_depth
                and acc_tiles * b * co * h * w + co * acc_tensors <= cfg.acc_depth and b * co * h * w <= cfg.uop_depth)

    def reduced(self, reduce: int) -> "GroupConv2d":
        _check_reduce(reduce)
        if reduce == 1:
            return self
        return replace(self, name=f"{self.name}/r{reduce}", h=max(self.h // reduce, self.span),
                       w=max(self.w // reduce, self.span))

    def check(self, cfg) -> None:
        n = self.name
        for what, v in (("groups", self.groups), ("dilation", self.dilation), ("stride", self.stride),
                        ("kernel", self.k)):
            if v < 1:
                _fail(n, what, v, "must be at least 1")
        if self.cin % self.groups or self.cout % self.groups:
            _fail(n, "groups", self.groups, f"must divide the input ({self.cin}) and output ({self.cout}) channels")
        if self.span > self.h + 2 * self.pad or self.span > self.w + 2 * self.pad:
            _fail(n, "kernel span", self.span, "(dilation x (K - 1) + 1) is larger than the padded input")
        if self.batch % cfg.batch:
            _fail(n, "batch", self.batch, f"must be a multiple of {cfg.batch}")
        self.packing(cfg)


@dataclass(frozen=True)
class Conv2dTranspose(ConvShape):
    """A transposed conv2d (PyTorch's ConvTranspose2d, weights IOHW, no output padding).

    VTA runs it as ``STRIDE x STRIDE`` phase convolutions over the un-dilated input, one per output
    phase ``(Y % STRIDE, X % STRIDE)``: phase ``p`` uses only the kernel taps ``r`` with
    ``r = K - 1 - PAD - p (mod STRIDE)``, ``K / STRIDE`` of them, so no product with an inserted zero
    is ever computed (:meth:`phase_offsets`)."""

    batch: int = 1
    kind = "conv2d_transpose"

    @property
    def oh(self) -> int:
        return (self.h - 1) * self.stride - 2 * self.pad + self.k

    @property
    def ow(self) -> int:
        return (self.w - 1) * self.stride - 2 * self.pad + self.k

    @property
    def taps(self) -> int:
        """Kernel taps per phase and dimension."""
        return self.k // self.stride

    @property
    def macs(self) -> int:
        """The MACs with non-zero inputs (those of the dilated form's zeros left out)."""
        return self.batch * self.oh * self.ow * self.cout * self.cin * self.taps * self.taps

    def phase_offsets(self) -> list:
        """For each phase ``p``: ``(first tap r0, input offset e)`` such that output row
        ``STRIDE*y + p`` sums ``x[y + a + e] * w_flipped[r0 + STRIDE*a]`` over ``a < taps``."""
        q = self.k - 1 - self.pad
        out = []
        for p in range(self.stride):
            r0 = (q - p) % self.stride
            out.append((r0, (p + r0 - q) // self.stride))
        return out

    def ideal_gemm_uops(self, cfg) -> int:
        """One GEMM uop per (batch block, output pixel, non-zero tap, input block, output block)."""
        return (self.batch // cfg.batch) * self.oh * self.ow * self.taps * self.taps * \
            (self.cin // cfg.block_in) * (self.cout // cfg.block_out)

    def split_extents(self, cfg) -> dict:
        return {"tile_b": self.batch // cfg.batch, "tile_h": self.oh // self.stride,
                "tile_w": self.ow // self.stride, "tile_ci": self.cin // cfg.block_in,
                "tile_co": self.cout // cfg.block_out}

    def thread_rules(self, cfg) -> tuple:
        return (("oc_nthread", None, "tile_co"), ("h_nthread", None, "tile_h"))

    def tile_fits(self, cfg, b, h, w, ci, co, acc_tensors, acc_tiles: int = 1) -> bool:
        """One tile of ``h`` x ``w`` phase pixels (each STRIDE x STRIDE outputs) in the scratchpads
        (``acc_tiles`` of them in the accumulator: 2 for the exact requantisation's copy)."""
        e = [off for _, off in self.phase_offsets()]
        ih, iw = h + self.taps - 1 + max(e) - min(e), w + self.taps - 1 + max(e) - min(e)
        s2 = self.stride * self.stride
        return (b * ci * ih * iw <= cfg.inp_depth and co * ci * s2 * self.taps ** 2 <= cfg.wgt_depth
                and acc_tiles * b * co * h * w * s2 + co * acc_tensors <= cfg.acc_depth
                and b * co * h * w * s2 <= cfg.uop_depth)

    def reduced(self, reduce: int) -> "Conv2dTranspose":
        _check_reduce(reduce)
        if reduce == 1:
            return self
        return replace(self, name=f"{self.name}/r{reduce}", h=max(self.h // reduce, 1), w=max(self.w // reduce, 1))

    def check(self, cfg) -> None:
        n = self.name
        if self.stride < 1 or self.k < 1:
            _fail(n, "stride", self.stride, "and the kernel must be at least 1")
        if self.k % self.stride:
            _fail(n, "kernel", self.k, f"must be a multiple of the stride {self.stride} (equal taps per phase)")
        if self.pad > self.k - 1:
            _fail(n, "pad", self.pad, f"must be at most K - 1 = {self.k - 1}")
        if self.oh < self.stride or self.oh % self.stride or self.ow % self.stride:
            _fail(n, "output size", f"{self.oh}x{self.ow}", f"must be a positive multiple of the stride {self.stride}")
        e = [off for _, off in self.phase_offsets()]
        if any(e[p] - e[0] != p * (e[1] - e[0]) for p in range(1, len(e))):
            _fail(n, "phase offsets", e, "are not affine in the phase (stride > 2 with this pad)")
        for what, v, b in (("in channels", self.cin, cfg.block_in), ("out channels", self.cout, cfg.block_out),
                           ("batch", self.batch, cfg.batch)):
            if v <= 0 or v % b:
                _fail(n, what, v, f"must be a positive multiple of {b} (config {cfg.model})")


def _check_reduce(reduce):
    if isinstance(reduce, bool) or not isinstance(reduce, int) or reduce < 1:
        raise CompileError(f"reduce = {reduce!r} must be an integer >= 1")


def _depthwise(n, m):
    h, w, c, k, pad, stride = map(int, m.groups())
    return GroupConv2d(n, h, w, c, c, k, pad, stride, groups=c)


def _dilated(n, m):
    h, w, ci, co, k, pad, stride, dil = map(int, m.groups())
    return GroupConv2d(n, h, w, ci, co, k, pad, stride, dilation=dil)


_D = r"\.(\d+)"
GROUPED_PATTERNS = (
    (re.compile(r"group_conv2d" + _D * 8 + "$"), lambda n, m: GroupConv2d(n, *map(int, m.groups()))),
    (re.compile(r"depthwise_conv2d" + _D * 6 + "$"), _depthwise),
    (re.compile(r"dilated_conv2d" + _D * 8 + "$"), _dilated),
    (re.compile(r"conv2d_transpose" + _D * 7 + "$"), lambda n, m: Conv2dTranspose(n, *map(int, m.groups()))),
)
GROUPED_NAMES = ["group_conv2d.H.W.CIN.COUT.K.PAD.STRIDE.GROUPS", "depthwise_conv2d.H.W.C.K.PAD.STRIDE",
                 "dilated_conv2d.H.W.CIN.COUT.K.PAD.STRIDE.DILATION", "conv2d_transpose.H.W.CIN.COUT.K.PAD.STRIDE"]
