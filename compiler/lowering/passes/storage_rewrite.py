"""StorageRewrite (TVM, spec 4.3.5): one allocation per SRAM scope, in-place ALU stages, size check.

* **Attach points.**  Serial loops are not storage scopes in TVM, so every SRAM allocation moves to
  the function head, or to the head of the ``virtual_thread`` attribute it sits in (those
  allocations are replicated per thread later).
* **In-place reuse.**  An ALU stage ``D[i] = op(S[i], ...)`` whose operand ``S`` (same scope, same
  size, the very same index) dies at that stage and whose result ``D`` is born there stores ``D``
  over ``S``: consecutive ALU stages run in place, as inject_alu requires.  Liveness is measured at
  the allocation's original place: an access inside a loop below the allocation lives for that
  whole loop.
* **Merging.**  The allocations of one scope at one attach point become one allocation
  (``acc_buffer``, ``inp_buffer``, ...); each original buffer becomes a :class:`BufferView` of it at
  an element-aligned ``elem_offset``, in order of first allocation.
* **Size.**  Per scope, the merged sizes (x the thread count inside a virtual thread) must fit the
  SRAM of the config, else "allocation of N elements exceeds local.acc_buffer's D elements".
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.passes._util import (SRAM_SCOPES, BufferView, buffers_of, fresh, replace_buffers, scope_depth,
                                   scope_lanes, short_scope)

__all__ = ["storage_rewrite"]

PASS = "storage_rewrite"


class _Walker:
    """Pre-order walk numbering access points and recording allocations and loops."""

    def __init__(self):
        self.point = 0
        self.allocs = []            # (buffer, attach id, loop depth, attach extent)
        self.access = {}            # buffer -> [(point, loop stack tuple)]
        self.loop_span = {}         # id(For) -> [first point, last point]
        self.alu_points = []        # (point, Store) of pragma_alu regions
        self.attach_nthreads = {}   # attach id -> threads

    def run(self, body):
        self.visit(body, (), None)

    def visit(self, s, loops, attach):
        if isinstance(s, ir.Allocate):
            if s.buffer.scope in SRAM_SCOPES:
                self.allocs.append((s.buffer, attach, len(loops)))
            self.visit(s.body, loops, attach)
        elif isinstance(s, ir.For):
            self.loop_span[id(s)] = [self.point, self.point]
            self.visit(s.body, loops + (id(s),), attach)
            self.loop_span[id(s)][1] = self.point - 1
        elif isinstance(s, ir.Attr) and s.key == "virtual_thread":
            # nested virtual threads multiply: the outer one replicates the inner's copies too
            self.attach_nthreads[id(s)] = int(s.extra) * self.attach_nthreads.get(attach, 1)
            self.visit(s.body, loops, id(s))
        elif isinstance(s, ir.Attr) and s.key in ("coproc_uop_scope", "pragma_alu"):
            self.leaf(s, loops)
            if s.key == "pragma_alu" or isinstance(s.body, ir.Attr) and s.body.key == "pragma_alu":
                inner = s if s.key == "pragma_alu" else s.body
                st = inner.body
                while isinstance(st, ir.For):
                    st = st.body
                if isinstance(st, ir.Store):
                    self.alu_points.append((self.point - 1, st))
        elif isinstance(s, (ir.Attr,)):
            self.visit(s.body, loops, attach)
        elif isinstance(s, ir.Seq):
            for c in s.stmts:
                self.visit(c, loops, attach)
        elif isinstance(s, ir.IfThenElse):
            self.leaf(s.cond, loops)
            self.visit(s.then, loops, attach)
            if s.otherwise is not None:
                self.visit(s.otherwise, loops, attach)
        else:
            self.leaf(s, loops)

    def leaf(self, node, loops):
        p = self.point
        self.point += 1

        def see(n):
            for b in buffers_of(n):
                self.access.setdefault(b, []).append((p, loops))
        ir.walk(node, see)


def _intervals(w: _Walker):
    """Live interval ``[first, last]`` of each SRAM allocation."""
    out = {}
    for buf, _attach, depth in w.allocs:
        lo, hi = None, None
        for p, loops in w.access.get(buf, ()):
            a, b = p, p
            if len(loops) > depth:          # inside a loop below the allocation: the whole loop
                a, b = w.loop_span[loops[depth]]
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        out[buf] = (lo, hi)
    return out


def _loads(e) -> list:
    out = []
    ir.walk(e, lambda n: out.append(n) if isinstance(n, ir.Load) else None)
    return out


def _find(parent, b):
    while parent.get(b, b) is not b:
        b = parent[b]
    return b


def storage_rewrite(body, cfg):
    body = fresh(body)
    w = _Walker()
    w.run(body)
    if not w.allocs:
        return body
    live = _intervals(w)
    allocated = {b for b, _, _ in w.allocs}

    # in-place: D takes over S's storage where S dies and D is born at the same ALU stage
    parent = {}
    taken = set()
    for p, st in w.alu_points:
        d = st.buffer
        if d not in allocated or live[d][0] != p:
            continue
        for ld in _loads(st.value):
            s = ld.buffer
            if (s is not d and s in allocated and s.scope == d.scope and s.size == d.size
                    and live[s][1] == p and s not in taken
                    and ir.simplify(ld.index) == ir.simplify(st.index)):
                parent[d] = _find(parent, s)
                taken.add(s)                # S has one successor; chains S -> D -> E are fine
                break

    # merge per (attach point, scope), entries in order of allocation
    groups = {}                                 # (attach, scope) -> [roots]
    members = {}                                # root -> [buffers]
    for buf, attach, _ in w.allocs:
        root = _find(parent, buf)
        members.setdefault(root, []).append(buf)
        entries = groups.setdefault((attach, buf.scope), [])
        if root not in entries:
            entries.append(root)

    mapping, group_bufs, totals = {}, {}, {}
    count = {}
    for (attach, scope), roots in groups.items():
        lanes = scope_lanes(cfg, scope)
        k = count.get(scope, 0)
        count[scope] = k + 1
        name = short_scope(scope) + (f"_{k}" if k else "")
        offsets, off = {}, 0
        for r in roots:
            offsets[r] = off
            size = max(b.size for b in members[r])
            off += -(-size // lanes) * lanes
        group = ir.Buffer(name, (off,), roots[0].dtype, scope)
        group_bufs.setdefault(attach, []).append(group)
        nthreads = w.attach_nthreads.get(attach, 1)
        totals.setdefault(scope, []).append((group, nthreads, roots, members))
        for r in roots:
            for b in members[r]:
                mapping[b] = BufferView(b.name, b.shape, b.dtype, scope, offsets[r], group)

    for scope, lst in totals.items():
        lanes = scope_lanes(cfg, scope)
        need = sum(g.size * n for g, n, _, _ in lst) // lanes
        depth = scope_depth(cfg, scope)
        if need > depth:
            parts = []
            for _g, n, roots, mem in lst:
                for r in roots:
                    names = "/".join(b.name for b in mem[r])
                    size = -(-max(b.size for b in mem[r]) // lanes)
                    parts.append(f"`{names}` {size}" + (f" x {n} threads" if n > 1 else ""))
            raise CompileError(PASS, f"allocation of {need} elements exceeds {scope}'s {depth} "
                                     f"elements ({', '.join(parts)})")

    def pre(n):
        if isinstance(n, ir.Allocate) and n.buffer.scope in SRAM_SCOPES:
            return ir.transform(n.body, lambda x: None, pre)
        if isinstance(n, ir.Attr) and n.key == "virtual_thread" and id(n) in group_bufs:
            inner = ir.transform(n.body, lambda x: None, pre)
            for g in reversed(group_bufs[id(n)]):
                inner = ir.Allocate(g, inner)
            return ir.Attr(n.key, n.value, inner, n.extra)
        return None
    out = ir.transform(body, lambda x: None, pre)
    for g in reversed(group_bufs.get(None, [])):
        out = ir.Allocate(g, out)
    return replace_buffers(out, mapping)
