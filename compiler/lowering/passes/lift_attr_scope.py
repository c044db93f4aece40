"""LiftAttrScope (TVM, spec 4.3.3): hoist an attribute to the largest region where it is uniform.

The attribute is taken off its statement and re-attached higher up: loops and other attributes are
transparent, a sequence lifts it when every child carries the same one and otherwise re-attaches it
to each maximal run of equal neighbours (so adjacent same-stage DMA calls share one
``coproc_scope``), an allocation stops it (it is re-attached inside the allocation), an if without else lets
it through and an if/else lifts it only when both branches agree.

Equality: ``coproc_scope`` values compare by stage number; a ``coproc_uop_scope`` is one kernel
site, so two of them never merge (TVM compares their string values by identity).
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir

__all__ = ["lift_attr_scope"]

_NONE = object()


def lift_attr_scope(body, key: str, cfg=None):
    """Lift attributes ``key`` (``coproc_uop_scope`` or ``coproc_scope``) in ``body``."""
    stmt, attr = _lift(body, key)
    return _wrap(attr, key, stmt)


def _wrap(attr, key, stmt):
    if attr is _NONE:
        return stmt
    value, extra = attr
    return ir.Attr(key, value, stmt, extra)


def _same(a, b, key) -> bool:
    if a is _NONE or b is _NONE:
        return a is b
    if key == "coproc_scope":
        return a[0] == b[0] and a[1] == b[1]
    return a is b


def _lift(s, key):
    """``(statement without the attr at its top, lifted attr (value, extra) or _NONE)``."""
    if isinstance(s, ir.Attr) and s.key == key:
        # taken off as it is: its body is one region already
        return s.body, (s.value, s.extra)
    if isinstance(s, ir.Attr):
        body, attr = _lift(s.body, key)
        return ir.Attr(s.key, s.value, body, s.extra), attr
    if isinstance(s, ir.For):
        body, attr = _lift(s.body, key)
        return ir.For(s.var, s.extent, body, s.kind), attr
    if isinstance(s, ir.Allocate):
        body, attr = _lift(s.body, key)
        return ir.Allocate(s.buffer, _wrap(attr, key, body)), _NONE
    if isinstance(s, ir.Seq):
        parts = [_lift(c, key) for c in s.stmts]
        runs = []                       # [attr, [stmts]]
        for stmt, attr in parts:
            if runs and _same(runs[-1][0], attr, key):
                runs[-1][1].append(stmt)
            else:
                runs.append([attr, [stmt]])
        if len(runs) == 1:
            return ir.seq(*runs[0][1]), runs[0][0]
        return ir.seq(*[_wrap(a, key, ir.seq(*ss)) for a, ss in runs]), _NONE
    if isinstance(s, ir.IfThenElse):
        then, a1 = _lift(s.then, key)
        if s.otherwise is None:             # TVM lets it through an if without else
            return ir.IfThenElse(s.cond, then), a1
        other, a2 = _lift(s.otherwise, key)
        if a1 is not _NONE and _same(a1, a2, key):
            return ir.IfThenElse(s.cond, then, other), a1
        return ir.IfThenElse(s.cond, _wrap(a1, key, then), _wrap(a2, key, other)), _NONE
    return s, _NONE
