"""The workload catalogue behind ``vtasim compile`` and ``vtasim tune``.

Names::

    resnet18.C2 ... resnet18.C11    ResNet-18 conv2d layers (compiler spec 7.1), fused epilogue
    conv2d.H.W.CIN.COUT.K.PAD.STRIDE a conv2d of any shape with the same epilogue
    dense.<batch>x<in>x<out>        dense_packed -> >> s -> clip(0, 127) -> int8 (spec 7.2)
    gemm.<m>x<k>x<n>                a plain int8 GEMM (int32 accumulate, int8 truncating store)
    vadd.<n>                        vector add of two int32 vectors on the ALU (spec 3.2)
    group_conv2d.*, depthwise_conv2d.*, dilated_conv2d.*, conv2d_transpose.*   see compiler.workloads_grouped

The conv and dense epilogues shift by ``s``, derived from the reduction length (the data rule of
:mod:`compiler.ops.data`); ``out_bounds`` are the values an output can take (the clip, or int8).

``reduce=R`` divides a conv layer's H and W by R (at least the kernel size) for quick runs; the
channels, kernel, padding and stride stay those of the layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from compiler.errors import CompileError
from compiler.workloads_grouped import GROUPED_NAMES, GROUPED_PATTERNS, Conv2dTranspose, ConvShape, GroupConv2d

__all__ = ["Conv2d", "Dense", "Gemm", "VAdd", "GroupConv2d", "Conv2dTranspose", "RESNET18", "parse_workload",
           "catalogue_names"]


@dataclass(frozen=True)
class Conv2d(ConvShape):
    batch: int = 1
    kind = "conv2d"
    out_bounds = (0, 127)

    @property
    def reduction(self) -> int:
        """Products summed into one output: input channels x kernel taps."""
        return self.cin * self.k * self.k

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad - self.k) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad - self.k) // self.stride + 1

    @property
    def macs(self) -> int:
        return self.batch * self.oh * self.ow * self.cout * self.cin * self.k * self.k

    def ideal_gemm_uops(self, cfg) -> int:
        """GEMM uop executions when every MAC tile is computed once (spec 7.1's last column)."""
        return (self.batch // cfg.batch) * self.oh * self.ow * self.k * self.k * \
            (self.cin // cfg.block_in) * (self.cout // cfg.block_out)

    def reduced(self, reduce: int) -> "Conv2d":
        if isinstance(reduce, bool) or not isinstance(reduce, int) or reduce < 1:
            raise CompileError(f"reduce = {reduce!r} must be an integer >= 1")
        if reduce == 1:
            return self
        return replace(self, name=f"{self.name}/r{reduce}", h=max(self.h // reduce, self.k),
                       w=max(self.w // reduce, self.k))


@dataclass(frozen=True)
class Dense:
    name: str
    batch: int
    cin: int
    cout: int
    kind = "dense"
    out_bounds = (0, 127)

    @property
    def reduction(self) -> int:
        return self.cin

    @property
    def macs(self) -> int:
        return self.batch * self.cin * self.cout

    def ideal_gemm_uops(self, cfg) -> int:
        return (self.batch // cfg.batch) * (self.cin // cfg.block_in) * (self.cout // cfg.block_out)

    def reduced(self, reduce: int) -> "Dense":
        return self


@dataclass(frozen=True)
class Gemm(Dense):
    kind = "gemm"
    out_bounds = (-128, 127)        # no clip: the store truncates to int8


@dataclass(frozen=True)
class VAdd:
    name: str
    n: int
    kind = "vadd"
    out_bounds = (-128, 127)

    def ideal_gemm_uops(self, cfg) -> int:
        return 0

    def reduced(self, reduce: int) -> "VAdd":
        return self


RESNET18 = {f"resnet18.{c.name}": c for c in (
    Conv2d("C2", 56, 56, 64, 64, 3, 1, 1), Conv2d("C3", 56, 56, 64, 128, 3, 1, 2),
    Conv2d("C4", 56, 56, 64, 128, 1, 0, 2), Conv2d("C5", 28, 28, 128, 128, 3, 1, 1),
    Conv2d("C6", 28, 28, 128, 256, 3, 1, 2), Conv2d("C7", 28, 28, 128, 256, 1, 0, 2),
    Conv2d("C8", 14, 14, 256, 256, 3, 1, 1), Conv2d("C9", 14, 14, 256, 512, 3, 1, 2),
    Conv2d("C10", 14, 14, 256, 512, 1, 0, 2), Conv2d("C11", 7, 7, 512, 512, 3, 1, 1))}

_PATTERNS = (
    (re.compile(r"dense\.(\d+)x(\d+)x(\d+)$"), lambda n, m: Dense(n, *map(int, m.groups()))),
    (re.compile(r"gemm\.(\d+)x(\d+)x(\d+)$"), lambda n, m: Gemm(n, *map(int, m.groups()))),
    (re.compile(r"vadd\.(\d+)$"), lambda n, m: VAdd(n, int(m.group(1)))),
    (re.compile(r"conv2d\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)$"),
     lambda n, m: Conv2d(n, *map(int, m.groups()))),
) + GROUPED_PATTERNS


def catalogue_names() -> list[str]:
    return list(RESNET18) + ["conv2d.H.W.CIN.COUT.K.PAD.STRIDE", "dense.BxINxOUT", "gemm.MxKxN", "vadd.N"] + GROUPED_NAMES


def parse_workload(name: str, cfg=None, reduce: int = 1):
    """The workload called ``name``; with ``cfg``, checked against the config's block sizes."""
    if name in RESNET18:
        wl = RESNET18[name]
    elif name.removeprefix("resnet18.") in {k.split(".")[1] for k in RESNET18}:
        wl = RESNET18["resnet18." + name.removeprefix("resnet18.")]
    else:
        for pat, make in _PATTERNS:
            m = pat.match(name)
            if m:
                wl = make(name, m)
                break
        else:
            raise CompileError(f"unknown workload {name!r}; the catalogue has: {', '.join(catalogue_names())}")
    wl = wl.reduced(reduce)
    if cfg is not None:
        if isinstance(wl, (Conv2d, GroupConv2d, Conv2dTranspose)):
            wl = replace(wl, batch=cfg.batch)     # TVM's conv benchmarks run batch = env.BATCH
        _check_fits(wl, cfg)
    return wl


def _check_fits(wl, cfg) -> None:
    """Channel counts must be whole blocks, the batch a whole number of BATCH (the packed layouts)."""
    rules = []
    if isinstance(wl, (GroupConv2d, Conv2dTranspose)):
        wl.check(cfg)
    elif isinstance(wl, Conv2d):
        rules = [("in channels", wl.cin, cfg.block_in), ("out channels", wl.cout, cfg.block_out),
                 ("batch", wl.batch, cfg.batch)]
        if wl.k > wl.h + 2 * wl.pad or wl.k > wl.w + 2 * wl.pad:
            raise CompileError(f"{wl.name}: kernel {wl.k} is larger than the padded input")
    elif isinstance(wl, Dense):
        rules = [("batch", wl.batch, cfg.batch), ("in features", wl.cin, cfg.block_in),
                 ("out features", wl.cout, cfg.block_out)]
    elif isinstance(wl, VAdd):
        rules = [("length", wl.n, cfg.batch * cfg.block_out)]
    for what, value, block in rules:
        if value <= 0 or value % block:
            raise CompileError(f"{wl.name}: {what} = {value} must be a positive multiple of {block} "
                               f"(config {cfg.model})")
