"""The exact requantisation's stages (:mod:`vtasim.compiler.qnn.exact_requant`) as tensor expressions in a
layer's epilogue.

The stages are an SSA list ``(out, kind, lhs, rhs)`` over two sources: ``A``, the accumulator with the
bias added (an int32 tensor in the accumulator), and ``Z``, a zero tile: an int8 placeholder (:func:`zero_tile`) that the schedule loads into the
accumulator per tile (``LOAD ACC_8BIT``, the
DMA-load tag), the only way to get a second accumulator tile, since the ALU has no move.  Every stage
reads its left operand for the last time, so storage_rewrite puts it in place and inject_alu makes
one ALU instruction of it (vector mode where ``rhs`` is another stage: its source).
"""

from __future__ import annotations

from vtasim.compiler.dsl import te
from vtasim.compiler.errors import CompileError
from vtasim.compiler.ops._packed import DMA_LOAD_TAG
from vtasim.compiler.ops.alu import alu_expr

__all__ = ["exact_epilogue", "zero_tile", "check_stages", "STAGE_KINDS"]

STAGE_KINDS = ("add", "mul", "min", "max", "shr")


def check_stages(stages, vectors, name: str):
    """Raise CompileError unless every stage is ``(out, kind, lhs, rhs)`` reading sources or earlier stages."""
    known = {"A", "Z"}
    for k, st in enumerate(stages):
        ok = isinstance(st, tuple) and len(st) == 4 and st[1] in STAGE_KINDS and st[2] in known and \
            isinstance(st[3], tuple) and len(st[3]) == 2
        if ok:
            rk, rv = st[3]
            ok = (rk == "imm" and isinstance(rv, int) and not isinstance(rv, bool) and -(1 << 31) <= rv < (1 << 31)) \
                or (rk == "vec" and rv in vectors) or (rk == "t" and rv in known)
        if not ok or st[0] in known:
            raise CompileError(f"{name}: plan stage {k} {st!r} (rule: (new name, kind in {', '.join(STAGE_KINDS)}, "
                               f"a source or earlier stage, ('imm', int32) | ('vec', plan vector) | ('t', earlier))")
        known.add(st[0])


def zero_tile(env, shape, roles: str, tile_h: int, tile_w: int):
    """``(placeholder, index)``: a zero int8 tensor and the map from an output position to a position
    in it such that every output tile (``tile_h`` x ``tile_w`` pixels, any channel blocks; a transposed
    conv's tile: ``tile_h`` x ``tile_w`` phase pixels, each with its ``S x S`` phases ``p``, ``q``) reads
    one contiguous run (one DMA, whatever the tile's shape in the output layout): the position's offset
    inside its tile, in the tile's loop order ``c, y, p, x, q``, plus the tile's base; its values are
    all 0, so which zero a position reads does not matter."""
    ext = dict(zip(roles, shape))
    sq, sp = ext.get("q", 1), ext.get("p", 1)
    stride = {"q": 1, "x": sq}
    stride["p"] = tile_w * stride["x"]
    stride["y"] = sp * stride["p"]
    stride["c"] = tile_h * stride["y"]
    order = [r for r in "cypxq" if r in ext]
    span = sum(ext[r] * stride[r] for r in order)
    zero = te.placeholder((ext["b"] * span, ext["B"], ext["C"]), env.inp_dtype, "zero")

    def index(*i):
        a = dict(zip(roles, i))
        flat = a["b"] * span
        for r in order:
            flat = flat + (a[r] * stride[r] if stride[r] != 1 else a[r])
        return (flat, a["B"], a["C"])
    return zero, index


def exact_epilogue(acc, zero, vecs, stages, stage):
    """The last tensor of ``stages`` over ``acc`` (``A``) and ``zero = (placeholder, index)`` of
    :func:`zero_tile` (``Z``, loaded per tile); ``stage(prev, kind, operand, vecs, n)`` makes one stage
    with an immediate or a per-channel vector operand."""
    shape = acc.shape
    vals = {"A": acc}
    zt, zindex = zero
    for n, (out, kind, lhs, (rk, rv)) in enumerate(stages):
        if lhs == "Z":
            x = te.compute(shape, lambda *i: zt(*zindex(*i)).astype(acc.dtype), name=f"q_zero{n}", tag=DMA_LOAD_TAG)
        else:
            x = vals[lhs]
        if rk == "t":
            other = vals[rv]
            t = te.compute(shape, lambda *i, x=x, other=other, kind=kind: alu_expr(kind, x(*i), other(*i)),
                           name=f"q_x{n}_{kind}")
        else:
            t = stage(x, kind, rv if rk == "vec" else int(rv), vecs, f"x{n}")
        vals[out] = t
    if not stages:
        raise CompileError("exact epilogue: the plan has no stages")
    return vals[stages[-1][0]]
