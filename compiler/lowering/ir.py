"""The loop IR: what ``lower`` produces and every pass rewrites.

A deliberately small cousin of TVM's TIR, enough for VTA schedules:

* expressions: :class:`IntImm`, :class:`Var`, :class:`BinOp` (arithmetic, min/max, shifts,
  comparisons, logic), :class:`Cast`, :class:`Load` (flat index into a :class:`Buffer`),
  :class:`Select` (``if_then_else``) and :class:`Call` (intrinsics and runtime calls);
* statements: :class:`For` (always from 0; ``kind`` serial / cthread), :class:`Seq`,
  :class:`Store`, :class:`Allocate`, :class:`Attr` (pragmas, ``coproc_scope``,
  ``coproc_uop_scope``, ``virtual_thread``), :class:`Evaluate` and :class:`IfThenElse`.

Nodes are immutable; a pass builds new trees with :func:`transform`.  :class:`Var` and
:class:`Buffer` compare by identity (two loops may both be called ``i``), everything else by
structure.  :func:`to_text` prints a tree the way the README and ``--dump-ir`` show it::

    >>> i = Var("i")
    >>> a = Buffer("A", (64,), "int32")
    >>> print(to_text(For(i, 64, Store(a, i, Load(a, i) + 1))))
    for (i, 0, 64) {
      A[i] = (A[i] + 1)
    }

Index arithmetic helpers: :func:`simplify` folds constants and normalises affine sums,
:func:`linear` is TVM's ``detect_linear_equation`` (integer coefficients of given loop variables
plus a base), :func:`substitute` replaces variables, :func:`evaluate` computes an expression
under concrete variable values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

__all__ = [
    "Expr", "IntImm", "Var", "BinOp", "Cast", "Load", "Select", "Call", "const",
    "Buffer", "SCOPE_GLOBAL", "SCOPE_INP", "SCOPE_WGT", "SCOPE_ACC",
    "Stmt", "For", "Seq", "Store", "Allocate", "Attr", "Evaluate", "IfThenElse", "seq",
    "min_", "max_", "lt", "le", "gt", "ge", "eq", "ne", "and_", "or_",
    "simplify", "linear", "substitute", "evaluate", "free_vars", "transform", "walk", "to_text",
    "IRError", "FOLD",
]

SCOPE_GLOBAL = "global"
SCOPE_INP = "local.inp_buffer"
SCOPE_WGT = "local.wgt_buffer"
SCOPE_ACC = "local.acc_buffer"

_ARITH = ("+", "-", "*", "//", "%", "min", "max", ">>", "<<")
_CMP = ("<", "<=", ">", ">=", "==", "!=")
_LOGIC = ("&&", "||")


class IRError(ValueError):
    """A malformed IR tree or an index expression outside what the analysis handles."""


# ---- expressions ----------------------------------------------------------------------------
class Expr:
    """Base of expressions; Python operators build :class:`BinOp` nodes (ints become IntImm)."""

    __slots__ = ()

    def __add__(self, o): return BinOp("+", self, const(o))
    def __radd__(self, o): return BinOp("+", const(o), self)
    def __sub__(self, o): return BinOp("-", self, const(o))
    def __rsub__(self, o): return BinOp("-", const(o), self)
    def __mul__(self, o): return BinOp("*", self, const(o))
    def __rmul__(self, o): return BinOp("*", const(o), self)
    def __floordiv__(self, o): return BinOp("//", self, const(o))
    def __rfloordiv__(self, o): return BinOp("//", const(o), self)
    def __mod__(self, o): return BinOp("%", self, const(o))
    def __rmod__(self, o): return BinOp("%", const(o), self)
    def __rshift__(self, o): return BinOp(">>", self, const(o))
    def __lshift__(self, o): return BinOp("<<", self, const(o))
    def __neg__(self): return BinOp("-", IntImm(0), self)

    def astype(self, dtype: str) -> "Expr":
        """TVM's ``expr.astype(dtype)``: a :class:`Cast` (the tensor-expression DSL writes casts so)."""
        return Cast(dtype, self)


