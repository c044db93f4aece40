"""The exact requantisation's stages (:mod:`compiler.qnn.exact_requant`) as tensor expressions in a
layer's epilogue.

The stages are an SSA list ``(out, kind, lhs, rhs)`` over two sources: ``A``, the accumulator with the
bias added (an int32 tensor in the accumulator), and ``Z``, a zero tile: an int8 placeholder of the
output's packed shape that the schedule loads into the accumulator per tile (``LOAD ACC_8BIT``, the
DMA-load tag), the only way to get a second accumulator tile, since the ALU has no move.  Every stage
reads its left operand for the last time, so storage_rewrite puts it in place and inject_alu makes
one ALU instruction of it (vector mode where ``rhs`` is another stage: its source).
"""

from __future__ import annotations

from compiler import te
from compiler.errors import CompileError
from compiler.ops._packed import DMA_LOAD_TAG
from compiler.ops.alu import alu_expr

__all__ = ["exact_epilogue", "check_stages", "STAGE_KINDS"]

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


def exact_epilogue(acc, zero, vecs, stages, stage):
    """The last tensor of ``stages`` over ``acc`` (``A``) and the loaded ``zero`` (``Z``); ``stage(prev,
    kind, operand, vecs, n)`` makes one stage with an immediate or a per-channel vector operand."""
    shape = acc.shape
    vals = {"A": acc}
    for n, (out, kind, lhs, (rk, rv)) in enumerate(stages):
        if lhs == "Z":
            x = te.compute(shape, lambda *i: zero(*i).astype(acc.dtype), name=f"q_zero{n}", tag=DMA_LOAD_TAG)
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
