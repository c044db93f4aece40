"""Phase-1 Simplify (TVM): drop loops of extent 1 and fold constants in every index.

TVM's ScheduleOps never emits a loop for an axis of extent 1 (it binds the variable to its
minimum), so the VTA passes count only real loops: the DMA pattern's dimensions (spec 4.2), the
ALU lane loops (4.3.7) and the two foldable GEMM loops (4.3.9).  A phase-0 IR that keeps such loops
is brought to that form here.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir

__all__ = ["simplify"]


def simplify(body, cfg=None):
    """Remove ``For`` loops of extent 1 (their variable becomes 0) and simplify indices."""
    def post(n):
        if isinstance(n, ir.For) and n.extent == 1:
            return ir.substitute(n.body, {n.var: 0})
        return None
    return ir.simplify(ir.transform(body, post))
