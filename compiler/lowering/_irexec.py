"""A slow, literal interpreter of the phase-0 loop IR, for tests.

It runs a :class:`~vtasim.compiler.lowering.lower.LoweredFunc` on numpy arrays one scalar store at a time:
loops, virtual threads (run one after the other), allocations, stores and loads with every index
bounds-checked against its buffer, selects, casts with wraparound, and ``vta.uop_push`` GEMM
calls (mode 0) as a BATCH x BLOCK_IN x BLOCK_OUT multiply-accumulate into the accumulator
element (or its reset).  Comparing its result with :mod:`vtasim.compiler.dsl.reference` checks that
bounds inference and index rewriting in ``lower`` are right.

Fresh SRAM buffers are filled with a fixed non-zero pattern so a missing reduction init (or a
read of a part of a region nobody wrote) shows in the output instead of passing by luck.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.dsl.reference import np_dtype, wrap

__all__ = ["run", "IRExecError"]


class IRExecError(CompileError):
    """The program does something the IR forbids (an index out of its buffer, an unknown call)."""

    def __init__(self, message: str):
        ValueError.__init__(self, f"irexec: {message}")
        self.pass_name = "irexec"


def run(func, inputs: dict, env=None) -> dict:
    """Execute ``func`` with ``inputs`` (argument name -> array); returns every argument buffer
    (name -> array of its shape and dtype).  ``env`` (an Environment, default the current one)
    gives the GEMM shape."""
    if env is None:
        from vtasim.compiler.dsl.environment import get_env
        env = get_env()
    m = _Machine(env)
    for b in func.args:
        if b.name in inputs:
            a = np.asarray(inputs[b.name])
            if a.size != b.size:
                raise IRExecError(f"argument `{b.name}`: {a.size} values, the buffer holds {b.size}")
            m.mem[b] = a.astype(np.int64).reshape(-1).copy()
        else:
            m.mem[b] = np.zeros(b.size, np.int64)
    if func.body is not None:
        m.stmt(func.body, {})
    return {b.name: m.mem[b].astype(np_dtype(b.dtype)).reshape(b.shape) for b in func.args}


class _Machine:
    def __init__(self, env):
        self.env = env
        self.mem: dict = {}

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s, vars_: dict):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.stmt(x, vars_)
        elif isinstance(s, ir.For) and isinstance(s.body, ir.Store) and not _loads_from(s.body.value, s.body.buffer):
            self._vector_store(s, vars_)
        elif isinstance(s, ir.For):
            for i in range(s.extent):
                vars_[s.var] = i
                self.stmt(s.body, vars_)
            vars_.pop(s.var, None)
        elif isinstance(s, ir.Attr):
            if s.key == "virtual_thread":
                for t in range(int(s.extra)):
                    vars_[s.value] = t
                    self.stmt(s.body, vars_)
                vars_.pop(s.value, None)
            else:
                self.stmt(s.body, vars_)
        elif isinstance(s, ir.Allocate):
            b = s.buffer
            # a recognisable non-zero fill: reading it before writing shows in results
            self.mem[b] = (np.arange(b.size, dtype=np.int64) * 7919 % 251) - 125
            self.stmt(s.body, vars_)
            del self.mem[b]
        elif isinstance(s, ir.Store):
            i = self._index(s.buffer, self.expr(s.index, vars_))
            self.mem[s.buffer][i] = int(wrap(np.int64(self.expr(s.value, vars_)), s.buffer.dtype))
        elif isinstance(s, ir.Evaluate):
            self.call(s.call, vars_)
        elif isinstance(s, ir.IfThenElse):
            if self.expr(s.cond, vars_):
                self.stmt(s.then, vars_)
            elif s.otherwise is not None:
                self.stmt(s.otherwise, vars_)
        else:
            raise IRExecError(f"cannot execute {type(s).__name__}")

    def _index(self, buf, i: int) -> int:
        if buf not in self.mem:
            raise IRExecError(f"buffer `{buf.name}` is used outside its allocation")
        if not 0 <= i < buf.size:
            raise IRExecError(f"index {i} out of `{buf.name}` ({buf.size} elements)")
        return i

    def call(self, c: ir.Call, vars_):
        if c.name != "vta.uop_push":
            raise IRExecError(f"unknown call {c.name}")
        mode, reset, dst, src, wgt = c.args[:5]
        mode, reset = (int(x.value) if isinstance(x, ir.IntImm) else int(x) for x in (mode, reset))
        if mode != 0:
            raise IRExecError("only GEMM uop pushes (mode 0) run at phase 0")
        e = self.env
        nacc = e.BATCH * e.BLOCK_OUT
        dbuf, doff = self._ptr(dst, vars_, nacc)
        if reset:
            self.mem[dbuf][doff:doff + nacc] = 0
            return
        sbuf, soff = self._ptr(src, vars_, e.BATCH * e.BLOCK_IN)
        wbuf, woff = self._ptr(wgt, vars_, e.BLOCK_OUT * e.BLOCK_IN)
        x = self.mem[sbuf][soff:soff + e.BATCH * e.BLOCK_IN].reshape(e.BATCH, e.BLOCK_IN)
        w = self.mem[wbuf][woff:woff + e.BLOCK_OUT * e.BLOCK_IN].reshape(e.BLOCK_OUT, e.BLOCK_IN)
        acc = self.mem[dbuf][doff:doff + nacc].reshape(e.BATCH, e.BLOCK_OUT)
        self.mem[dbuf][doff:doff + nacc] = wrap(acc + x @ w.T, dbuf.dtype).reshape(-1)

    def _ptr(self, p, vars_, lanes: int):
        if not (isinstance(p, ir.Call) and p.name == "tvm_access_ptr"):
            raise IRExecError(f"uop_push operand {p!r} is not a tvm_access_ptr")
        buf, off = p.args[0], self.expr(p.args[1], vars_)
        self._index(buf, off)
        self._index(buf, off + lanes - 1)
        return buf, off

    # -- an innermost loop of one store, all iterations at once ---------------------------------
    def _vector_store(self, loop: ir.For, vars_):
        # only when the value does not read the stored buffer: no iteration sees another's write
        st = loop.body
        env = dict(vars_)
        env[loop.var] = np.arange(loop.extent, dtype=np.int64)
        shape = (loop.extent,)
        idx = np.broadcast_to(np.asarray(self.vexpr(st.index, env, None), np.int64), shape)
        val = np.broadcast_to(np.asarray(self.vexpr(st.value, env, None), np.int64), shape)
        self._check(st.buffer, idx, None)
        self.mem[st.buffer][idx] = wrap(val, st.buffer.dtype)

    def _check(self, buf, idx, mask):
        if buf not in self.mem:
            raise IRExecError(f"buffer `{buf.name}` is used outside its allocation")
        bad = (idx < 0) | (idx >= buf.size)
        if mask is not None:
            bad = bad & mask
        if np.any(bad):
            raise IRExecError(f"index {int(np.asarray(idx)[bad][0] if np.ndim(idx) else idx)} out of "
                              f"`{buf.name}` ({buf.size} elements)")

    def vexpr(self, e, env, mask):
        """``expr`` over numpy lanes; ``mask`` marks the lanes whose value is used (loads in the
        untaken side of a select may be out of range there)."""
        if isinstance(e, ir.IntImm):
            return np.int64(e.value)
        if isinstance(e, ir.Var):
            if e not in env:
                raise IRExecError(f"variable `{e.name}` used outside its loop")
            return env[e]
        if isinstance(e, ir.Load):
            idx = np.asarray(self.vexpr(e.index, env, mask), np.int64)
            self._check(e.buffer, idx, mask)
            return self.mem[e.buffer][np.clip(idx, 0, e.buffer.size - 1)]
        if isinstance(e, ir.Cast):
            v = np.asarray(self.vexpr(e.value, env, mask), np.int64)
            return (v != 0).astype(np.int64) if e.dtype == "bool" else wrap(v, e.dtype)
        if isinstance(e, ir.Select):
            c = np.asarray(self.vexpr(e.cond, env, mask)) != 0
            m = np.ones_like(c) if mask is None else mask
            t = self.vexpr(e.true_value, env, m & c)
            f = self.vexpr(e.false_value, env, m & ~c)
            return np.where(c, t, f)
        if isinstance(e, ir.BinOp):
            a = np.asarray(self.vexpr(e.a, env, mask), np.int64)
            b = np.asarray(self.vexpr(e.b, env, mask), np.int64)
            if e.op in ("//", "%") and np.any(b == 0):
                raise IRExecError("division by zero")
            r = _VOPS[e.op](a, b)
            return r.astype(np.int64) if e.dtype == "bool" else wrap(r, e.dtype)
        raise IRExecError(f"cannot evaluate {type(e).__name__}")

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e, vars_) -> int:
        if isinstance(e, ir.IntImm):
            return e.value
        if isinstance(e, ir.Var):
            try:
                return vars_[e]
            except KeyError:
                raise IRExecError(f"variable `{e.name}` used outside its loop") from None
        if isinstance(e, ir.Load):
            return int(self.mem[e.buffer][self._index(e.buffer, self.expr(e.index, vars_))])
        if isinstance(e, ir.Cast):
            v = self.expr(e.value, vars_)
            return int(v != 0) if e.dtype == "bool" else int(wrap(np.int64(v), e.dtype))
        if isinstance(e, ir.Select):
            return self.expr(e.true_value if self.expr(e.cond, vars_) else e.false_value, vars_)
        if isinstance(e, ir.BinOp):
            a = self.expr(e.a, vars_)
            if e.op == "&&" and not a:
                return 0
            if e.op == "||" and a:
                return 1
            b = self.expr(e.b, vars_)
            r = ir.FOLD[e.op](a, b)
            return r if e.dtype == "bool" else int(wrap(np.int64(r), e.dtype))
        raise IRExecError(f"cannot evaluate {type(e).__name__}")


_VOPS = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod,
    "min": np.minimum, "max": np.maximum, ">>": np.right_shift, "<<": np.left_shift,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
    "!=": np.not_equal, "&&": lambda a, b: (a != 0) & (b != 0), "||": lambda a, b: (a != 0) | (b != 0),
}


def _loads_from(e, buf) -> bool:
    found = []
    ir.walk(e, lambda n: found.append(n) if isinstance(n, ir.Load) and n.buffer is buf else None)
    return bool(found)