@dataclass(frozen=True, eq=True)
class IntImm(Expr):
    value: int
    dtype: str = "int32"


class Var(Expr):
    """A loop or thread variable; identity equality."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: str = "int32"):
        self.name = name
        self.dtype = dtype

    def __repr__(self):
        return f"Var({self.name})"

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr

    def __post_init__(self):
        if self.op not in _ARITH + _CMP + _LOGIC:
            raise IRError(f"unknown binary operator {self.op!r}")

    @property
    def dtype(self):
        return "bool" if self.op in _CMP + _LOGIC else self.a.dtype


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, eq=True)
class Load(Expr):
    buffer: "Buffer"
    index: Expr

    @property
    def dtype(self):
        return self.buffer.dtype


@dataclass(frozen=True, eq=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self):
        return self.true_value.dtype


@dataclass(frozen=True, eq=True)
class Call(Expr):
    """An intrinsic (``vta.uop_push``...) or runtime call (``VTALoadBuffer2D``...)."""

    name: str
    args: tuple = ()
    dtype: str = "int32"


def const(v, dtype: str = "int32") -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise IRError(f"{v!r} is not an integer expression")
    return IntImm(v, dtype)


def min_(a, b): return BinOp("min", const(a), const(b))
def max_(a, b): return BinOp("max", const(a), const(b))
def lt(a, b): return BinOp("<", const(a), const(b))
def le(a, b): return BinOp("<=", const(a), const(b))
def gt(a, b): return BinOp(">", const(a), const(b))
def ge(a, b): return BinOp(">=", const(a), const(b))
def eq(a, b): return BinOp("==", const(a), const(b))
def ne(a, b): return BinOp("!=", const(a), const(b))
def and_(a, b): return BinOp("&&", const(a), const(b))
def or_(a, b): return BinOp("||", const(a), const(b))


# ---- buffers --------------------------------------------------------------------------------
class Buffer:
    """A flat, row-major buffer: DRAM (``global``) or one of the three SRAM scopes.

    ``shape`` is the logical shape (the flat index of ``[i, j, k]`` is ``(i*s1 + j)*s2 + k``);
    ``elem_offset`` is where the buffer starts inside its storage (scalars), set by the
    allocation pass for SRAM buffers.  Identity equality.
    """

    __slots__ = ("name", "shape", "dtype", "scope", "elem_offset")

    def __init__(self, name: str, shape, dtype: str = "int32", scope: str = SCOPE_GLOBAL,
                 elem_offset: int = 0):
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.scope = scope
        self.elem_offset = int(elem_offset)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def strides(self) -> tuple:
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))

    def flat_index(self, indices) -> Expr:
        if len(indices) != len(self.shape):
            raise IRError(f"buffer {self.name!r} has {len(self.shape)} dimensions, indexed with {len(indices)}")
        expr: Expr = IntImm(0)
        for idx, st in zip(indices, self.strides):
            expr = expr + const(idx) * st
        return simplify(expr)

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"

    __hash__ = object.__hash__


# ---- statements -----------------------------------------------------------------------------
class Stmt:
    __slots__ = ()


@dataclass(frozen=True, eq=True)
class For(Stmt):
    var: Var
    extent: int
    body: Stmt
    kind: str = "serial"          # serial | cthread


@dataclass(frozen=True, eq=True)
class Seq(Stmt):
    stmts: tuple


@dataclass(frozen=True, eq=True)
class Store(Stmt):
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(frozen=True, eq=True)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=True)
class Attr(Stmt):
    """``key`` is e.g. ``pragma_dma_copy``, ``pragma_alu``, ``coproc_scope`` (value: stage 1/2/3),
    ``coproc_uop_scope`` (value: ``"VTAPushGEMMOp"``/``"VTAPushALUOp"``), ``virtual_thread``
    (value: the thread :class:`Var`; the extent goes in ``extra``)."""

    key: str
    value: object
    body: Stmt
    extra: object = None


@dataclass(frozen=True, eq=True)
class Evaluate(Stmt):
    call: Call


@dataclass(frozen=True, eq=True)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


def seq(*stmts) -> Stmt:
    """A :class:`Seq` of the given statements, flattening nested sequences and dropping Nones."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, (list, tuple)):
            s = seq(*s)
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


