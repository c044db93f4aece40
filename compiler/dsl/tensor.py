"""Tensor expressions: the thin TE a VTA schedule is written in (TVM's ``te``, integers only).

Users import the :mod:`vtasim.compiler.dsl.te` facade (this module plus ``create_schedule``); the compiler's
own modules import this one, so the schedule layer never imports back into the facade.

Expressions are :mod:`vtasim.compiler.lowering.ir` nodes (``IntImm``, ``Var``, ``BinOp``, ``Cast``, ``Select``)
plus two nodes that only exist before lowering: :class:`TensorRead` (``T[i, j]``) and
:class:`Reduce` (``sum(expr, axis=[k])``, only at the top of a compute body)::

    A = placeholder((1, 16, 1, 16), "int8", "A")
    k = reduce_axis((0, 16), "k")
    C = compute((1, 16), lambda i, j: sum(A[0, j, 0, k].astype("int32"), axis=[k]), "C")

Python operators build arithmetic, ``>>``/``<<`` shifts; comparisons are the functions
:func:`lt` ... :func:`ne`; :func:`all_` is a conjunction, :func:`if_then_else` a select, and
:func:`pad` is ``topi.nn.pad`` (a compute whose value is zero outside the input).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.ir import (BinOp, Cast, Expr, IntImm, Select, Var, and_, const, eq, ge, gt, le, lt,
                         max_, min_, ne, or_)

__all__ = [
    "MAX_TENSOR_ELEMENTS", "MAX_DIMS", "check_shape", "check_extent", "check_dtype", "IterVar", "Tensor", "PlaceholderOp", "ComputeOp", "TensorRead", "Reduce", "DSLError", "TEError",
    "placeholder", "compute", "reduce_axis", "thread_axis", "sum", "cast", "if_then_else",
    "all_", "any_", "min", "max", "min_", "max_", "lt", "le", "gt", "ge", "eq", "ne", "const",
    "pad", "map_expr", "reads_of", "expr_text",
]


class DSLError(CompileError):
    """Base of the DSL's errors (a :class:`CompileError`): one line, ``<where>: <what and rule>``.

    Built from the message alone, whatever signature :class:`CompileError` itself has."""

    where = "te"

    def __init__(self, message: str):
        ValueError.__init__(self, f"{self.where}: {message}")
        self.pass_name = self.where


class TEError(DSLError):
    """A malformed tensor expression (wrong number of indices, a nested reduction...)."""


# Bounds of every tensor and axis, checked when it is made (before lower, build or the reference
# allocate anything): the reference evaluator holds a tensor in int64 (and a few copies of it while it
# evaluates), so 2^22 elements are 32 MiB each; a compile stays well within a 1.5 GiB process.
MAX_TENSOR_ELEMENTS = 1 << 22
MAX_DIMS = 16


def _is_int(v) -> bool:
    import numbers
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and type(v).__name__ != "bool_"


def check_extent(value, what: str) -> int:
    """``value`` as an int if it is an integer in [1, MAX_TENSOR_ELEMENTS], else a TEError naming ``what``."""
    if not _is_int(value):
        import numbers
        shown = value if isinstance(value, numbers.Number) else repr(value)
        raise TEError(f"{what} = {shown} is a {type(value).__name__}, not an integer (rule: extents are integers)")
    value = int(value)
    if not 1 <= value <= MAX_TENSOR_ELEMENTS:
        raise TEError(f"{what} = {value if value.bit_length() < 100 else '<huge>'} must be in "
                      f"[1, {MAX_TENSOR_ELEMENTS}] (rule: an extent is at least 1 and at most MAX_TENSOR_ELEMENTS)")
    return value


def check_dtype(dtype, what: str) -> str:
    """``dtype`` if it is ``bool`` or a signed ``intN`` (N in 1..64), else a TEError naming ``what``."""
    if dtype == "bool" or (isinstance(dtype, str) and dtype.startswith("int") and dtype[3:].isdigit()
                           and dtype[3:].isascii() and 1 <= int(dtype[3:]) <= 64):
        return dtype
    raise TEError(f"{what}: dtype {dtype!r} is not bool or int1..int64 (rule: VTA tensors are signed integers)")


def check_shape(shape, what: str) -> tuple:
    """``shape`` as a tuple of ints: at most MAX_DIMS integer extents >= 1 whose product is at most
    MAX_TENSOR_ELEMENTS; else a TEError naming ``what`` and the dimension."""
    if not isinstance(shape, (tuple, list)):
        raise TEError(f"{what}: shape {shape!r} must be a tuple of integers")
    if len(shape) > MAX_DIMS:
        raise TEError(f"{what}: {len(shape)} dimensions (rule: at most MAX_DIMS = {MAX_DIMS})")
    out, total = [], 1
    for d, s in enumerate(shape):
        n = check_extent(s, f"{what}: dimension {d}")
        total *= n
        out.append(n)
    if total > MAX_TENSOR_ELEMENTS:
        raise TEError(f"{what}: shape {tuple(out)} has {total} elements, more than MAX_TENSOR_ELEMENTS = "
                      f"{MAX_TENSOR_ELEMENTS} (rule: the reference holds a tensor in int64, at most 32 MiB)")
    return tuple(out)


class IterVar(Var):
    """An iteration axis: a :class:`~vtasim.compiler.lowering.ir.Var` that also knows its kind and, for the
    axes of an op, its extent.  ``iter_type`` is ``data_par``, ``reduce`` or ``thread``; the
    axes made by ``split``/``fuse`` have ``extent`` None until ``lower`` infers it."""

    __slots__ = ("extent", "iter_type", "thread_tag")

    def __init__(self, name: str, extent: int | None = None, iter_type: str = "data_par",
                 thread_tag: str = ""):
        super().__init__(name)
        self.extent = extent
        self.iter_type = iter_type
        self.thread_tag = thread_tag

    @property
    def var(self) -> "IterVar":
        """TVM spells the variable of an IterVar ``iv.var``; here it is the IterVar itself."""
        return self

    def __repr__(self):
        return f"IterVar({self.name}, {self.extent}, {self.iter_type})"


class Tensor:
    """The output of an op; ``T[i, j]`` / ``T(i, j)`` read it.  Identity equality."""

    def __init__(self, op):
        self.op = op

    @property
    def shape(self) -> tuple:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self(*indices)

    def __call__(self, *indices):
        if len(indices) != self.ndim:
            raise TEError(f"tensor `{self.name}` has {self.ndim} dimensions, read with {len(indices)} indices")
        return TensorRead(self, tuple(const(i) for i in indices))

    def __repr__(self):
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


class PlaceholderOp:
    """An input tensor: data the caller provides."""

    def __init__(self, name: str, shape, dtype: str):
        if not isinstance(name, str) or not name:
            raise TEError(f"placeholder name {name!r} must be a non-empty string")
        self.name = name
        self.shape = check_shape(shape, f"placeholder `{name}`")
        self.dtype = check_dtype(dtype, f"placeholder `{name}`")
        self.tensor = Tensor(self)

    def output(self, index: int = 0) -> Tensor:
        return self.tensor

    @property
    def input_tensors(self) -> list:
        return []

    def __repr__(self):
        return f"placeholder {self.name}{list(self.shape)} {self.dtype}"


class ComputeOp:
    """``out[axis] = body`` over the op's data-parallel ``axis`` (and ``reduce_axis`` when the
    body is a :class:`Reduce`)."""

    def __init__(self, name: str, axis, body: Expr, tag: str = ""):
        self.name = name
        self.tag = tag
        self.axis = tuple(axis)
        self.body = body
        self.reduce_axis = tuple(body.axes) if isinstance(body, Reduce) else ()
        self.shape = tuple(iv.extent for iv in self.axis)
        self.dtype = body.dtype
        self.tensor = Tensor(self)

    def output(self, index: int = 0) -> Tensor:
        return self.tensor

    @property
    def input_tensors(self) -> list:
        return _unique(r.tensor for r in reads_of(self.body))

    def __repr__(self):
        return f"compute {self.name}{list(self.shape)} {self.dtype}"


@dataclass(frozen=True, eq=False)
class TensorRead(Expr):
    """``tensor[indices]`` (identity equality: a read is a place in a body)."""

    tensor: Tensor
    indices: tuple

    @property
    def dtype(self):
        return self.tensor.dtype


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """A commutative reduction (``sum``) of ``source`` over the reduce axes ``axes``."""

    op: str
    source: Expr
    axes: tuple

    @property
    def dtype(self):
        return self.source.dtype


def _unique(items) -> list:
    out, seen = [], set()
    for x in items:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


# ---- constructors ---------------------------------------------------------------------------
def placeholder(shape, dtype: str = "int32", name: str = "placeholder") -> Tensor:
    return PlaceholderOp(name, shape, dtype).output(0)


def _arg_names(fcompute: Callable, ndim: int, name: str) -> list:
    params = list(inspect.signature(fcompute).parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return [f"i{k}" for k in range(ndim)]
    if len(params) != ndim:
        raise TEError(f"compute `{name}`: the function takes {len(params)} arguments, the shape has {ndim} dimensions")
    return [p.name for p in params]


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "") -> Tensor:
    """``compute(shape, lambda i, j: ..., name)``: a tensor whose element ``[i, j]`` is the body."""
    shape = check_shape(shape, f"compute `{name}`")
    axis = [IterVar(n, ext) for n, ext in zip(_arg_names(fcompute, len(shape), name), shape)]
    body = fcompute(*axis)
    body = const(body)
    # TVM's rule: a reduction is the whole body of its compute, never a part of an expression
    map_expr(body.source if isinstance(body, Reduce) else body, lambda e: _no_reduce(e, name))
    return ComputeOp(name, axis, body, tag).output(0)


def _no_reduce(e, name):
    if isinstance(e, Reduce):
        raise TEError(f"compute `{name}`: a reduction may only be the whole body, not inside an expression")
    # TVM refuses int8 + int32 without a cast: the result type would be a guess (constants adapt)
    if (isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%", "min", "max")
            and not isinstance(e.a, IntImm) and not isinstance(e.b, IntImm) and e.a.dtype != e.b.dtype):
        raise TEError(f"compute `{name}`: {expr_text(e)} mixes {e.a.dtype} and {e.b.dtype}; cast one side")


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom = (0, n)`` (ranges start at 0 in this IR)."""
    if not isinstance(dom, (tuple, list)) or len(dom) != 2:
        raise TEError(f"reduce_axis `{name}`: the range must be a pair (0, n), got {dom!r}")
    lo, hi = dom
    if not _is_int(lo) or lo != 0:
        raise TEError(f"reduce_axis `{name}`: the range must start at 0, got ({lo!r}, {hi!r})")
    return IterVar(name, check_extent(hi, f"reduce_axis `{name}`: extent"), "reduce")


