"""The quantised residual add on the tensor ALU: two int8 packed activations in, int8 out.

``build_qadd(cfg, shape, plan)`` compiles :class:`vtasim.compiler.qnn.qadd.QAddPlan`'s stages as tensor
expressions: both operands are loaded into the accumulator as int32 (``LOAD ACC_8BIT``), the
per-channel constants of the plan (multipliers beyond the 16-bit immediate) like a bias, then one ALU
stage per plan stage, and the int8 result is stored.  The output is tiled by image rows: as many rows
as fit the accumulator with every stage's buffer.

::

    plan = qnn.qadd.plan_qadd(s_a, z_a, s_b, z_b, s_y, z_y, -128, 127)
    layer = build_qadd(cfg, (1, 64, 56, 56), plan)
    y, result = layer.run(a, b, engine="cycle")       # int8 NCHW
    assert (y == layer.reference(a, b)).all()         # numpy: plan.apply
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.errors import CompileError
from vtasim.compiler.ops._packed import DMA_LOAD_TAG
from vtasim.compiler.ops.layout import pack_channel_const, pack_nchw, unpack_nchw
from vtasim.compiler.dsl.reference import evaluate
from vtasim.compiler.dsl.schedule import create_schedule
from vtasim.sim.engines import run_engine
from vtasim.sim.image import MemoryImage, Segment

__all__ = ["build_qadd", "QAddLayer", "qadd_stages"]

_BINARY = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "min": te.min_, "max": te.max_,
           "shr": lambda a, b: a >> b}


@dataclass
class QAddLayer:
    name: str
    cfg: object
    shape: tuple              # logical NCHW
    packed_shape: tuple       # (N/b, C/c, H, W, b, c)
    plan: object
    tile_h: int
    built: object = field(repr=False)
    output: object = field(repr=False)
    consts: dict = field(repr=False)

    @property
    def in_shape(self) -> tuple:
        return self.shape

    @property
    def out_shape(self) -> tuple:
        return self.shape

    def _pack(self, x) -> np.ndarray:
        x = np.asarray(x)
        if x.shape != self.shape or x.dtype != np.int8:
            raise CompileError(f"{self.name}: operand {x.dtype}{x.shape} is not int8{self.shape}")
        n, c, h, w = self.shape
        full = np.zeros((self.packed_shape[0] * self.cfg.batch, self.packed_shape[1] * self.cfg.block_out, h, w),
                        np.int8)
        full[:n, :c] = x
        return pack_nchw(full, self.cfg.batch, self.cfg.block_out)

    def packed_reference(self, pa, pb) -> np.ndarray:
        """The tensor expressions evaluated in numpy on packed operands (the image's oracle)."""
        return evaluate(self.output, {**self.consts, "A": pa, "B": pb})

    def image(self, a, b, expected: bool = True) -> MemoryImage:
        pa, pb = self._pack(a), self._pack(b)
        base = self.built.image
        swap = {self.built.buffers["A"].addr: pa.tobytes(), self.built.buffers["B"].addr: pb.tobytes()}
        segments = [Segment(s.addr, swap[s.addr]) if s.addr in swap else s for s in base.segments]
        want = {self.output.name: self.packed_reference(pa, pb).tobytes()} if expected else {}
        return MemoryImage(base.cfg, base.insn_addr, base.insn_count, segments, base.outputs, want)

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        n, c = self.shape[:2]
        return unpack_nchw(packed.reshape(self.packed_shape))[:n, :c]

    def run(self, a, b, engine: str = "cycle"):
        result = run_engine(engine, self.image(a, b, expected=False))
        raw = np.frombuffer(result.outputs[self.output.name], np.int8)
        return self.unpack(raw), result

    def reference(self, a, b) -> np.ndarray:
        return self.plan.apply(a, b).astype(np.int8)


def _load_fn(src, dtype):
    return lambda *i: src(*i).astype(dtype)


def _stage_fn(op, x, rk, rv, vecs, vals):
    if rk == "imm":
        return lambda *i: op(x(*i), int(rv))
    if rk == "vec":
        vec = vecs[rv]
        return lambda b, c, y, w, bi, ci: op(x(b, c, y, w, bi, ci), vec(0, c, 0, 0, bi, ci))
    other = vals[rv]
    return lambda *i: op(x(*i), other(*i))


def qadd_stages(env, shape, plan, sources: dict, vecs: dict, prefix: str = "qa"):
    """``(loads, stages)``: the plan's stages over ``shape``.  ``sources`` maps ``"A"``/``"B"`` to an int8
    placeholder (each use loaded into the accumulator by its own LOAD ACC_8BIT, since the ALU updates
    its operand in place) or to an int32 accumulator tensor (used as it is: once)."""
    vals, loads, stages = {}, [], []
    for out, kind, lhs, (rk, rv) in plan.stages:
        if lhs in sources and sources[lhs].dtype == env.acc_dtype:
            x = sources[lhs]
        elif lhs in sources:
            x = te.compute(shape, _load_fn(sources[lhs], env.acc_dtype), name=f"{lhs}_buf{len(loads)}",
                           tag=DMA_LOAD_TAG)
            loads.append(x)
        else:
            x = vals[lhs]
        t = te.compute(shape, _stage_fn(_BINARY[kind], x, rk, rv, vecs, vals), name=f"{prefix}_{out}")
        vals[out] = t
        stages.append(t)
    return loads, stages


def qadd_program(env, packed_shape, plan):
    """``(placeholders, output, copies, stages, vectors)``: the plan's stages over ``packed_shape``."""
    a = te.placeholder(packed_shape, env.inp_dtype, "A")
    b = te.placeholder(packed_shape, env.inp_dtype, "B")
    cshape = (1, packed_shape[1], 1, 1, packed_shape[4], packed_shape[5])
    vecs = {v: te.placeholder(cshape, env.acc_dtype, f"vec_{v}") for v in plan.vectors}
    copies, stages = qadd_stages(env, packed_shape, plan, {"A": a, "B": b}, vecs)
    last = stages[-1]
    result = te.compute(packed_shape, lambda *i: last(*i).astype(env.out_dtype), name="qa_out")
    return [a, b], result, copies, stages, vecs


def _tile_rows(cfg, packed_shape, live: int, nvec: int) -> int:
    _, _, h, w, _, _ = packed_shape
    fits = [d for d in range(1, h + 1) if h % d == 0 and live * d * w + nvec <= cfg.acc_depth]
    if not fits:
        raise CompileError(f"qadd: one image row ({w} elements x {live} buffers) does not fit the accumulator "
                           f"({cfg.acc_depth} elements)")
    return max(fits)


def schedule_qadd(env, out, copies, stages, vecs, tile_h: int):
    s = create_schedule(out.op)
    users = {v: [t for t in stages if v in t.op.input_tensors] for v in vecs.values()}
    cached = [s.cache_read(v, env.acc_scope, u) for v, u in users.items()]
    b, c, y, x, bi, ci = s[out].op.axis
    y0, y1 = s[out].split(y, factor=tile_h)
    s[out].reorder(b, c, y0, y1, x, bi, ci)
    for t in copies + cached:
        s[t].set_scope(env.acc_scope)
        s[t].compute_at(s[out], y0)
        s[t].pragma(s[t].op.axis[0], env.dma_copy)
    for t in stages:
        s[t].set_scope(env.acc_scope)
        s[t].compute_at(s[out], y0)
        s[t].pragma(s[t].op.axis[0], env.alu)
    s[out].pragma(y1, env.dma_copy)
    return s


def build_qadd(cfg, shape, plan, name: str = "qadd") -> QAddLayer:
    """The add of two int8 NCHW tensors of ``shape`` (channels padded to the block) with ``plan``."""
    n, c, h, w = (int(v) for v in shape)
    if cfg.block_in != cfg.block_out:
        raise CompileError(f"{name}: the add needs BLOCK_IN = BLOCK_OUT (the operands share the layout)")
    bb, bo = cfg.batch, cfg.block_out
    packed_shape = (-(-n // bb), -(-c // bo), h, w, bb, bo)
    with Environment(cfg) as env:
        (a, b), out, copies, stages, vecs = qadd_program(env, packed_shape, plan)
        tile_h = _tile_rows(cfg, packed_shape, len(copies) + len(stages), len(vecs))
        sch = schedule_qadd(env, out, copies, stages, vecs, tile_h)
        consts = {f"vec_{k}": pack_channel_const(np.full(packed_shape[1] * bo, v, np.int32), bb, bo)
                  for k, v in plan.vectors.items()}
        zeros = np.zeros(packed_shape, np.int8)
        built = build(sch, [a, b, *vecs.values(), out], {**consts, "A": zeros, "B": zeros}, cfg, name=name,
                      expected=False)
    return QAddLayer(name, cfg, (n, c, h, w), packed_shape, plan, tile_h, built, out, consts)