# ---- generic traversal ----------------------------------------------------------------------
def _children(node):
    if isinstance(node, BinOp):
        return (node.a, node.b)
    if isinstance(node, Cast):
        return (node.value,)
    if isinstance(node, Load):
        return (node.index,)
    if isinstance(node, Select):
        return (node.cond, node.true_value, node.false_value)
    if isinstance(node, Call):
        return tuple(a for a in node.args if isinstance(a, (Expr, Stmt)))
    if isinstance(node, For):
        return (node.var, node.body)
    if isinstance(node, Seq):
        return node.stmts
    if isinstance(node, Store):
        return (node.index, node.value)
    if isinstance(node, (Allocate,)):
        return (node.body,)
    if isinstance(node, Attr):
        return ((node.value,) if isinstance(node.value, Expr) else ()) + (node.body,)
    if isinstance(node, Evaluate):
        return (node.call,)
    if isinstance(node, IfThenElse):
        return (node.cond, node.then) + ((node.otherwise,) if node.otherwise is not None else ())
    return ()


def walk(node, visit: Callable) -> None:
    """Call ``visit(n)`` on every node, pre-order."""
    visit(node)
    for c in _children(node):
        walk(c, visit)


def transform(node, post: Callable, pre: Callable | None = None):
    """Rebuild ``node`` bottom-up: ``post(new_node)`` may return a replacement (or the node).

    ``pre(node)`` (optional) may return a replacement that is used as-is, without recursing.
    """
    if pre is not None:
        r = pre(node)
        if r is not None:
            return r
    rec = lambda n: transform(n, post, pre) if n is not None else None  # noqa: E731
    if isinstance(node, BinOp):
        new = BinOp(node.op, rec(node.a), rec(node.b))
    elif isinstance(node, Cast):
        new = Cast(node.dtype, rec(node.value))
    elif isinstance(node, Load):
        new = Load(node.buffer, rec(node.index))
    elif isinstance(node, Select):
        new = Select(rec(node.cond), rec(node.true_value), rec(node.false_value))
    elif isinstance(node, Call):
        new = Call(node.name, tuple(rec(a) if isinstance(a, (Expr, Stmt)) else a for a in node.args), node.dtype)
    elif isinstance(node, For):
        new = For(node.var, node.extent, rec(node.body), node.kind)
    elif isinstance(node, Seq):
        new = seq(*[rec(s) for s in node.stmts])
    elif isinstance(node, Store):
        new = Store(node.buffer, rec(node.index), rec(node.value))
    elif isinstance(node, Allocate):
        new = Allocate(node.buffer, rec(node.body))
    elif isinstance(node, Attr):
        value = rec(node.value) if isinstance(node.value, Expr) else node.value
        new = Attr(node.key, value, rec(node.body), node.extra)
    elif isinstance(node, Evaluate):
        new = Evaluate(rec(node.call))
    elif isinstance(node, IfThenElse):
        new = IfThenElse(rec(node.cond), rec(node.then), rec(node.otherwise))
    else:
        new = node
    out = post(new)
    return new if out is None else out


def free_vars(node) -> set:
    found = set()
    walk(node, lambda n: found.add(n) if isinstance(n, Var) else None)
    return found


def substitute(node, mapping: dict):
    """Replace variables by expressions (``mapping``: Var -> Expr or int)."""
    m = {k: const(v) for k, v in mapping.items()}
    return transform(node, lambda n: m.get(n) if isinstance(n, Var) else None)


