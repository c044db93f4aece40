"""FoldUopLoop (spec 4.3.9): fold up to two outer loops of a GEMM uop kernel into hardware loops.

For each ``coproc_uop_scope = "VTAPushGEMMOp"``, at most twice: if the kernel body is a loop, every
``VTAUopPush`` under it must have dst/src/wgt linear in the loop variable with the same
coefficients in all pushes, and the variable must appear nowhere else; then the loop becomes
``VTAUopLoopBegin(extent, dst_f, src_f, wgt_f) ... VTAUopLoopEnd``.  Otherwise the loop stays a
software loop inside the kernel (more uops), as in TVM.

Then every uop scope (GEMM and ALU) is numbered -- ``extra`` = its kernel site, the runtime's
cache key together with the one free variable (spec 5.2) -- and checked: all loop begins come
before the first uop, there are at most two levels ("more than two loops to fold"), and the
kernel's uops fit the uop buffer of the config (a kernel is loaded whole).
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError

__all__ = ["fold_uop_loop"]

PASS = "fold_uop_loop/runtime"


def _calls(node):
    out = []
    ir.walk(node, lambda n: out.append(n) if isinstance(n, ir.Call) else None)
    return out


def _fold_once(body):
    """``(begin call, new body)`` or None when the outermost loop does not fold."""
    if not isinstance(body, ir.For):
        return None
    var = body.var
    factors = [None, None, None]
    ok = [True]

    def post(n):
        if isinstance(n, ir.Call) and n.name == "VTAUopPush":
            args = list(n.args)
            for k in range(3):
                lin = ir.linear(args[2 + k], [var])
                if lin is None:
                    ok[0] = False
                    return None
                (c,), base = lin
                if factors[k] is None:
                    factors[k] = c
                elif factors[k] != c:
                    ok[0] = False
                    return None
                args[2 + k] = base
            return ir.Call(n.name, tuple(args), n.dtype)
        if isinstance(n, ir.Call) and n.name not in ("VTAUopPush",):
            ok[0] = False
        return None
    new = ir.transform(body.body, post)
    if not ok[0] or factors[0] is None or var in ir.free_vars(new):
        return None
    begin = ir.Evaluate(ir.Call("VTAUopLoopBegin", (ir.const(body.extent),) +
                                tuple(ir.const(f) for f in factors)))
    return begin, new


def _fold(body):
    begins = []
    for _ in range(2):
        r = _fold_once(body)
        if r is None:
            break
        begin, body = r
        begins.append(begin)
    if not begins:
        return None
    end = ir.Evaluate(ir.Call("VTAUopLoopEnd", ()))
    return ir.seq(*begins, body, *([end] * len(begins)))


def _check_kernel(body, site):
    """Loop begins before any uop, at most two levels (the runtime's kernel invariants)."""
    depth = [0, 0]          # current, seen uop

    def visit(s):
        if isinstance(s, ir.Evaluate):
            name = s.call.name
            if name == "VTAUopLoopBegin":
                if depth[1]:
                    raise CompileError(PASS, f"uop kernel {site}: a loop begins after a uop")
                depth[0] += 1
                if depth[0] > 2:
                    raise CompileError(PASS, f"more than two loops to fold (uop kernel {site} has "
                                             f"{depth[0]} nested VTAUopLoopBegin; the hardware has two)")
            elif name == "VTAUopPush":
                depth[1] = 1
        elif isinstance(s, ir.Seq):
            for c in s.stmts:
                visit(c)
        elif isinstance(s, (ir.For, ir.Attr, ir.Allocate)):
            visit(s.body)
        elif isinstance(s, ir.IfThenElse):
            visit(s.then)
            if s.otherwise is not None:
                visit(s.otherwise)
    visit(body)


def _uop_count(s) -> int:
    """Uops a kernel body records (software loops inside the kernel multiply)."""
    if isinstance(s, ir.Evaluate):
        return 1 if s.call.name == "VTAUopPush" else 0
    if isinstance(s, ir.Seq):
        return sum(_uop_count(c) for c in s.stmts)
    if isinstance(s, ir.For):
        return s.extent * _uop_count(s.body)
    if isinstance(s, (ir.Attr, ir.Allocate)):
        return _uop_count(s.body)
    if isinstance(s, ir.IfThenElse):
        return max(_uop_count(s.then), _uop_count(s.otherwise) if s.otherwise is not None else 0)
    return 0


def fold_uop_loop(body, cfg=None):
    site = [0]

    def post(n):
        if isinstance(n, ir.Attr) and n.key == "coproc_uop_scope":
            inner = n.body
            if n.value == "VTAPushGEMMOp":
                folded = _fold(inner)
                if folded is not None:
                    inner = folded
            return ir.Attr(n.key, n.value, inner, n.extra)
        return None
    out = ir.transform(body, post)

    def number(n):
        if isinstance(n, ir.Attr) and n.key == "coproc_uop_scope":
            k = site[0]
            site[0] += 1
            _check_kernel(n.body, k)
            if cfg is not None and _uop_count(n.body) > cfg.uop_depth:
                raise CompileError(PASS, f"uop kernel {k} ({n.value}) has {_uop_count(n.body)} uops, "
                                         f"the uop buffer holds {cfg.uop_depth}")
            return ir.Attr(n.key, n.value, ir.transform(n.body, lambda x: None, number), k)
        return None
    return ir.transform(out, lambda x: None, number)