def thread_axis(tag: str = "cthread", name: str | None = None) -> IterVar:
    """A thread axis to ``bind`` a loop to; only ``cthread`` (VTA's virtual threads) lowers."""
    return IterVar(name or tag, None, "thread", thread_tag=tag)


def sum(expr, axis) -> Reduce:  # noqa: A001 - TVM's name
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not isinstance(a, IterVar) or a.iter_type != "reduce":
            raise TEError(f"sum: `{getattr(a, 'name', a)}` is not a reduce_axis")
    return Reduce("sum", const(expr), axes)


def cast(dtype: str, e) -> Expr:
    return Cast(check_dtype(dtype, "cast"), const(e))


def if_then_else(cond, a, b) -> Expr:
    return Select(const(cond), const(a), const(b))


def _fold(join, empty: int, conds) -> Expr:
    """``conds`` (given as arguments or one list) joined left to right by ``join``; ``empty`` (a
    bool) for none."""
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    out = None
    for c in conds:
        out = const(c) if out is None else join(out, c)
    return IntImm(empty, "bool") if out is None else out


def all_(*conds) -> Expr:
    """Conjunction of the conditions (``tvm.tir.all``); true for none."""
    return _fold(and_, 1, conds)


def any_(*conds) -> Expr:
    """Disjunction of the conditions (``tvm.tir.any``); false for none."""
    return _fold(or_, 0, conds)