# ---- affine analysis ------------------------------------------------------------------------
def _affine(e: Expr):
    """``{atom: coef}`` with the constant under key ``1``; atoms are Vars or opaque non-affine
    sub-expressions.  Returns None where a product of two non-constant terms appears."""
    if isinstance(e, IntImm):
        return {1: e.value} if e.value else {}
    if isinstance(e, Var):
        return {e: 1}
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
            if out[k] == 0:
                del out[k]
        return out
    if isinstance(e, BinOp) and e.op == "*":
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        if set(a) <= {1}:
            a, b = b, a
        if set(b) <= {1}:
            c = b.get(1, 0)
            return {k: v * c for k, v in a.items() if v * c}
        return None
    if isinstance(e, BinOp) and e.op == "<<":
        b = _affine(e.b)
        if b is not None and set(b) <= {1}:
            return _affine(BinOp("*", e.a, IntImm(1 << b.get(1, 0))))
    return {e: 1}        # opaque atom (a load, a division, a min...)


def _from_affine(terms: dict) -> Expr:
    """Rebuild ``sum(coef * atom) + const``: Vars first (by name), then opaque atoms."""
    items = sorted(((k, v) for k, v in terms.items() if k != 1),
                   key=lambda kv: (not isinstance(kv[0], Var), getattr(kv[0], "name", "")))
    out = None
    for atom, coef in items:
        term = atom if abs(coef) == 1 else BinOp("*", atom, IntImm(abs(coef)))
        if out is None:
            # a leading negative term stays a product (x * -1), which the ALU can execute as MUL
            out = term if coef > 0 else BinOp("*", atom, IntImm(coef))
        else:
            out = BinOp("+" if coef > 0 else "-", out, term)
    c = terms.get(1, 0)
    if out is None:
        return IntImm(c)
    if c:
        out = BinOp("+" if c > 0 else "-", out, IntImm(abs(c)))
    return out


FOLD = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "min": min, "max": max,
    ">>": lambda a, b: a >> b, "<<": lambda a, b: a << b,
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "&&": lambda a, b: int(bool(a) and bool(b)), "||": lambda a, b: int(bool(a) or bool(b)),
}


def simplify(e):
    """Fold constants and normalise affine index sums (statements: every expression inside)."""
    if isinstance(e, Stmt):
        return transform(e, lambda n: _simplify_expr(n) if isinstance(n, Expr) else None)
    return transform(e, lambda n: _simplify_expr(n) if isinstance(n, Expr) else None)


