"""Codegen: the final IR of :func:`vtasim.compiler.lowering.passes.run_passes` -> runtime calls on a CommandQueue.

TVM compiles the lowered function to host code that calls the VTA runtime; here the IR is
translated once into a small Python function (loops become ``for`` loops over ``range``, index
expressions become integer arithmetic on the loop variables) and that function is run against a
:class:`vtasim.compiler.runtime.CommandQueue`.  Translating first keeps large schedules fast: a ResNet
layer with fallback knobs makes ~100k runtime calls, each a plain method call here.

Call mapping (docs/compiler.md "Runtime calls in the final IR"):

* ``VTALoadBuffer2D`` / ``VTAStoreBuffer2D`` -> ``load_buffer_2d`` / ``store_buffer_2d``, the global
  ``ir.Buffer`` argument replaced by the caller's DRAM buffer;
* ``Attr("coproc_uop_scope", "VTAPushGEMMOp"|"VTAPushALUOp", body, extra=site)`` ->
  ``push_gemm_op`` / ``push_alu_op(key, record)``; ``record(k)`` replays ``body`` on the kernel
  recorder (``VTAUopLoopBegin`` -> ``k.loop_begin``, ``VTAUopPush`` -> ``k.push``,
  ``VTAUopLoopEnd`` -> ``k.loop_end``); ``key = (site, value of the body's one free variable or
  None)`` -- the runtime's closure rule (spec 5.2), so a kernel depending on two outer variables is
  refused;
* ``vta.coproc_dep_push/pop`` -> ``dep_push/dep_pop``, ``vta.coproc_sync`` -> ``synchronize``.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError

__all__ = ["emit", "to_python"]

PASS = "codegen"
_PY_OP = {"+": "+", "-": "-", "*": "*", "//": "//", "%": "%", ">>": ">>", "<<": "<<",
          "<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}


class _Gen:
    def __init__(self, func):
        self.func = func
        self.names = {}             # Var -> python identifier
        self.bufs = {}              # global Buffer -> python identifier
        self.kernels = []           # source lines of kernel functions
        self.nk = 0

    # ---- expressions -------------------------------------------------------------------------
    def var(self, v):
        if v not in self.names:
            self.names[v] = f"v{len(self.names)}"
        return self.names[v]

    def expr(self, e) -> str:
        if isinstance(e, int):
            return str(e)
        if isinstance(e, ir.IntImm):
            return str(e.value)
        if isinstance(e, ir.Var):
            if e not in self.names:
                raise CompileError(PASS, f"variable `{e.name}` is used outside the loop that defines it")
            return self.names[e]
        if isinstance(e, ir.BinOp):
            a, b = self.expr(e.a), self.expr(e.b)
            if e.op in ("min", "max"):
                return f"{e.op}({a}, {b})"
            if e.op == "&&":
                return f"({a} and {b})"
            if e.op == "||":
                return f"({a} or {b})"
            return f"({a} {_PY_OP[e.op]} {b})"
        if isinstance(e, ir.Cast):
            return self.expr(e.value)
        if isinstance(e, ir.Select):
            return f"({self.expr(e.true_value)} if {self.expr(e.cond)} else {self.expr(e.false_value)})"
        raise CompileError(PASS, f"expression {ir.to_text(e)} is not host integer arithmetic")

    def buf(self, b):
        if not isinstance(b, ir.Buffer) or b.scope != ir.SCOPE_GLOBAL:
            raise CompileError(PASS, f"DMA argument {b!r} is not a global buffer")
        if b not in self.bufs:
            self.bufs[b] = f"b{len(self.bufs)}"
        return self.bufs[b]

    # ---- statements --------------------------------------------------------------------------
    def nest(self, s, out, ind, leaf):
        """Sequences and loops of ``s`` as Python statements; any other statement goes to
        ``leaf(s, out, ind)``."""
        if isinstance(s, ir.Seq):
            for c in s.stmts:
                self.nest(c, out, ind, leaf)
        elif isinstance(s, ir.For):
            out.append(f"{'    ' * ind}for {self.var(s.var)} in range({s.extent}):")
            self.nest(s.body, out, ind + 1, leaf)
        else:
            leaf(s, out, ind)

    def stmt(self, s, out, ind):
        """A host statement: runtime calls on the command queue ``q``."""
        self.nest(s, out, ind, self.host_leaf)

    def host_leaf(self, s, out, ind):
        pad = "    " * ind
        if isinstance(s, ir.Attr) and s.key == "coproc_uop_scope":
            self.uop_scope(s, out, ind)
        elif isinstance(s, (ir.Attr, ir.Allocate)):
            self.stmt(s.body, out, ind)
        elif isinstance(s, ir.IfThenElse):
            out.append(f"{pad}if {self.expr(s.cond)}:")
            self.stmt(s.then, out, ind + 1)
            out.append(f"{pad}    pass")
            if s.otherwise is not None:
                out.append(f"{pad}else:")
                self.stmt(s.otherwise, out, ind + 1)
                out.append(f"{pad}    pass")
        elif isinstance(s, ir.Evaluate):
            out.append(pad + self.call(s.call))
        else:
            raise CompileError(PASS, f"statement {ir.to_text(s).splitlines()[0]} is not a runtime call")

    def call(self, c) -> str:
        a = c.args
        x = self.expr
        if c.name == "VTALoadBuffer2D":
            return (f"q.load_buffer_2d({self.buf(a[0])}, " + ", ".join(x(v) for v in a[1:]) + ")")
        if c.name == "VTAStoreBuffer2D":
            return (f"q.store_buffer_2d({x(a[0])}, {x(a[1])}, {self.buf(a[2])}, "
                    + ", ".join(x(v) for v in a[3:]) + ")")
        if c.name == "vta.coproc_dep_push":
            return f"q.dep_push({x(a[0])}, {x(a[1])})"
        if c.name == "vta.coproc_dep_pop":
            return f"q.dep_pop({x(a[0])}, {x(a[1])})"
        if c.name == "vta.coproc_sync":
            return "q.synchronize()"
        raise CompileError(PASS, f"call {c.name} outside a uop kernel is not a runtime call")

    def kernel_stmt(self, s, out, ind):
        """A statement of a uop kernel: uop loops and pushes on the kernel recorder ``k``."""
        self.nest(s, out, ind, self.kernel_leaf)

    def kernel_leaf(self, s, out, ind):
        pad = "    " * ind
        if isinstance(s, ir.Attr):
            self.kernel_stmt(s.body, out, ind)
        elif isinstance(s, ir.Evaluate):
            c = s.call
            args = ", ".join(self.expr(v) for v in c.args)
            name = {"VTAUopLoopBegin": "loop_begin", "VTAUopLoopEnd": "loop_end", "VTAUopPush": "push"}.get(c.name)
            if name is None:
                raise CompileError(PASS, f"call {c.name} inside a uop kernel (only uop loops and pushes)")
            out.append(f"{pad}k.{name}({args})")
        else:
            raise CompileError(PASS, f"statement {ir.to_text(s).splitlines()[0]} inside a uop kernel")

    def uop_scope(self, s, out, ind):
        pad = "    " * ind
        site = s.extra if s.extra is not None else f"k{self.nk}"
        bound_inside = set()
        ir.walk(s.body, lambda n: bound_inside.add(n.var) if isinstance(n, ir.For) else None)
        free = [v for v in _ordered_vars(s.body) if v not in bound_inside]
        if len(free) > 1:
            raise CompileError(PASS, f"uop kernel {site} depends on {len(free)} outer variables "
                                     f"({', '.join(v.name for v in free)}); the runtime keys a kernel by at most one")
        name = f"_kernel{self.nk}"
        self.nk += 1
        params = ["k"] + [self.var(v) for v in free]
        lines = [f"def {name}({', '.join(params)}):"]
        self.kernel_stmt(s.body, lines, 1)
        lines.append("    return 0")
        self.kernels.extend(lines)
        method = {"VTAPushGEMMOp": "push_gemm_op", "VTAPushALUOp": "push_alu_op"}.get(s.value)
        if method is None:
            raise CompileError(PASS, f"uop scope {s.value!r} is neither VTAPushGEMMOp nor VTAPushALUOp")
        if free:
            fv = self.var(free[0])
            out.append(f"{pad}q.{method}(({site!r}, {fv}), lambda k, _v={fv}: {name}(k, _v))")
        else:
            out.append(f"{pad}q.{method}(({site!r}, None), {name})")

    def source(self) -> str:
        body = []
        self.stmt(self.func.body, body, 1)
        params = ", ".join(self.bufs.values())
        head = [f"def _program(q, {params}):" if params else "def _program(q):"]
        return "\n".join(self.kernels + head + body + ["    return None", ""])


def _ordered_vars(node):
    seen, out = set(), []

    def see(n):
        if isinstance(n, ir.Var) and n not in seen:
            seen.add(n)
            out.append(n)
    ir.walk(node, see)
    return out


def to_python(func) -> tuple:
    """``(source, [global Buffers in parameter order])`` of the program ``emit`` runs."""
    g = _Gen(func)
    src = g.source()
    return src, list(g.bufs)


def emit(func, queue, buffers: dict) -> None:
    """Make ``func``'s runtime calls on ``queue``.

    ``buffers`` maps each global ``ir.Buffer`` the program touches (or its name) to the
    :class:`vtasim.compiler.runtime.DramBuffer` the caller allocated on ``queue``.
    """
    src, order = to_python(func)
    args = []
    for b in order:
        if b in buffers:
            args.append(buffers[b])
        elif b.name in buffers:
            args.append(buffers[b.name])
        else:
            raise CompileError(PASS, f"no DRAM buffer given for `{b.name}`")
    namespace: dict = {}
    exec(compile(src, f"<vta program {getattr(func, 'name', '')}>", "exec"), namespace)  # noqa: S102 (our own source)
    namespace["_program"](queue, *args)
