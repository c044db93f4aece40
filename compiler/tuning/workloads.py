"""The workload catalogue behind ``vtasim compile`` and ``vtasim tune``.

Names::

    resnet18.C2 ... resnet18.C11    ResNet-18 conv2d layers (compiler spec 7.1), fused epilogue
    conv2d.H.W.CIN.COUT.K.PAD.STRIDE a conv2d of any shape with the same epilogue
    dense.<batch>x<in>x<out>        dense_packed -> >> s -> clip(0, 127) -> int8 (spec 7.2)
    gemm.<m>x<k>x<n>                a plain int8 GEMM (int32 accumulate, int8 truncating store)
    vadd.<n>                        vector add of two int32 vectors on the ALU (spec 3.2)
    group_conv2d.*, depthwise_conv2d.*, dilated_conv2d.*, conv2d_transpose.*   see vtasim.compiler.tuning.workloads_grouped

The conv and dense epilogues shift by ``s``, derived from the reduction length (the data rule of
:mod:`vtasim.compiler.ops.data`); ``out_bounds`` are the values an output can take (the clip, or int8).

``reduce=R`` divides a conv layer's H and W by R (at least the kernel size) for quick runs; the
channels, kernel, padding and stride stay those of the layer.

Bounds, checked when the name is parsed (before anything is allocated): every number of a name is an
integer of at most :data:`MAX_EXTENT`; kernel and stride are >= 1, the kernel fits the padded input;
every tensor the workload makes (the input, the padded input, weights, output, and a conv's im2col
window, which the numpy reference gathers) has at most ``MAX_TENSOR_ELEMENTS`` elements
(:mod:`vtasim.compiler.dsl.tensor`); the tensors' bytes together fit ``MAX_DRAM_BYTES`` (:mod:`vtasim.sim.image`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from vtasim.compiler.errors import CompileError
from vtasim.compiler.dsl.tensor import MAX_TENSOR_ELEMENTS
from vtasim.compiler.tuning.workloads_grouped import GROUPED_NAMES, GROUPED_PATTERNS, Conv2dTranspose, ConvShape, GroupConv2d
from vtasim.sim.image import MAX_DRAM_BYTES

__all__ = ["Conv2d", "Dense", "Gemm", "VAdd", "GroupConv2d", "Conv2dTranspose", "RESNET18", "parse_workload",
           "catalogue_names", "MAX_EXTENT", "check_size", "check_seed"]

MAX_EXTENT = MAX_TENSOR_ELEMENTS    # any number of a workload name (a dimension, a kernel, a pad, a stride)


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

    def tensors(self) -> dict:
        """``{tensor: (elements, bytes in DRAM)}`` (the padded input and the im2col window live only in
        the reference; 0 DRAM bytes)."""
        b, pad_h, pad_w = self.batch, self.h + 2 * self.pad, self.w + 2 * self.pad
        return {"input": (b * self.cin * self.h * self.w, b * self.cin * self.h * self.w),
                "padded input": (b * self.cin * pad_h * pad_w, 0),
                "im2col window": (b * self.oh * self.ow * self.cin * self.k * self.k, 0),
                "weight": (self.cout * self.cin * self.k * self.k, self.cout * self.cin * self.k * self.k),
                "bias": (self.cout, 4 * self.cout),
                "output": (b * self.cout * self.oh * self.ow, b * self.cout * self.oh * self.ow)}

    def reduced(self, reduce: int) -> "Conv2d":
        _check_reduce(reduce)
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

    def tensors(self) -> dict:
        return {"input": (self.batch * self.cin,) * 2, "weight": (self.cin * self.cout,) * 2,
                "output": (self.batch * self.cout,) * 2}

    def reduced(self, reduce: int) -> "Dense":
        _check_reduce(reduce)
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

    def tensors(self) -> dict:
        return {"input A": (self.n, 4 * self.n), "input B": (self.n, 4 * self.n), "output": (self.n, self.n)}

    def reduced(self, reduce: int) -> "VAdd":
        _check_reduce(reduce)
        return self


def check_seed(seed, what: str = "seed") -> int:
    """``seed`` (of a workload's random inputs, of a search) if it is an integer in [0, 2^64) (numpy's
    seed rule), else a CompileError."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
        shown = seed if not isinstance(seed, int) or seed.bit_length() < 80 else f"<{seed.bit_length()}-bit integer>"
        raise CompileError(f"{what} {shown!r} is not a valid seed (rule: an integer in [0, 2^64))")
    return seed


def _check_reduce(reduce) -> None:
    if isinstance(reduce, bool) or not isinstance(reduce, int) or not 1 <= reduce <= MAX_EXTENT:
        raise CompileError(f"reduce = {reduce!r} must be an integer in [1, {MAX_EXTENT}] (rule: reduce divides "
                           f"a conv layer's H and W)")


RESNET18 = {f"resnet18.{c.name}": c for c in (
    Conv2d("C2", 56, 56, 64, 64, 3, 1, 1), Conv2d("C3", 56, 56, 64, 128, 3, 1, 2),
    Conv2d("C4", 56, 56, 64, 128, 1, 0, 2), Conv2d("C5", 28, 28, 128, 128, 3, 1, 1),
    Conv2d("C6", 28, 28, 128, 256, 3, 1, 2), Conv2d("C7", 28, 28, 128, 256, 1, 0, 2),
    Conv2d("C8", 14, 14, 256, 256, 3, 1, 1), Conv2d("C9", 14, 14, 256, 512, 3, 1, 2),
    Conv2d("C10", 14, 14, 256, 512, 1, 0, 2), Conv2d("C11", 7, 7, 512, 512, 3, 1, 1))}