min = min_  # noqa: A001 - te.min / te.max as in TVM
max = max_  # noqa: A001


def pad(data: Tensor, pad_before, pad_after=None, pad_value=0, name: str = "PadInput") -> Tensor:
    """``topi.nn.pad``: zero (``pad_value``) outside ``data``; only padded dims get a condition,
    so the copy of an unpadded dim stays a plain load."""
    pad_after = pad_before if pad_after is None else pad_after
    n = data.ndim
    if len(pad_before) != n or len(pad_after) != n:
        raise TEError(f"pad of `{data.name}`: {n} dimensions, pads given for {len(pad_before)}/{len(pad_after)}")
    for side, pads in (("before", pad_before), ("after", pad_after)):
        for d, p in enumerate(pads):
            if not _is_int(p) or not 0 <= p <= MAX_TENSOR_ELEMENTS:
                raise TEError(f"pad of `{data.name}`: pad {side} of dimension {d} = {p!r} must be an integer in "
                              f"[0, {MAX_TENSOR_ELEMENTS}]")
    shape = [s + b + a for s, b, a in zip(data.shape, pad_before, pad_after)]

    def body(*idx):
        conds, src = [], []
        for i, s, b, a in zip(idx, data.shape, pad_before, pad_after):
            if b or a:
                conds.append(ge(i, b))
                conds.append(lt(i, s + b))
            src.append(i - b if b else i)
        value = data(*src)
        if not conds:
            return value
        return Select(all_(*conds), value, IntImm(pad_value, data.dtype))

    return compute(shape, body, name, tag="injective,pad")


