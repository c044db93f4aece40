"""Quantised conv2d and dense layers on VTA: int8 in, int32 accumulate, requantise on the ALU, int8 out.

::

    plan = qnn.plan_requant(s_x * s_w / s_y, qnn.conv_acc_bound(w, b, za), zy, -128, 127, cfg)
    layer = build_qconv(cfg, (1, 32, 14, 14), w, b, strides=1, pads=1, za=za, plan=plan)
    y, result = layer.run(x, engine="cycle")          # int8 NCHW, un-padded
    assert (y == layer.reference(x)).all()           # numpy: qnn.qconv2d + plan.apply

What the compiled program computes, per output channel ``o`` (weights symmetric, ``zw = 0``)::

    acc = sum_{c,r,s} QW[o,c,r,s] * QX_pad[c, y*sh + r, x*sw + s]       GEMM (the padding holds za)
        + (bias[o] - za * sum_{c,r,s} QW[o,c,r,s])                       one int32 vector, T3 folded in
    y   = plan.steps(acc)                                                ALU, in the accumulator
    store int8

* Channels are padded to the blocks and the batch to ``cfg.batch`` (graph_pack's rule); the padding
  is removed from the output.  Padded weights are 0, so padded input channels contribute nothing.
* Spatial padding: the DMA pads with 0, so it does it only when ``za == 0`` and the padding is
  symmetric and fits the 4-bit pad fields; otherwise the input is padded with ``za`` on the host and
  the VTA convolution has pad 0.
* Dense is a 1x1 convolution on a 1x1 image (``(N, K) -> (N, K, 1, 1)``), so it shares the
  convolution's schedule, which loads per-channel vectors into the accumulator.
* Knobs: TopHub when the layer is a ResNet-18 shape with a record for the config, else the largest
  tiles that fit the scratchpads (``vtasim.compiler.tuning.knobs.fitting_knobs``), else the fallback;
  when the TopHub tiles do not fit the extra accumulator vectors the fallback is used
  (``layer.knob_source`` says which).
* The program is compiled once; each input only replaces the input segment of the image (the
  address is recorded by ``build``), and the expected output of ``layer.image(x)`` is the tensor
  expressions evaluated in numpy on that input.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from vtasim.compiler import qnn
from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.knobs import check_knobs, fallback_knobs, fitting_knobs, tophub_knobs
from vtasim.compiler.ops.alu import alu_expr
from vtasim.compiler.ops.conv2d import conv2d_packed, schedule_conv2d_packed
from vtasim.compiler.ops.conv_family import bias_shape
from vtasim.compiler.ops.group_conv2d import ROLES as GROUP_ROLES
from vtasim.compiler.ops.group_conv2d import (group_conv2d_packed, pack_group_bias, pack_group_kernel,
                                       schedule_group_conv2d_packed, unpack_group_output)
from vtasim.compiler.ops.layout import pack_channel_const, pack_nchw, pack_oihw, unpack_nchw
from vtasim.compiler.qnn.grouped import conv2d_grouped_int32
from vtasim.compiler.qnn.conv import norm_pads, norm_pair
from vtasim.compiler.qnn.errors import check_zero_point
from vtasim.compiler.dsl.reference import evaluate
from vtasim.compiler.tuning.workloads import RESNET18, Conv2d, GroupConv2d
from vtasim.sim.engines import run_engine
from vtasim.sim.image import MemoryImage, Segment

__all__ = ["build_qconv", "build_qdense", "QLayer", "check_qconv_packing", "Geometry", "STEP_KINDS"]

STEP_KINDS = ("add", "mul", "min", "max", "shr", "shl")
_DMA_PAD_MAX = 15            # the 4-bit pad fields of a LOAD


@dataclass
class Geometry:
    n: int                   # real batch, channels, spatial sizes
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    strides: tuple
    pads: tuple              # (top, left, bottom, right)
    oh: int
    ow: int
    n_pad: int               # padded to the blocks
    c_pad: int
    o_pad: int
    host_pad: bool           # the host pads with za; the VTA conv has pad 0
    dense: bool = False
    groups: int = 1
    dilation: tuple = (1, 1)

    @property
    def grouped(self) -> bool:
        """Compiled by ``group_conv2d_packed`` (groups or dilation), else by ``conv2d_packed``."""
        return self.groups > 1 or self.dilation != (1, 1)


@dataclass
class QLayer:
    """One compiled quantised layer; see the module docstring."""

    name: str
    cfg: object
    geom: Geometry
    weight: np.ndarray       # int8, OIHW (dense: O, K, 1, 1), un-padded
    bias: np.ndarray         # int32 (O,), the caller's bias
    za: int
    plan: qnn.RequantPlan
    knobs: dict
    knob_source: str
    built: object = field(repr=False)
    output: object = field(repr=False)        # the output te.Tensor
    consts: dict | None = field(repr=False)   # packed constant inputs (kernel, bias, vectors); None: restored
    _counters: dict | None = field(default=None, repr=False)
    residual: object = None                   # a QAddPlan fused into the epilogue (operand "res"), or None

    # ---- shapes ------------------------------------------------------------------------------------
    @property
    def in_shape(self) -> tuple:
        g = self.geom
        return (g.n, g.c) if g.dense else (g.n, g.c, g.h, g.w)

    @property
    def out_shape(self) -> tuple:
        g = self.geom
        return (g.n, g.o) if g.dense else (g.n, g.o, g.oh, g.ow)

    @property
    def macs(self) -> int:
        g = self.geom
        return g.n * g.o * g.oh * g.ow * (g.c // g.groups) * g.kh * g.kw

    # ---- data --------------------------------------------------------------------------------------
    def _check_input(self, x) -> np.ndarray:
        x = np.asarray(x)
        if x.shape != self.in_shape:
            raise qnn.QnnError(f"{self.name}: input shape {x.shape} is not the layer's {self.in_shape}")
        if x.dtype != np.int8:
            raise qnn.QnnError(f"{self.name}: input dtype {x.dtype} must be int8 (uint8 data: subtract 128 "
                               f"from the data and the zero point)")
        return x

    def pack_input(self, x) -> np.ndarray:
        """``x`` in the VTA layout of the placeholder ``data`` (batch/channels padded, host padding)."""
        g = self.geom
        x = self._check_input(x)
        if g.dense:
            x = x.reshape(g.n, g.c, 1, 1)
        full = np.zeros((g.n_pad, g.c_pad, g.h, g.w), dtype=np.int8)
        full[:g.n, :g.c] = x
        if g.host_pad:
            full = qnn.pad_q(full, g.pads, self.za)
        return pack_nchw(full, self.cfg.batch, self.cfg.block_in)

    def _unpack_output(self, packed: np.ndarray) -> np.ndarray:
        g = self.geom
        y = (unpack_group_output(packed) if g.grouped else unpack_nchw(packed))[:g.n, :g.o]
        return y.reshape(g.n, g.o) if g.dense else y

    def image(self, x, expected: bool = True) -> MemoryImage:
        """The compiled program with input ``x`` and (``expected``) its expected output: the tensor
        expressions evaluated in numpy, an oracle independent of the lowering (a layer restored from a
        saved network, :mod:`vtasim.compiler.ops.qlayer_state`, has none: its images carry no expected output)."""
        packed = self.pack_input(x)
        base = self.built.image
        buf = self.built.buffers["data"]
        raw = packed.tobytes()
        if len(raw) != buf.nbytes:            # cannot happen: same placeholder shape
            raise CompileError(f"{self.name}: input is {len(raw)} bytes, the segment {buf.nbytes}")
        segments = [Segment(s.addr, raw) if s.addr == buf.addr else s for s in base.segments]
        want = {self.output.name: evaluate(self.output, {**self.consts, "data": packed}).tobytes()} if expected and self.consts is not None else {}
        return MemoryImage(base.cfg, base.insn_addr, base.insn_count, segments, base.outputs,
                           want, expected_counters=base.expected_counters)

    def run(self, x, engine: str = "cycle", **opts):
        """``(y int8 in the un-padded output shape, RunResult)`` of ``x`` on ``engine`` (the image
        carries no expected output: compare with :meth:`reference`, or check :meth:`image`)."""
        img = self.image(x, expected=False)
        result = run_engine(engine, img, **opts)
        if result.dram is None:
            raise CompileError(f"{self.name}: the {engine} run stopped early (no final DRAM)")
        self._counters = dict(result.counters)
        raw = np.frombuffer(result.outputs[self.output.name], dtype=np.int8)
        return self._unpack_output(raw.reshape(self.output.shape)), result

    def reference(self, x) -> np.ndarray:
        """The same arithmetic in numpy through :mod:`vtasim.compiler.qnn` (four-term conv + ``plan.apply``)."""
        x = self._check_input(x)
        g = self.geom
        if g.dense:
            acc = qnn.qdense(x, self.weight[:, :, 0, 0], self.za, 0)
        elif g.grouped:             # sum (x - za) w: x padded with za, then the za * sum(w) term
            acc = conv2d_grouped_int32(x, self.weight, g.strides, g.pads, g.groups, g.dilation, pad_value=self.za)
            acc = acc.astype(np.int64) - self.za * self.weight.astype(np.int64).sum(axis=(1, 2, 3)).reshape(1, -1, 1, 1)
        else:
            acc = qnn.qconv2d(x, self.weight, self.za, 0, g.strides, g.pads)
        acc = acc.astype(np.int64) + self.bias.reshape((1, -1) + (1,) * (acc.ndim - 2))
        return self.plan.apply(acc, axis=1).astype(np.int8)

    @property
    def dram_bytes(self) -> int:
        """Bytes the layer loads (instructions' inputs, weights, accumulator vectors, uops) and stores,
        from the counters of the last run (a functional run on a zero input if there was none)."""
        if self._counters is None:
            self.run(np.zeros(self.in_shape, np.int8), engine="functional")
        c = self._counters
        return sum(c[k] for k in ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                                  "out_store_nbytes"))


# ---- construction ---------------------------------------------------------------------------------
def _round_up(v: int, b: int) -> int:
    return -(-v // b) * b


def _int_array(a, dtype, what, shape=None):
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise qnn.QnnError(f"{what} has dtype {a.dtype}; it must be {dtype}")
    lo, hi = qnn.dtype_range(dtype)
    if a.size and (a.min() < lo or a.max() > hi):
        raise qnn.QnnError(f"{what} holds values outside the {dtype} range [{lo}, {hi}]")
    if shape is not None and a.shape != shape:
        raise qnn.QnnError(f"{what} has shape {a.shape}, expected {shape}")
    return a.astype(dtype)


def _check_plan(plan, o, name):
    if not isinstance(plan, qnn.RequantPlan):
        raise qnn.QnnError(f"{name}: plan must be a RequantPlan (qnn.plan_requant), got {type(plan).__name__}")
    if plan.channels not in (None, o):
        raise qnn.QnnError(f"{name}: the plan has {plan.channels} per-channel multipliers, the layer {o} "
                           f"output channels")
    for kind, operand in plan.steps:
        if kind not in STEP_KINDS:
            raise qnn.QnnError(f"{name}: plan step {kind!r} is not one of {', '.join(STEP_KINDS)}")
        if isinstance(operand, str) and (kind not in ("add", "mul", "min", "max") or operand not in plan.vectors):
            raise qnn.QnnError(f"{name}: plan step ({kind!r}, {operand!r}) names no vector of the plan")


def _knob_workload(name, g: Geometry, hw=None, vta_pad=(0, 0)):
    """The catalogue's ResNet-18 layer of this shape (for TopHub), else a workload with its extents
    (a grouped layer: its ``GroupConv2d``, whose tiles count the dilated halo)."""
    if g.grouped:
        return GroupConv2d(name, hw[0], hw[1], g.c_pad, g.o_pad, g.kh, vta_pad[0], g.strides[0], g.groups,
                           g.dilation[0], batch=g.n_pad)
    square = g.kh == g.kw and g.strides[0] == g.strides[1] and len(set(g.pads)) == 1
    for wl in RESNET18.values():
        if square and (wl.h, wl.w, wl.cin, wl.cout, wl.k, wl.pad, wl.stride) == \
                (g.h, g.w, g.c_pad, g.o_pad, g.kh, g.pads[0], g.strides[0]):
            return replace(wl, batch=g.n_pad)
    return Conv2d(name, g.oh, g.ow, g.c_pad, g.o_pad, 1, 0, 1, batch=g.n_pad)


_PLAIN_ROLES = "bcyxBC"          # conv2d_packed's output axes (vtasim.compiler.ops.conv_family names)

def _stage(prev, kind, operand, vecs, n, roles):
    """One elementwise stage ``prev <kind> operand`` (an immediate, or a per-channel vector, read at
    the output's channel axes ``g c B C`` of ``roles`` and index 0 elsewhere)."""
    op = functools.partial(alu_expr, kind)
    if isinstance(operand, str):
        v = vecs[operand]
        keep = [r in "gcBC" for r in roles]
        return te.compute(prev.shape, lambda *i: op(prev(*i), v(*[a if k else 0 for a, k in zip(i, keep)])),
                          name=f"q_s{n}_{kind}")
    imm = int(operand)
    return te.compute(prev.shape, lambda *i: op(prev(*i), imm), name=f"q_s{n}_{kind}")


def _epilogue(acc, bias, vecs, steps, roles):
    """``acc + bias`` then each plan step as one elementwise stage (one ALU instruction each)."""
    x = _stage(acc, "add", "bias", {"bias": bias}, "b", roles)
    for n, (kind, operand) in enumerate(steps):
        x = _stage(x, kind, operand, vecs, n, roles)
    return x


def _compile(cfg, g: Geometry, name, weight, folded_bias, plan, knobs, za, residual=None):
    bo, bi, bb = cfg.block_out, cfg.block_in, cfg.batch
    w_full = np.zeros((g.o_pad, g.c_pad // g.groups, g.kh, g.kw), dtype=np.int8)
    w_full[:g.o, :g.c // g.groups] = weight
    b_full = np.zeros(g.o_pad, dtype=np.int32)
    b_full[:g.o] = folded_bias
    if g.grouped:
        kernel = pack_group_kernel(w_full, g.groups, cfg)
        sg, ob = kernel.shape[:2]
        cshape = (g.n_pad // bb, sg, ob, 1, 1, bb, bo)

        def channel_const(v):
            return pack_group_bias(v, bias_shape(cshape, GROUP_ROLES))
    else:
        kernel = pack_oihw(w_full, bo, bi)

        def channel_const(v):
            return pack_channel_const(v, bb, bo)
    consts = {"kernel": kernel, "bias": channel_const(b_full)}
    for vname, vec in plan.vectors.items():
        v_full = np.ones(g.o_pad, dtype=np.int32)
        v_full[:g.o] = vec
        consts[f"vec_{vname}"] = channel_const(v_full)
    for vname, value in (residual.vectors.items() if residual is not None else ()):
        consts[f"vec_add_{vname}"] = channel_const(np.full(g.o_pad, value, dtype=np.int32))
    hp = g.h + (g.pads[0] + g.pads[2] if g.host_pad else 0)
    wp = g.w + (g.pads[1] + g.pads[3] if g.host_pad else 0)
    vta_pad = (0, 0) if g.host_pad else (g.pads[0], g.pads[1])
    wl = _knob_workload(name, g, (hp, wp), vta_pad)
    user = knobs is not None
    record = None if user else tophub_knobs(wl, cfg)
    tries = [("user", knobs)] if user else ([("tophub", record)] if record else []) + \
        [("fitting", fitting_knobs(wl, cfg, acc_tensors=1 + len(plan.vectors))), ("fallback", fallback_knobs(wl, cfg))]
    if residual is not None and not user:
        # the residual's tile shares the accumulator: half-height tiles first; never the fallback knobs
        # (a fused layer that only compiles with them is slower than the add on its own)
        tries = [t for t in tries if t[0] != "fallback"]
        tries = [(f"{src}, tile_h {d}", ks2) for src, ks in tries for d, ks2 in _shorter_tiles(ks)] + tries
    for source, ks in tries:
        ks = check_knobs(wl, cfg, ks)
        try:
            built, out = _program(cfg, g, consts, plan, ks, name, (hp, wp), vta_pad, residual)
        except CompileError:
            if source in ("user", "fallback"):
                raise
            continue
        return built, out, consts, ks, source
    raise CompileError(f"{name}: no knob set compiled" + (" with the residual add's tile in the accumulator"
                                                          if residual is not None else ""))


def _shorter_tiles(ks: dict):
    """``(inner, knobs)`` with ``tile_h``'s inner factor halved, where that divides the rows."""
    outer, inner = (int(v) for v in ks["tile_h"])
    if inner >= 2 and inner % 2 == 0:
        yield inner // 2, {**ks, "tile_h": [outer * 2, inner // 2]}


def _program(cfg, g, consts, plan, knobs, name, hw, vta_pad, residual=None):
    """Tensor expressions, schedule and build of the layer (input all zeros: ``image`` swaps it); with
    ``residual`` (a QAddPlan), the add of the int8 placeholder ``res`` after the requantisation."""
    bb, bi = cfg.batch, cfg.block_in
    with Environment(cfg) as env:
        data = te.placeholder((g.n_pad // bb, g.c_pad // bi, hw[0], hw[1], bb, bi), env.inp_dtype, "data")
        kernel = te.placeholder(consts["kernel"].shape, env.wgt_dtype, "kernel")
        bias = te.placeholder(consts["bias"].shape, env.acc_dtype, "bias")
        vecs = {v: te.placeholder(consts[f"vec_{v}"].shape, env.acc_dtype, f"vec_{v}") for v in plan.vectors}
        if g.grouped:
            conv = group_conv2d_packed(env, data, kernel, vta_pad, g.strides, g.dilation)
        else:
            conv = conv2d_packed(env, data, kernel, vta_pad, g.strides)
        last = _epilogue(conv, bias, vecs, plan.steps, GROUP_ROLES if g.grouped else _PLAIN_ROLES)
        extra, inputs = [], {**consts, "data": np.zeros(data.shape, np.int8)}
        if residual is not None:
            from vtasim.compiler.ops.residual import qadd_stages
            res = te.placeholder(last.shape, env.inp_dtype, "res")
            rvecs = {v: te.placeholder(consts[f"vec_add_{v}"].shape, env.acc_dtype, f"vec_add_{v}")
                     for v in residual.vectors}
            last = qadd_stages(env, last.shape, residual, {"A": last, "B": res}, rvecs, prefix="qr")[1][-1]
            extra = [res, *rvecs.values()]
            inputs["res"] = np.zeros(res.shape, np.int8)
        out = te.compute(last.shape, lambda *i: last(*i).astype(env.out_dtype), name="q_out")
        sch = (schedule_group_conv2d_packed if g.grouped else schedule_conv2d_packed)(env, out, knobs)
        built = build(sch, [data, kernel, bias, *vecs.values(), *extra, out], inputs, cfg, name=name,
                      expected=False)
    return built, out


def check_qconv_packing(cfg, weight, strides, pads=0, groups: int = 1, dilations=1, name: str = "qconv",
                        x_shape=None):
    """Raise the error :func:`build_qconv` would raise for this weight, groups and dilation (packing into
    the config's blocks), without compiling; ``x_shape`` defaults to the smallest input that fits."""
    o, cg, kh, kw = np.shape(weight)
    d = norm_pair(dilations, "dilations")
    if x_shape is None:
        x_shape = (1, cg * groups, (kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1)
    _geometry(cfg, x_shape, np.asarray(weight), strides, pads, name, groups=groups, dilations=dilations)


def _geometry(cfg, x_shape, weight, strides, pads, name, dense=False, groups=1, dilations=1):
    x_shape = tuple(int(v) for v in x_shape)
    if dense:
        if len(x_shape) != 2 or weight.ndim != 2:
            raise qnn.QnnError(f"{name}: dense input {x_shape} and weight {weight.shape} must be (N, K) and (O, K)")
        x_shape = x_shape + (1, 1)
        weight = weight.reshape(weight.shape + (1, 1))
    if len(x_shape) != 4 or weight.ndim != 4:
        raise qnn.QnnError(f"{name}: input {x_shape} and weight {weight.shape} must be NCHW and OIHW")
    n, c, h, w = x_shape
    o, wc, kh, kw = weight.shape
    if min(x_shape) < 1 or min(weight.shape) < 1:
        raise qnn.QnnError(f"{name}: empty shape (input {x_shape}, weight {weight.shape})")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1 or o % groups:
        raise qnn.QnnError(f"{name}: groups = {groups!r} must be a positive integer dividing the {o} output channels")
    if wc * groups != c:
        raise qnn.QnnError(f"{name}: input has {c} channels, the weight expects {wc} per group x groups = {groups}")
    sh, sw = norm_pair(strides, "strides")
    dil = norm_pair(dilations, "dilations")
    p = norm_pads(pads)
    oh, ow = qnn.conv_out_hw(h, w, dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1, (sh, sw), p)
    grouped = groups > 1 or dil != (1, 1)
    if grouped and (kh != kw or sh != sw or dil[0] != dil[1]):
        raise qnn.QnnError(f"{name}: a grouped or dilated layer needs a square kernel, equal strides and equal "
                           f"dilations (kernel {kh}x{kw}, strides {(sh, sw)}, dilations {dil})")
    # channels of a grouped layer are not padded (a padded channel would shift every later group)
    c_pad = c if groups > 1 else _round_up(c, cfg.block_in)
    o_pad = o if groups > 1 else _round_up(o, cfg.block_out)
    g = Geometry(n, c, h, w, o, kh, kw, (sh, sw), p, oh, ow, _round_up(n, cfg.batch), c_pad, o_pad, False, dense,
                  int(groups), dil)
    if groups > 1:
        try:
            GroupConv2d(name, h, w, c, o, kh, 0, sh, int(groups)).packing(cfg)
        except CompileError as exc:
            raise qnn.QnnError(str(exc)) from None
    return g, weight


def _build(cfg, g, weight, bias, za, plan, knobs, name, residual=None):
    za = int(check_zero_point(za, "int8", f"{name}: input zero point"))
    weight = _int_array(weight, "int8", f"{name}: weight")
    if bias is None:
        bias = np.zeros(g.o, dtype=np.int32)
    bias = _int_array(bias, "int32", f"{name}: bias", (g.o,))
    _check_plan(plan, g.o, name)
    need = qnn.conv_acc_bound(weight, bias, za)
    if need > plan.acc_bound:
        raise qnn.RequantError(f"{name}: the accumulator reaches {need} but the plan was made for acc_bound = "
                               f"{plan.acc_bound} (rule: plan_requant with at least qnn.conv_acc_bound)")
    pads = g.pads
    g.host_pad = bool(za != 0 and any(pads)) or pads[0] != pads[2] or pads[1] != pads[3] or \
        max(pads) > _DMA_PAD_MAX
    folded = bias.astype(np.int64) - za * weight.astype(np.int64).sum(axis=(1, 2, 3))      # T3 into the bias
    if np.abs(folded).max(initial=0) > (1 << 31) - 1:
        raise qnn.RequantError(f"{name}: bias - za * sum(w) does not fit int32")
    if residual is not None and (g.grouped or g.dense or sum(st[2] == "A" for st in residual.stages) != 1):
        raise CompileError(f"{name}: a residual add fuses into a plain convolution's epilogue with a plan that "
                           f"reads the convolution's output once (the one-multiplier plan)")
    built, out, consts, ks, source = _compile(cfg, g, name, weight, folded.astype(np.int32), plan, knobs, za,
                                              residual)
    return QLayer(name, cfg, g, weight, bias, za, plan, ks, source, built, out, consts, residual=residual)


def _symmetric(zw, name):
    if np.any(np.asarray(zw) != 0):
        raise qnn.QnnError(f"{name}: weight zero point {np.asarray(zw).tolist()} is not 0 (rule: VTA layers take "
                           f"symmetric int8 weights; the T2 term of a non-zero zw is not folded)")


def build_qconv(cfg, x_shape, weight, bias, strides, pads, za, plan, knobs=None, name: str = "qconv",
                zw=0, groups: int = 1, dilations=1, residual=None) -> QLayer:
    """A quantised conv2d: ``x_shape`` NCHW int8 activations with zero point ``za``, ``weight`` int8 OIHW
    (symmetric, zero point 0), ``bias`` int32 (O,) or None, ``pads`` an int, (h, w) or (top, left,
    bottom, right), ``plan`` from :func:`vtasim.compiler.qnn.plan_requant` (made for an ``acc_bound`` of at
    least :func:`vtasim.compiler.qnn.conv_acc_bound`); ``zw`` must be 0.  ``groups`` > 1 (weight
    ``(O, C/groups, KH, KW)``; depthwise: ``groups = C``) and ``dilations`` compile through
    ``group_conv2d_packed`` (:mod:`vtasim.compiler.ops.group_conv2d`): square kernels, channels per group whole
    blocks or dividing one block (depthwise), no channel padding.  ``residual`` (a
    :class:`vtasim.compiler.qnn.qadd.QAddPlan` whose ``A`` is this layer's output) fuses a residual add into
    the epilogue: the int8 operand ``res`` (the output's packed shape) is loaded into the accumulator
    per tile and the plan's stages follow the requantisation (TVM's fused ResNet epilogue)."""
    _symmetric(zw, name)
    weight = np.asarray(weight)
    g, weight = _geometry(cfg, x_shape, weight, strides, pads, name, groups=groups, dilations=dilations)
    return _build(cfg, g, weight, bias, za, plan, knobs, name, residual)


def build_qdense(cfg, x_shape, weight, bias, za, plan, knobs=None, name: str = "qdense", zw=0) -> QLayer:
    """A quantised dense layer: ``x_shape`` (N, K) int8 with zero point ``za``, ``weight`` int8 (O, K),
    ``bias`` int32 (O,) or None; compiled as a 1x1 convolution on a 1x1 image (``knobs`` are conv knobs)."""
    _symmetric(zw, name)
    weight = np.asarray(weight)
    g, weight = _geometry(cfg, x_shape, weight, 1, 0, name, dense=True)
    return _build(cfg, g, weight, bias, za, plan, knobs, name)
