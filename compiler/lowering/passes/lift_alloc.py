"""LiftAllocToScopeBegin (VTA, spec 4.3.3): every allocation moves to the head of its scope.

A scope is a loop body, a ``virtual_thread`` body or the function body.  Allocations anywhere
inside one (not inside a nested scope) are removed from where they are and re-wrapped, in the
order met, around the whole scope body, so later passes find them at scope heads.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir

__all__ = ["lift_alloc"]


def lift_alloc(body, cfg=None):
    return _scope(body)


def _scope(body):
    found = []
    stripped = _strip(body, found)
    for buf in reversed(found):
        stripped = ir.Allocate(buf, stripped)
    return stripped


def _strip(s, found):
    if isinstance(s, ir.Allocate):
        found.append(s.buffer)
        return _strip(s.body, found)
    if isinstance(s, ir.For):
        return ir.For(s.var, s.extent, _scope(s.body), s.kind)
    if isinstance(s, ir.Attr):
        if s.key == "virtual_thread":
            return ir.Attr(s.key, s.value, _scope(s.body), s.extra)
        return ir.Attr(s.key, s.value, _strip(s.body, found), s.extra)
    if isinstance(s, ir.Seq):
        return ir.seq(*[_strip(c, found) for c in s.stmts])
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(s.cond, _strip(s.then, found),
                             _strip(s.otherwise, found) if s.otherwise is not None else None)
    return s
