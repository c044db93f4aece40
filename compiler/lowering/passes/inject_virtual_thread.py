"""InjectVirtualThread (TVM, spec 4.3.6) for ``cthread`` (no sharing between threads).

For each ``Attr("virtual_thread", t, body, extra=n)``:

* every SRAM allocation inside it (the merged ones storage_rewrite put at its head, and those an
  inner virtual thread already replicated) grows x n; each buffer view in it moves to ``n x`` its
  offset and thread ``t`` uses it at ``+ t x size`` (TVM replicates each buffer and then merges:
  the same layout);
* statements are replicated per thread at statement granularity: a ``coproc_scope`` or
  ``coproc_uop_scope`` region as a whole, every other store or call (dep push/pop) on its own,
  while loops around them stay shared.  A replicated statement without loops is unrolled (t = 0..n-1)
  when n < 16; one containing a loop becomes a serial loop ``t.s`` over the threads.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.lowering.passes._util import SRAM_SCOPES, BufferView, buffers_of, is_access_ptr, replace_buffers, rewrite_attrs

__all__ = ["inject_virtual_thread"]


def inject_virtual_thread(body, cfg=None):
    def inject(n):
        inner = inject_virtual_thread(n.body, cfg)              # nested threads first
        return _Injector(n.value, int(n.extra)).run(inner)
    return rewrite_attrs(body, "virtual_thread", inject)


def _has_loop(s) -> bool:
    found = []
    ir.walk(s, lambda n: found.append(1) if isinstance(n, ir.For) else None)
    return bool(found)


class _Injector:
    def __init__(self, var, n):
        self.var = var
        self.n = n
        self.stride = {}            # new view -> thread stride (scalars)

    def run(self, body):
        # every SRAM allocation inside the scope grows x n (nested threads' ones included: TVM
        # replicates whatever an inner virtual thread already replicated)
        groups = {}

        def see_alloc(x):
            if isinstance(x, ir.Allocate) and x.buffer.scope in SRAM_SCOPES:
                g = x.buffer
                groups[g] = ir.Buffer(g.name, (g.size * self.n,), g.dtype, g.scope)
        ir.walk(body, see_alloc)
        views = {}

        def see(x):
            for b in buffers_of(x):
                if isinstance(b, BufferView) and b.data in groups:
                    views[b] = None
        ir.walk(body, see)
        mapping = dict(groups)
        for v in views:
            # the view's shape gains the thread dimension, so an outer thread strides over all copies
            nv = BufferView(v.name, (self.n,) + v.shape, v.dtype, v.scope, v.elem_offset * self.n,
                            groups[v.data])
            mapping[v] = nv
            self.stride[nv] = v.size
        body = replace_buffers(body, mapping)
        return self.visit(body)

    def visit(self, s):
        if isinstance(s, ir.Attr):
            if s.key in ("coproc_scope", "coproc_uop_scope") or \
                    (isinstance(s.value, ir.Expr) and self.var in ir.free_vars(s.value)):
                return self.replicate(s)
            return ir.Attr(s.key, s.value, self.visit(s.body), s.extra)
        if isinstance(s, ir.For):
            return ir.For(s.var, s.extent, self.visit(s.body), s.kind)
        if isinstance(s, ir.Seq):
            return ir.seq(*[self.visit(c) for c in s.stmts])
        if isinstance(s, ir.Allocate):
            return ir.Allocate(s.buffer, self.visit(s.body))
        if isinstance(s, ir.IfThenElse):
            if self.var in ir.free_vars(s.cond):
                return self.replicate(s)
            return ir.IfThenElse(s.cond, self.visit(s.then),
                                 self.visit(s.otherwise) if s.otherwise is not None else None)
        return self.replicate(s)            # stores and calls: one copy per thread

    def offset_accesses(self, s, t):
        """Accesses to replicated buffers move to thread ``t``'s copy."""
        def post(n):
            if isinstance(n, ir.Load) and n.buffer in self.stride:
                return ir.Load(n.buffer, ir.simplify(n.index + t * self.stride[n.buffer]))
            if isinstance(n, ir.Store) and n.buffer in self.stride:
                return ir.Store(n.buffer, ir.simplify(n.index + t * self.stride[n.buffer]), n.value)
            if is_access_ptr(n) and n.args[0] in self.stride:
                return ir.Call(n.name, (n.args[0], ir.simplify(n.args[1] + t * self.stride[n.args[0]])),
                               n.dtype)
            return None
        return ir.transform(s, post)

    def replicate(self, s):
        if not _has_loop(s) and self.n < 16:
            return ir.seq(*[ir.simplify(ir.substitute(self.offset_accesses(s, ir.IntImm(t)),
                                                      {self.var: t}))
                            for t in range(self.n)])
        tv = ir.Var(self.var.name + ".s")
        body = ir.substitute(self.offset_accesses(s, tv), {self.var: tv})
        return ir.For(tv, self.n, ir.simplify(body))