# ---- traversal ------------------------------------------------------------------------------
def map_expr(e, post: Callable):
    """Rebuild a tensor expression bottom-up; ``post(node)`` returns a replacement or None."""
    if isinstance(e, TensorRead):
        new = TensorRead(e.tensor, tuple(map_expr(i, post) for i in e.indices))
    elif isinstance(e, Reduce):
        new = Reduce(e.op, map_expr(e.source, post), e.axes)
    elif isinstance(e, BinOp):
        new = BinOp(e.op, map_expr(e.a, post), map_expr(e.b, post))
    elif isinstance(e, Cast):
        new = Cast(e.dtype, map_expr(e.value, post))
    elif isinstance(e, Select):
        new = Select(map_expr(e.cond, post), map_expr(e.true_value, post), map_expr(e.false_value, post))
    elif isinstance(e, ir.Load):
        new = ir.Load(e.buffer, map_expr(e.index, post))
    else:
        new = e
    out = post(new)
    return new if out is None else out


def reads_of(e) -> list:
    """Every :class:`TensorRead` in ``e``, in evaluation order."""
    found = []
    map_expr(e, lambda n: found.append(n) if isinstance(n, TensorRead) else None)
    return found


def expr_text(e) -> str:
    """Readable text of a tensor expression."""
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(expr_text(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        return f"{e.op}({expr_text(e.source)}, axis=[{', '.join(a.name for a in e.axes)}])"
    if isinstance(e, BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_text(e.a)}, {expr_text(e.b)})"
        return f"({expr_text(e.a)} {e.op} {expr_text(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_text(e.value)})"
    if isinstance(e, Select):
        return f"if_then_else({expr_text(e.cond)}, {expr_text(e.true_value)}, {expr_text(e.false_value)})"
    return ir.to_text(e)