_PATTERNS = (   # (pattern, class, the names of its numbers)
    (re.compile(r"dense\.(\d+)x(\d+)x(\d+)$", re.ASCII), Dense, ("batch", "in features", "out features")),
    (re.compile(r"gemm\.(\d+)x(\d+)x(\d+)$", re.ASCII), Gemm, ("batch", "in features", "out features")),
    (re.compile(r"vadd\.(\d+)$", re.ASCII), VAdd, ("length",)),
    (re.compile(r"conv2d\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)$", re.ASCII), Conv2d,
     ("height", "width", "in channels", "out channels", "kernel", "pad", "stride")),
)


def _numbers(name: str, m, fields) -> list:
    """The numbers of a matched name, each checked against MAX_EXTENT before it is converted (a
    5000-digit number has no int)."""
    out = []
    for what, digits in zip(fields, m.groups()):
        digits = digits.lstrip("0") or "0"
        if len(digits) > len(str(MAX_EXTENT)) or int(digits) > MAX_EXTENT:
            shown = digits if len(digits) <= 30 else f"{digits[:12]}... ({len(digits)} digits)"
            raise CompileError(f"{name[:80]}: {what} = {shown} is more than MAX_EXTENT = {MAX_EXTENT} "
                               f"(rule: every number of a workload name is at most {MAX_EXTENT})")
        if int(digits) < 1 and what not in ("pad", "number"):
            raise CompileError(f"{name[:80]}: {what} = 0 must be at least 1 (rule: every size of a workload is "
                               f"positive; only a pad may be 0)")
        out.append(int(digits))
    return out


def catalogue_names() -> list[str]:
    return list(RESNET18) + ["conv2d.H.W.CIN.COUT.K.PAD.STRIDE", "dense.BxINxOUT", "gemm.MxKxN", "vadd.N"] + GROUPED_NAMES


def parse_workload(name: str, cfg=None, reduce: int = 1):
    """The workload called ``name``; with ``cfg``, checked against the config's block sizes."""
    if name in RESNET18:
        wl = RESNET18[name]
    elif name.removeprefix("resnet18.") in {k.split(".")[1] for k in RESNET18}:
        wl = RESNET18["resnet18." + name.removeprefix("resnet18.")]
    else:
        if not isinstance(name, str):
            raise CompileError(f"workload name {name!r} must be a string")
        for pat, cls, fields in _PATTERNS:
            m = pat.match(name)
            if m:
                wl = cls(name, *_numbers(name, m, fields))
                break
        else:
            for pat, make in GROUPED_PATTERNS:
                m = pat.match(name) if len(name) < 400 else None
                if m:
                    _numbers(name, m, ("number",) * len(m.groups()))     # the same bound on each number
                    wl = make(name, m)
                    break
            else:
                raise CompileError(f"unknown workload {name[:80]!r} (rule: a catalogue name: {', '.join(catalogue_names())})")
    wl = wl.reduced(reduce)
    if isinstance(wl, (Conv2d, GroupConv2d, Conv2dTranspose)) and cfg is not None:
        wl = replace(wl, batch=cfg.batch)     # TVM's conv benchmarks run batch = env.BATCH
    check_size(wl)
    if cfg is not None:
        _check_fits(wl, cfg)
    return wl


def check_size(wl) -> None:
    """The bounds of the module docstring: positive sizes, a kernel within the padded input, every tensor
    within MAX_TENSOR_ELEMENTS, the DRAM total within MAX_DRAM_BYTES; one CompileError naming the value."""
    if isinstance(wl, Conv2d):
        for what, value in (("kernel", wl.k), ("stride", wl.stride)):
            if value < 1:
                raise CompileError(f"{wl.name}: {what} = {value} must be at least 1 (rule: a conv2d has a kernel "
                                   f"and a stride of at least 1)")
        if wl.k > wl.h + 2 * wl.pad or wl.k > wl.w + 2 * wl.pad:
            raise CompileError(f"{wl.name}: kernel {wl.k} is larger than the padded input "
                               f"{wl.h + 2 * wl.pad}x{wl.w + 2 * wl.pad} (rule: the kernel fits the padded input)")
    total = 0
    for what, (elements, nbytes) in (wl.tensors().items() if hasattr(wl, "tensors") else ()):
        if elements > MAX_TENSOR_ELEMENTS:
            raise CompileError(f"{wl.name}: the {what} has {elements} elements, more than MAX_TENSOR_ELEMENTS = "
                               f"{MAX_TENSOR_ELEMENTS} (rule: every tensor of a workload, as the reference "
                               f"holds it in int64, stays within 2^22 elements)")
        total += nbytes
    if total > MAX_DRAM_BYTES:
        raise CompileError(f"{wl.name}: its tensors need {total} bytes of DRAM, more than MAX_DRAM_BYTES = "
                           f"{MAX_DRAM_BYTES} (rule: a memory image holds at most 1 GiB)")


def _check_fits(wl, cfg) -> None:
    """Channel counts must be whole blocks, the batch a whole number of BATCH (the packed layouts)."""
    rules = []
    if isinstance(wl, (GroupConv2d, Conv2dTranspose)):
        wl.check(cfg)
    elif isinstance(wl, Conv2d):
        rules = [("in channels", wl.cin, cfg.block_in), ("out channels", wl.cout, cfg.block_out),
                 ("batch", wl.batch, cfg.batch)]
    elif isinstance(wl, Dense):
        rules = [("batch", wl.batch, cfg.batch), ("in features", wl.cin, cfg.block_in),
                 ("out features", wl.cout, cfg.block_out)]
    elif isinstance(wl, VAdd):
        rules = [("length", wl.n, cfg.batch * cfg.block_out)]
    for what, value, block in rules:
        if value <= 0 or value % block:
            raise CompileError(f"{wl.name}: {what} = {value} must be a positive multiple of {block} "
                               f"(config {cfg.model})")