def _simplify_expr(e: Expr) -> Expr:
    if isinstance(e, BinOp):
        a, b = e.a, e.b
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            if e.op in ("//", "%") and b.value == 0:
                raise IRError(f"division by zero in {to_text(e)}")
            return IntImm(FOLD[e.op](a.value, b.value), "bool" if e.op in _CMP + _LOGIC else a.dtype)
        if e.op in ("+", "-", "*") and e.dtype != "bool":
            aff = _affine(e)
            if aff is not None:
                return _from_affine(aff)
        if e.op in ("//", "%") and isinstance(b, IntImm) and b.value == 1:
            return a if e.op == "//" else IntImm(0)
        if e.op in ("//", "%") and isinstance(b, IntImm) and b.value > 0:
            aff = _affine(a)
            if aff is not None and all(v % b.value == 0 for v in aff.values()):
                # every term is a multiple of the divisor: exact
                return _from_affine({k: v // b.value for k, v in aff.items()}) if e.op == "//" else IntImm(0)
    if isinstance(e, Select) and isinstance(e.cond, IntImm):
        return e.true_value if e.cond.value else e.false_value
    return e


def linear(expr: Expr, variables: Iterable[Var]):
    """``(coeffs, base)`` with ``expr == sum(c*v) + base`` and ``base`` free of ``variables``,
    or None when ``expr`` is not linear in them (TVM's detect_linear_equation)."""
    variables = list(variables)
    aff = _affine(simplify(expr))
    if aff is None:
        return None
    coeffs = [aff.pop(v, 0) for v in variables]
    base = _from_affine(aff)
    if free_vars(base) & set(variables):
        return None
    return coeffs, base


def evaluate(e: Expr, env: dict) -> int:
    """Integer value of ``e`` with Vars from ``env`` (Var -> int); loads are not allowed."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        try:
            return env[e]
        except KeyError:
            raise IRError(f"variable {e.name!r} has no value here") from None
    if isinstance(e, BinOp):
        a = evaluate(e.a, env)
        if e.op == "&&" and not a:
            return 0
        if e.op == "||" and a:
            return 1
        return FOLD[e.op](a, evaluate(e.b, env))
    if isinstance(e, Select):
        return evaluate(e.true_value if evaluate(e.cond, env) else e.false_value, env)
    if isinstance(e, Cast):
        return evaluate(e.value, env)
    raise IRError(f"cannot evaluate {to_text(e)} to an integer")


# ---- printing -------------------------------------------------------------------------------
_PREC = {"||": 1, "&&": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
         "<<": 4, ">>": 4, "+": 5, "-": 5, "*": 6, "//": 6, "%": 6}


def _expr_text(e) -> str:
    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({_expr_text(e.a)}, {_expr_text(e.b)})"
        return f"({_expr_text(e.a)} {e.op} {_expr_text(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({_expr_text(e.value)})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{_expr_text(e.index)}]"
    if isinstance(e, Select):
        return f"if_then_else({_expr_text(e.cond)}, {_expr_text(e.true_value)}, {_expr_text(e.false_value)})"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(_arg_text(a) for a in e.args)})"
    if isinstance(e, Buffer):
        return e.name
    return repr(e)


def _arg_text(a) -> str:
    if isinstance(a, Expr) or isinstance(a, Buffer):
        return _expr_text(a)
    if isinstance(a, str):
        return repr(a)
    return str(a)


def to_text(node, indent: int = 0) -> str:
    """Readable text of an expression or a statement tree."""
    if isinstance(node, Expr):
        return _expr_text(node)
    lines: list[str] = []
    _stmt_lines(node, indent, lines)
    return "\n".join(lines)


def _stmt_lines(s, ind: int, out: list) -> None:
    pad = "  " * ind
    if isinstance(s, Seq):
        for x in s.stmts:
            _stmt_lines(x, ind, out)
    elif isinstance(s, For):
        kind = "" if s.kind == "serial" else f" {s.kind}"
        out.append(f"{pad}for{kind} ({s.var.name}, 0, {s.extent}) {{")
        _stmt_lines(s.body, ind + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, Store):
        out.append(f"{pad}{s.buffer.name}[{_expr_text(s.index)}] = {_expr_text(s.value)}")
    elif isinstance(s, Allocate):
        b = s.buffer
        at = f" @{b.elem_offset}" if b.elem_offset else ""
        out.append(f"{pad}allocate {b.name}[{b.dtype} * {b.size}] in {b.scope}{at}")
        _stmt_lines(s.body, ind, out)
    elif isinstance(s, Attr):
        value = _arg_text(s.value) if not isinstance(s.value, Var) else s.value.name
        extra = f" ({s.extra})" if s.extra is not None else ""
        out.append(f"{pad}// attr [{s.key}] = {value}{extra}")
        out.append(f"{pad}{{")
        _stmt_lines(s.body, ind + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, Evaluate):
        out.append(f"{pad}{_expr_text(s.call)}")
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if ({_expr_text(s.cond)}) {{")
        _stmt_lines(s.then, ind + 1, out)
        if s.otherwise is not None:
            out.append(f"{pad}}} else {{")
            _stmt_lines(s.otherwise, ind + 1, out)
        out.append(f"{pad}}}")
    else:
        raise IRError(f"not a statement: {s!r}")
