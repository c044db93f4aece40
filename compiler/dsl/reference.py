"""Reference evaluation of tensor expressions in numpy, with the hardware's integer semantics.

This is the independent reference a compiled image's expected outputs come from: it reads the
compute definitions only (never a schedule or the lowered program).  Semantics: every value is
held in int64 and wrapped to its dtype after each operation (``int32`` arithmetic and
accumulation wrap modulo 2^32, a cast to ``int8`` truncates like the STORE of an accumulator),
``//`` and ``%`` floor, ``>>`` is arithmetic.

Evaluation is vectorised over the whole output: every axis is an ``arange`` broadcast along its
own dimension, so an index expression costs the size of the axes it uses, and a reduction of a
product of two reads (GEMM, conv2d) becomes one ``einsum`` (in float64, through BLAS, when the
operands are small enough for the sums to be exact; otherwise in int64, exact modulo 2^64).
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.lowering import ir
from vtasim.compiler.dsl.tensor import DSLError, ComputeOp, PlaceholderOp, Reduce, Tensor, TensorRead, expr_text

__all__ = ["evaluate", "wrap", "np_dtype", "ReferenceError_"]


class ReferenceError_(DSLError):
    """The reference evaluator cannot evaluate an expression (a read out of bounds, a bad input)."""

    where = "reference"


def _bits(dtype: str) -> int | None:
    if dtype == "bool":
        return None
    if dtype.startswith("int") and dtype[3:].isdigit():
        return int(dtype[3:])
    raise ReferenceError_(f"dtype {dtype!r}: only signed integer dtypes evaluate")


def wrap(x, dtype: str):
    """``x`` (int64) wrapped to the signed range of ``dtype`` (two's complement truncation)."""
    bits = _bits(dtype)
    if bits is None or bits >= 64:
        return x
    half = np.int64(1 << (bits - 1))
    mask = np.int64((1 << bits) - 1)
    return ((x + half) & mask) - half


def np_dtype(dtype: str):
    """The numpy dtype holding a tensor of ``dtype`` (``int8`` -> ``np.int8`` ...)."""
    bits = _bits(dtype)
    if bits is None:
        return np.bool_
    for n, t in ((8, np.int8), (16, np.int16), (32, np.int32)):
        if bits <= n:
            return t
    return np.int64


def evaluate(outputs, inputs: dict):
    """Evaluate ``outputs`` (a Tensor or a list) given ``inputs``: placeholder Tensor (or its
    name) -> array.  Returns one array (or a list) in each output's numpy dtype."""
    ev = _Evaluator(inputs)
    single = isinstance(outputs, Tensor)
    outs = [outputs] if single else list(outputs)
    res = [ev.tensor(t).astype(np_dtype(t.dtype)) for t in outs]
    return res[0] if single else res


class _Evaluator:
    def __init__(self, inputs: dict):
        self.by_tensor, self.by_name = {}, {}
        for k, v in inputs.items():
            (self.by_tensor if isinstance(k, Tensor) else self.by_name)[k if isinstance(k, Tensor) else str(k)] = v
        self.memo: dict = {}

    def tensor(self, t: Tensor) -> np.ndarray:
        key = id(t.op)
        if key not in self.memo:
            self.memo[key] = (self._placeholder(t) if isinstance(t.op, PlaceholderOp) else self._compute(t.op))
        return self.memo[key]

    def _placeholder(self, t: Tensor) -> np.ndarray:
        v = self.by_tensor.get(t, self.by_name.get(t.name))
        if v is None:
            raise ReferenceError_(f"no input given for placeholder `{t.name}`")
        v = np.asarray(v)
        if v.shape != t.shape:
            raise ReferenceError_(f"input `{t.name}`: shape {v.shape}, the placeholder is {t.shape}")
        if not np.issubdtype(v.dtype, np.integer):
            raise ReferenceError_(f"input `{t.name}`: dtype {v.dtype} is not an integer dtype")
        v = v.astype(np.int64)
        if v.size and not np.array_equal(wrap(v, t.dtype), v):
            raise ReferenceError_(f"input `{t.name}`: values outside the range of {t.dtype}")
        return v

    def _compute(self, op: ComputeOp) -> np.ndarray:
        axes = list(op.axis) + list(op.reduce_axis)
        nd = len(axes)
        env = {}
        for d, iv in enumerate(axes):
            shape = [1] * nd
            shape[d] = iv.extent
            env[iv] = np.arange(iv.extent, dtype=np.int64).reshape(shape)
        if isinstance(op.body, Reduce):
            val = self._reduce(op, env, len(op.axis))
        else:
            val = self._full_rank(self._expr(op.body, env, False), nd)
        val = wrap(np.asarray(val, dtype=np.int64), op.dtype)
        return np.ascontiguousarray(np.broadcast_to(val, op.shape))

    # -- reductions ----------------------------------------------------------------------------
    def _reduce(self, op: ComputeOp, env: dict, nout: int) -> np.ndarray:
        red: Reduce = op.body
        nd = len(env)
        src = red.source
        if isinstance(src, ir.BinOp) and src.op == "*" and src.dtype == red.dtype:
            a = self._full_rank(self._expr(src.a, env, False), nd)
            b = self._full_rank(self._expr(src.b, env, False), nd)
            return self._einsum(a, b, op, nout)
        full = np.broadcast_to(self._full_rank(self._expr(src, env, False), nd), op.shape + tuple(
            iv.extent for iv in op.reduce_axis))
        s = full.sum(axis=tuple(range(nout, nd)), dtype=np.int64)
        return s

    @staticmethod
    def _full_rank(x, nd):
        x = np.asarray(x, dtype=np.int64)
        return x.reshape((1,) * (nd - x.ndim) + x.shape) if x.ndim < nd else x

    def _einsum(self, a, b, op: ComputeOp, nout: int):
        # Contract over the reduce dims with each operand squeezed to the dims it really uses.
        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        exts = list(op.shape) + [iv.extent for iv in op.reduce_axis]
        la = [d for d in range(len(exts)) if a.shape[d] > 1]
        lb = [d for d in range(len(exts)) if b.shape[d] > 1]
        used = set(la) | set(lb)
        out = [d for d in range(nout) if d in used]
        unused_red = 1
        for d in range(nout, len(exts)):
            if d not in used:
                unused_red *= exts[d]
        a2 = a.reshape([a.shape[d] for d in la])
        b2 = b.reshape([b.shape[d] for d in lb])
        spec = (f"{''.join(letters[d] for d in la)},{''.join(letters[d] for d in lb)}"
                f"->{''.join(letters[d] for d in out)}")
        k = 1
        for d in range(nout, len(exts)):
            if d in used:
                k *= exts[d]
        amax = int(np.abs(a2).max()) if a2.size else 0
        bmax = int(np.abs(b2).max()) if b2.size else 0
        if amax * bmax * k * unused_red < (1 << 53):
            r = np.einsum(spec, a2.astype(np.float64), b2.astype(np.float64), optimize=True)
            r = np.rint(r).astype(np.int64)
        else:
            r = np.einsum(spec, a2, b2, optimize=True).astype(np.int64)
        r = r * np.int64(unused_red)
        shape = [exts[d] if d in out else 1 for d in range(nout)]
        return np.broadcast_to(np.asarray(r).reshape(shape), tuple(op.shape))

    # -- expressions ---------------------------------------------------------------------------
    def _expr(self, e, env: dict, guarded: bool):
        if isinstance(e, ir.IntImm):
            return np.int64(e.value)
        if isinstance(e, ir.Var):
            try:
                return env[e]
            except KeyError:
                raise ReferenceError_(f"variable `{e.name}` is not an axis of this compute") from None
        if isinstance(e, ir.Cast):
            v = self._expr(e.value, env, guarded)
            return (np.asarray(v) != 0).astype(np.int64) if e.dtype == "bool" else wrap(np.asarray(v, np.int64), e.dtype)
        if isinstance(e, ir.Select):
            c = np.asarray(self._expr(e.cond, env, guarded)) != 0
            t = self._expr(e.true_value, env, True)
            f = self._expr(e.false_value, env, True)
            return np.where(c, t, f)
        if isinstance(e, ir.BinOp):
            return self._binop(e, env, guarded)
        if isinstance(e, TensorRead):
            return self._read(e, env, guarded)
        if isinstance(e, Reduce):
            raise ReferenceError_("a reduction inside an expression (only a whole body reduces)")
        raise ReferenceError_(f"cannot evaluate {type(e).__name__}")

    def _binop(self, e: ir.BinOp, env, guarded):
        a = np.asarray(self._expr(e.a, env, guarded), dtype=np.int64)
        b = np.asarray(self._expr(e.b, env, guarded), dtype=np.int64)
        op = e.op
        if op in ("//", "%"):
            if np.any(b == 0):
                raise ReferenceError_(f"division by zero in {expr_text(e)}")
            r = a // b if op == "//" else a % b
        elif op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op == "min":
            r = np.minimum(a, b)
        elif op == "max":
            r = np.maximum(a, b)
        elif op == ">>":
            r = a >> np.minimum(b, 63)
        elif op == "<<":
            r = a << np.minimum(b, 63)
        elif op in ("<", "<=", ">", ">=", "==", "!="):
            r = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                 "==": np.equal, "!=": np.not_equal}[op](a, b).astype(np.int64)
            return r
        elif op == "&&":
            return ((a != 0) & (b != 0)).astype(np.int64)
        elif op == "||":
            return ((a != 0) | (b != 0)).astype(np.int64)
        else:
            raise ReferenceError_(f"operator {op!r}")
        return wrap(r, e.dtype)

    def _read(self, e: TensorRead, env, guarded):
        arr = self.tensor(e.tensor)
        idx = []
        for d, (ie, n) in enumerate(zip(e.indices, e.tensor.shape)):
            v = np.asarray(self._expr(ie, env, guarded), dtype=np.int64)
            if guarded:
                # the other branch of a select: out-of-range reads are masked, clamp them
                v = np.clip(v, 0, n - 1)
            elif v.size and (v.min() < 0 or v.max() >= n):
                raise ReferenceError_(f"read of `{e.tensor.name}` out of bounds: index {d} spans "
                                      f"[{int(v.min())}, {int(v.max())}], the dimension has {n}")
            idx.append(v)
        # broadcast every index to full rank so the gather keeps the axis positions
        idx = [self._full_rank(v, len(env)) for v in idx]
        return arr[tuple(idx)]
