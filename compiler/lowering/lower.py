"""``lower``: a schedule -> the phase-0 loop IR of docs/compiler.md (TVM's ScheduleOps +
StorageFlatten, thin).

For every stage, in schedule order, a loop nest over its leaf axes; stages attached with
``compute_at`` are emitted at the top of their attach loop's body inside an ``Allocate`` of
their buffer, root stages at the top of the function.  The buffer of an attached stage is the
*region* one iteration of the attach loop needs (bounds inference, :mod:`compiler.bounds`
style, here in :func:`_bound`): each consumer's read indices, written in the loop variables,
are relaxed over every loop inside the attach point and kept symbolic for the loops around it;
the SRAM buffer has the region's shape and every access is flat and relative to its start.

Like TVM's ScheduleOps, a leaf axis of extent 1 gets no ``For`` (its variable is 0; a pragma on
it still wraps the place where the loop would be); ``keep_trivial_loops=True`` keeps them.
A reduction gets an init nest (fresh ``.init`` variables) before its first reduction loop.
``tensorize`` with the GEMM intrinsic turns the three innermost axes into
``vta.uop_push`` calls with ``tvm_access_ptr`` operands (reset for the init, update in the loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasim.compiler.lowering import ir
from vtasim.compiler.lowering.ir import (Allocate, Attr, BinOp, Buffer, Call, Cast, Evaluate, For, IntImm, Load,
                         Select, Var, simplify)
from vtasim.compiler.dsl.schedule import Schedule, Split, Stage
from vtasim.compiler.dsl.tensor import DSLError, IterVar, Reduce, Tensor, TensorRead, map_expr

__all__ = ["lower", "LoweredFunc", "LowerError"]


class LowerError(DSLError):
    """A schedule ``lower`` cannot turn into loops (names the stage, the axis and the rule)."""

    where = "lower"


@dataclass
class LoweredFunc:
    """The lowered function: global ``args`` buffers and the statement ``body``."""

    name: str
    args: list
    body: ir.Stmt

    def __str__(self):
        sig = ", ".join(f"{b.name}: {b.dtype}[{', '.join(map(str, b.shape))}]" for b in self.args)
        text = ir.to_text(self.body, 1) if self.body is not None else ""
        return f"// {self.name}({sig})\n{{\n{text}\n}}"


def lower(sch: Schedule, args, name: str = "main", keep_trivial_loops: bool = False) -> LoweredFunc:
    """Lower ``sch`` to the phase-0 IR; ``args`` are the placeholder and output tensors, in the
    order of the function's buffers."""
    return _Lowering(sch, list(args), keep_trivial_loops).run(name)


def _ename(st: Stage, iv) -> str:
    return f"`{st.name}.{iv.name}`"


class _Lowering:
    def __init__(self, sch: Schedule, args: list, keep_trivial: bool):
        self.sch = sch
        self.keep_trivial = keep_trivial
        self.arg_bufs: dict = {}                 # id(op) -> global Buffer
        self.args = []
        for t in args:
            if not isinstance(t, Tensor):
                raise LowerError(f"args: {t!r} is not a tensor")
            buf = Buffer(t.name, t.shape, t.dtype, ir.SCOPE_GLOBAL)
            self.arg_bufs[id(t.op)] = buf
            self.args.append(buf)
        self.stages = [st for st in sch.stages if not st.is_placeholder and st.attach_type != "inline"]
        for st in sch.stages:
            if st.is_output and id(st.origin_op) not in self.arg_bufs and id(st.op) not in self.arg_bufs:
                raise LowerError(f"output `{st.name}` is not in args")
        # memo tables
        self._dom, self._ext, self._path, self._rv, self._buf = {}, {}, {}, {}, {}
        self._busy: set = set()
        self._var_owner: dict = {}               # loop Var -> (stage, leaf)
        for st in self.stages:
            for leaf in st.leaf_iter_vars:
                self._var_owner[leaf] = (st, leaf)
                attrs = st.attrs.get(leaf)
                if attrs is not None and attrs.thread is not None:
                    self._var_owner[attrs.thread] = (st, leaf)
        self.bodies = self._inline_all()
        self.consumers: dict = {id(st): [] for st in self.stages}
        for st in self.stages:
            body = self.bodies[id(st)]
            for r in _reads(body):
                p = self._stage_of(r.tensor)
                if p is not None and not p.is_placeholder:
                    self.consumers[id(p)].append((st, r))

    def _stage_of(self, t: Tensor):
        return self.sch.stage_map.get(id(t.op))

    def _arg_buf_of(self, st: Stage):
        return self.arg_bufs.get(id(st.origin_op), self.arg_bufs.get(id(st.op)))

    # ---- inlining ------------------------------------------------------------------------
    def _inline_all(self) -> dict:
        done: dict = {}
        for st in self.sch.stages:
            if st.is_placeholder:
                continue
            def post(e):
                if isinstance(e, TensorRead):
                    p = self._stage_of(e.tensor)
                    if p is not None and p.attach_type == "inline":
                        sub = dict(zip(p.op.axis, e.indices))
                        return map_expr(done[id(p)], lambda v: sub.get(v) if isinstance(v, IterVar) else None)
                return None
            done[id(st)] = map_expr(st.body, post)
        return done

    # ---- attach structure ----------------------------------------------------------------
    def path(self, st: Stage) -> list:
        """The loops around ``st``'s nest, outermost first: ``[(stage, leaf), ...]``."""
        if id(st) in self._path:
            return self._path[id(st)]
        if st.attach_type == "root":
            p = []
        else:
            parent, ax = st.attach_stage, st.attach_ivar
            if parent.attach_type == "inline":
                raise LowerError(f"compute_at of `{st.name}` at {_ename(parent, ax)}: `{parent.name}` is inlined, it has no loops")
            if ax not in parent.leaf_iter_vars:
                raise LowerError(f"compute_at of `{st.name}` at {_ename(parent, ax)}: `{ax.name}` is no longer a leaf "
                                 f"axis of `{parent.name}` (it was split or fused after compute_at)")
            k = parent.leaf_iter_vars.index(ax)
            t = self._tensorize_index(parent)
            if k >= t:
                raise LowerError(f"compute_at of `{st.name}` at {_ename(parent, ax)}: the loop is inside the tensorized "
                                 f"region of `{parent.name}`")
            if id(st) in self._busy:
                raise LowerError(f"compute_at of `{st.name}`: the attachments form a cycle")
            self._busy.add(id(st))
            p = self.path(parent) + [(parent, leaf) for leaf in parent.leaf_iter_vars[:k + 1]]
            self._busy.discard(id(st))
        self._path[id(st)] = p
        return p

    @staticmethod
    def _tensorize_index(st: Stage) -> int:
        for i, leaf in enumerate(st.leaf_iter_vars):
            a = st.attrs.get(leaf)
            if a is not None and a.tensorize is not None:
                return i
        return len(st.leaf_iter_vars)

    # ---- domains and extents -------------------------------------------------------------
    def dom(self, st: Stage) -> dict:
        """Root axis -> (min Expr, extent int) of the region ``st`` computes at its attach point."""
        if id(st) in self._dom:
            return self._dom[id(st)]
        if id(st) in self._busy:
            raise LowerError(f"bounds of `{st.name}`: its region depends on itself (compute_at cycle)")
        self._busy.add(id(st))
        d = {iv: (IntImm(0), iv.extent) for iv in st.op.reduce_axis}
        if st.attach_type == "root":
            for iv in st.op.axis:
                d[iv] = (IntImm(0), iv.extent)
        else:
            d.update(self._infer_region(st))
        self._busy.discard(id(st))
        self._dom[id(st)] = d
        return d

    def _infer_region(self, st: Stage) -> dict:
        mine = self.path(st)
        kept = {self.leaf_value(s, leaf) for s, leaf in mine}
        where = _ename(st.attach_stage, st.attach_ivar)
        lo_hi = [None] * len(st.op.axis)
        users = self.consumers[id(st)]
        if not users:
            raise LowerError(f"compute_at of `{st.name}` at {where}: nothing reads `{st.name}`")
        for c, read in users:
            cpath = self.path(c) + [(c, leaf) for leaf in c.leaf_iter_vars]
            if len(cpath) < len(mine) or any(a[0] is not b[0] or a[1] is not b[1] for a, b in zip(mine, cpath)):
                at = "root" if c.attach_type == "root" else _ename(c.attach_stage, c.attach_ivar)
                raise LowerError(f"compute_at of `{st.name}` at {where}: its consumer `{c.name}` is not computed "
                                 f"inside that loop (it is attached at {at}); attach to a loop around every reader")
            rv = self.root_value(c)
            for d, ie in enumerate(read.indices):
                e = simplify(_subst(ie, rv))
                if _reads(e):
                    raise LowerError(f"bounds of `{st.name}`: index {d} of a read in `{c.name}` reads a tensor "
                                     f"(data-dependent indices are not supported)")
                lo, hi = self._bound(e, kept, st, c)
                if lo_hi[d] is None:
                    lo_hi[d] = (lo, hi)
                else:
                    lo_hi[d] = (self._pick(lo_hi[d][0], lo, min, st, d), self._pick(lo_hi[d][1], hi, max, st, d))
        out = {}
        for d, iv in enumerate(st.op.axis):
            lo, hi = lo_hi[d]
            ext = simplify(hi - lo + 1)
            if not isinstance(ext, IntImm):
                raise LowerError(f"bounds of `{st.name}` at {where}: dimension {d} ({iv.name}) spans "
                                 f"[{ir.to_text(lo)}, {ir.to_text(hi)}], not a constant extent")
            out[iv] = (lo, ext.value)
        return out

    @staticmethod
    def _pick(a, b, fn, st, d):
        diff = simplify(a - b)
        if not isinstance(diff, IntImm):
            raise LowerError(f"bounds of `{st.name}`: dimension {d} is read at offsets {ir.to_text(a)} and "
                             f"{ir.to_text(b)} whose difference is not constant")
        return a if fn(diff.value, 0) == diff.value else b

    def _bound(self, e, kept: set, st: Stage, c: Stage):
        """(lo, hi) of ``e`` over every loop variable not in ``kept`` (interval arithmetic)."""
        relaxed = {v for v in ir.free_vars(e) if v not in kept}
        if not relaxed:
            return e, e
        if isinstance(e, Var):
            owner = self._var_owner.get(e)
            if owner is None:
                raise LowerError(f"bounds of `{st.name}`: variable `{e.name}` in a read by `{c.name}` is not a loop")
            s, leaf = owner
            return IntImm(0), IntImm(self.leaf_ext(s)[leaf] - 1)
        if isinstance(e, BinOp):
            if e.op in ("+", "-"):
                alo, ahi = self._bound(e.a, kept, st, c)
                blo, bhi = self._bound(e.b, kept, st, c)
                if e.op == "+":
                    return simplify(alo + blo), simplify(ahi + bhi)
                return simplify(alo - bhi), simplify(ahi - blo)
            if e.op in ("*", "<<"):
                x, k = (e.a, e.b) if isinstance(e.b, IntImm) else (e.b, e.a)
                if isinstance(k, IntImm) and not (e.op == "<<" and x is e.b):
                    m = k.value if e.op == "*" else (1 << k.value)
                    lo, hi = self._bound(x, kept, st, c)
                    lo, hi = simplify(lo * m), simplify(hi * m)
                    return (lo, hi) if m >= 0 else (hi, lo)
            if e.op in ("//", ">>") and isinstance(e.b, IntImm) and e.b.value >= 0:
                m = e.b.value if e.op == "//" else (1 << e.b.value)
                if m > 0:
                    lo, hi = self._bound(e.a, kept, st, c)
                    return _floordiv(lo, m), _floordiv(hi, m)
            if e.op == "%" and isinstance(e.b, IntImm) and e.b.value > 0:
                m = e.b.value
                lo, hi = self._bound(e.a, kept, st, c)
                if isinstance(simplify(hi - lo), IntImm) and _floordiv(lo, m) == _floordiv(hi, m):
                    # the whole range sits in one period (a fused axis split at its inner extent)
                    return simplify(lo - _floordiv(lo, m) * m), simplify(hi - _floordiv(hi, m) * m)
                return IntImm(0), IntImm(m - 1)
            if e.op in ("min", "max"):
                alo, ahi = self._bound(e.a, kept, st, c)
                blo, bhi = self._bound(e.b, kept, st, c)
                f = ir.min_ if e.op == "min" else ir.max_
                return simplify(f(alo, blo)), simplify(f(ahi, bhi))
        if isinstance(e, Select):
            tlo, thi = self._bound(e.true_value, kept, st, c)
            flo, fhi = self._bound(e.false_value, kept, st, c)
            return simplify(ir.min_(tlo, flo)), simplify(ir.max_(thi, fhi))
        raise LowerError(f"bounds of `{st.name}`: cannot bound the index {ir.to_text(e)} read by `{c.name}` "
                         f"(indices must be affine in the loop variables)")

    def leaf_ext(self, st: Stage) -> dict:
        """Every iter var of ``st`` -> its extent (root axes from the region, then the relations)."""
        if id(st) in self._ext:
            return self._ext[id(st)]
        ext = {iv: e for iv, (_, e) in self.dom(st).items()}
        for rel in st.relations:
            if isinstance(rel, Split):
                n = ext[rel.parent]
                if rel.factor is not None:
                    if n % rel.factor:
                        raise LowerError(f"split of `{st.name}` at `{rel.parent.name}`: factor {rel.factor} does not "
                                         f"divide the extent {n} (VTA schedules need exact splits)")
                    ext[rel.outer], ext[rel.inner] = n // rel.factor, rel.factor
                else:
                    if n % rel.nparts:
                        raise LowerError(f"split of `{st.name}` at `{rel.parent.name}`: nparts {rel.nparts} does not "
                                         f"divide the extent {n} (VTA schedules need exact splits)")
                    ext[rel.outer], ext[rel.inner] = rel.nparts, n // rel.nparts
            else:
                ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
        self._ext[id(st)] = ext
        return ext

    def _thread(self, st: Stage, leaf):
        a = st.attrs.get(leaf)
        return a.thread if a is not None else None

    def leaf_value(self, st: Stage, leaf):
        """The expression a leaf axis stands for in the IR: its loop variable, the thread
        variable it is bound to, or 0 for an elided extent-1 loop."""
        th = self._thread(st, leaf)
        if th is not None:
            return th
        if not self.keep_trivial and self.leaf_ext(st)[leaf] == 1:
            return IntImm(0)
        return leaf

    def offsets(self, st: Stage, values: dict | None = None) -> dict:
        """Root axis -> its offset from the region start, from leaf values (``values``
        overrides some leaves, for the init nest)."""
        ext = self.leaf_ext(st)
        val = {leaf: self.leaf_value(st, leaf) for leaf in st.leaf_iter_vars}
        if values:
            val.update(values)
        for rel in reversed(st.relations):
            if isinstance(rel, Split):
                val[rel.parent] = val[rel.outer] * ext[rel.inner] + val[rel.inner]
            else:
                val[rel.outer] = val[rel.fused] // ext[rel.inner]
                val[rel.inner] = val[rel.fused] % ext[rel.inner]
        return {iv: simplify(val[iv]) for iv in tuple(st.op.axis) + tuple(st.op.reduce_axis)}

    def root_value(self, st: Stage, values: dict | None = None) -> dict:
        """Root axis -> its global value (region min + offset)."""
        if values is None and id(st) in self._rv:
            return self._rv[id(st)]
        dom = self.dom(st)
        off = self.offsets(st, values)
        rv = {iv: simplify(dom[iv][0] + off[iv]) for iv in off}
        if values is None:
            self._rv[id(st)] = rv
        return rv

    # ---- buffers and accesses ------------------------------------------------------------
    def buffer(self, st: Stage) -> Buffer:
        if id(st) in self._buf:
            return self._buf[id(st)]
        buf = self._arg_buf_of(st)
        if buf is not None:
            if st.attach_type != "root":
                raise LowerError(f"`{st.name}` is an argument of the function: it must be computed at root, "
                                 f"not with compute_at")
            if st.scope not in (None, ir.SCOPE_GLOBAL):
                raise LowerError(f"`{st.name}` is an argument of the function: it must stay in global scope, "
                                 f"not {st.scope}")
        else:
            dom = self.dom(st)
            shape = [dom[iv][1] for iv in st.op.axis]
            buf = Buffer(st.name, shape, st.op.dtype, st.scope or ir.SCOPE_GLOBAL)
        self._buf[id(st)] = buf
        return buf

    def needs_alloc(self, st: Stage) -> bool:
        return self._arg_buf_of(st) is None

    def _load(self, r: TensorRead) -> Load:
        p = self._stage_of(r.tensor)
        if p is None or p.is_placeholder:
            buf = self.arg_bufs.get(id(r.tensor.op))
            if buf is None:
                raise LowerError(f"placeholder `{r.tensor.name}` is read but not in args")
            return Load(buf, buf.flat_index(list(r.indices)))
        buf = self.buffer(p)
        dom = self.dom(p)
        rel = [i - dom[iv][0] for i, iv in zip(r.indices, p.op.axis)]
        return Load(buf, simplify(buf.flat_index(rel)))

    def to_ir(self, e, rv: dict):
        """A stage body (no reduction) in IR: root axes replaced, reads turned into loads."""
        def post(n):
            if isinstance(n, IterVar) and n in rv:
                return rv[n]
            if isinstance(n, TensorRead):
                return self._load(n)
            return None
        return map_expr(e, post)

    def store_index(self, st: Stage, off: dict):
        buf = self.buffer(st)
        return simplify(buf.flat_index([off[iv] for iv in st.op.axis]))

    # ---- emission ------------------------------------------------------------------------
    def run(self, name: str) -> LoweredFunc:
        self.attached: dict = {}
        roots = []
        for st in self.stages:
            self.path(st)
            if st.attach_type == "root":
                roots.append(st)
            else:
                self.attached.setdefault((id(st.attach_stage), st.attach_ivar), []).append(st)
        for st in self.stages:
            self.buffer(st)
        body = self.wrap_attached(roots, None)
        return LoweredFunc(name, self.args, body)

    def wrap_attached(self, stages: list, rest):
        for st in reversed(stages):
            rest = ir.seq(self.emit_stage(st), rest)
            if self.needs_alloc(st):
                rest = Allocate(self.buffer(st), rest)
        return rest

    def build_nest(self, st: Stage, leaves: list, inner):
        ext = self.leaf_ext(st)
        stmt = inner
        for leaf in reversed(leaves):
            body = stmt
            atts = self.attached.get((id(st), leaf))
            if atts:
                body = self.wrap_attached(atts, body)
            th = self._thread(st, leaf)
            if th is not None:
                stmt = Attr("virtual_thread", th, body, extra=ext[leaf])
            elif isinstance(self.leaf_value(st, leaf), IntImm):
                stmt = body
            else:
                stmt = For(leaf, ext[leaf], body)
            a = st.attrs.get(leaf)
            for pname, pvalue in reversed(a.pragmas if a is not None else []):
                stmt = Attr(f"pragma_{pname}", pvalue, stmt)
        return stmt

    def emit_stage(self, st: Stage):
        leaves = st.leaf_iter_vars
        t = self._tensorize_index(st)
        body = self.bodies[id(st)]
        buf = self.buffer(st)
        if not isinstance(body, Reduce):
            rv = self.root_value(st)
            inner = ir.Store(buf, self.store_index(st, self.offsets(st)), self.to_ir(body, rv))
            return self.build_nest(st, leaves[:t], inner)
        for leaf in leaves[t + 1:]:
            a = st.attrs.get(leaf)
            if a is not None and (a.pragmas or a.thread is not None):
                raise LowerError(f"tensorize of `{st.name}` at `{leaves[t].name}`: `{leaf.name}` is inside the "
                                 f"tensorized region, it cannot carry a pragma or a thread binding")
        c = next((i for i, leaf in enumerate(leaves[:t]) if leaf.iter_type == "reduce"), t)
        intrin = st.attrs[leaves[t]].tensorize if t < len(leaves) else None
        if intrin is not None:
            self._check_tensorize(st, t, intrin)
        # init: the data-parallel leaves after the common loops, with fresh variables
        ext = self.leaf_ext(st)
        init_leaves = [leaf for leaf in leaves[c:t] if leaf.iter_type != "reduce"]
        fresh = {}
        for leaf in init_leaves:
            fresh[leaf] = IntImm(0) if (ext[leaf] == 1 and not self.keep_trivial) else Var(f"{leaf.name}.init")
        over = dict(fresh)
        for leaf in leaves[c:]:
            if leaf.iter_type == "reduce":
                over[leaf] = IntImm(0)
        if intrin is not None:
            for leaf in leaves[t:]:
                over[leaf] = IntImm(0)
            init = self._uop(st, t, intrin, over, reset=True)
        else:
            init = ir.Store(buf, self.store_index(st, self.offsets(st, over)), IntImm(0, buf.dtype))
        for leaf in reversed(init_leaves):
            if isinstance(fresh[leaf], Var):
                init = For(fresh[leaf], ext[leaf], init)
        if intrin is not None:
            update = self._uop(st, t, intrin, {leaf: IntImm(0) for leaf in leaves[t:]}, reset=False)
        else:
            idx = self.store_index(st, self.offsets(st))
            src = self.to_ir(body.source, self.root_value(st))
            update = ir.Store(buf, idx, BinOp("+", Load(buf, idx), src))
        update = self.build_nest(st, leaves[c:t], update)
        return self.build_nest(st, leaves[:c], ir.seq(init, update))

    # ---- tensorize -----------------------------------------------------------------------
    def _gemm_operands(self, st: Stage, t: int, intrin):
        leaf = st.leaf_iter_vars[t]
        where = f"tensorize of `{st.name}` at `{leaf.name}`"
        body = self.bodies[id(st)]
        src = body.source
        if body.op != "sum" or not (isinstance(src, BinOp) and src.op == "*"):
            raise LowerError(f"{where}: the body must be sum(inp * wgt), the GEMM intrinsic's form")
        reads = []
        for f in (src.a, src.b):
            while isinstance(f, Cast):
                f = f.value
            if not isinstance(f, TensorRead):
                raise LowerError(f"{where}: an operand of the product is not a tensor read")
            reads.append(f)
        scopes = {}
        for r in reads:
            p = self._stage_of(r.tensor)
            scopes[(p.scope if p is not None and not p.is_placeholder else ir.SCOPE_GLOBAL)] = r
        if intrin.inp_scope not in scopes or intrin.wgt_scope not in scopes:
            got = ", ".join(f"`{r.tensor.name}` in {s}" for s, r in scopes.items())
            raise LowerError(f"{where}: the operands must be one {intrin.inp_scope} and one {intrin.wgt_scope} "
                             f"buffer, got {got}")
        if st.scope != intrin.acc_scope:
            raise LowerError(f"{where}: the result must be in {intrin.acc_scope}, `{st.name}` is in "
                             f"{st.scope or ir.SCOPE_GLOBAL}")
        return scopes[intrin.inp_scope], scopes[intrin.wgt_scope]

    def _check_tensorize(self, st: Stage, t: int, intrin):
        leaves = st.leaf_iter_vars[t:]
        ext = self.leaf_ext(st)
        where = f"tensorize of `{st.name}` at `{leaves[0].name}`"
        got = ", ".join(f"{leaf.name} {ext[leaf]}" for leaf in leaves)
        need = (intrin.batch, intrin.block_out, intrin.block_in)
        kinds = ("data_par", "data_par", "reduce")
        if tuple(ext[leaf] for leaf in leaves) != need or tuple(leaf.iter_type for leaf in leaves) != kinds:
            raise LowerError(f"{where}: the inner axes are ({got}), the intrinsic needs (BATCH {need[0]}, "
                             f"BLOCK_OUT {need[1]}, BLOCK_IN {need[2]}; the last one a reduction axis)")
        inp, wgt = self._gemm_operands(st, t, intrin)
        for r, dt, what in ((inp, intrin.inp_dtype, "input"), (wgt, intrin.wgt_dtype, "weight")):
            if r.tensor.dtype != dt:
                raise LowerError(f"{where}: the {what} `{r.tensor.name}` is {r.tensor.dtype}, the intrinsic needs {dt}")
        if st.op.dtype != intrin.acc_dtype:
            raise LowerError(f"{where}: the result is {st.op.dtype}, the intrinsic accumulates in {intrin.acc_dtype}")
        # each operand must be one whole element, laid out as the intrinsic reads it
        b, o, k = leaves
        want = {"out": {b: intrin.block_out, o: 1, k: 0},
                "inp": {b: intrin.block_in, o: 0, k: 1},
                "wgt": {b: 0, o: intrin.block_in, k: 1}}
        for role, idx in self._tensor_indices(st, inp, wgt, keep=leaves).items():
            vs = [leaf for leaf in leaves if leaf in ir.free_vars(idx) or ext[leaf] > 1]
            lin = ir.linear(idx, vs)
            if lin is None:
                raise LowerError(f"{where}: the {role} index {ir.to_text(idx)} is not linear in the tensor axes")
            for leaf, coef in zip(vs, lin[0]):
                if ext[leaf] > 1 and coef != want[role][leaf]:
                    raise LowerError(f"{where}: in the {role} operand, axis `{leaf.name}` has stride {coef}, the "
                                     f"intrinsic needs {want[role][leaf]} (the element must be contiguous, "
                                     f"(BATCH, BLOCK_IN) inputs, (BLOCK_OUT, BLOCK_IN) weights)")

    def _tensor_indices(self, st, inp, wgt, keep=(), values=None):
        """Flat relative indices of the output, input and weight accesses of a tensorized stage;
        the ``keep`` leaves stay variables, ``values`` overrides leaves."""
        vals = dict(values or {})
        for leaf in keep:
            vals[leaf] = leaf
        off = self.offsets(st, vals)
        rv = self.root_value(st, vals)
        return {"out": self.store_index(st, off),
                "inp": self.to_ir(inp, rv).index,
                "wgt": self.to_ir(wgt, rv).index}

    def _uop(self, st: Stage, t: int, intrin, values: dict, reset: bool):
        inp, wgt = self._gemm_operands(st, t, intrin)
        idx = self._tensor_indices(st, inp, wgt, values=values)
        where = f"tensorize of `{st.name}` at `{st.leaf_iter_vars[t].name}`"
        ptrs = {}
        for role, buf_of, lanes in (("out", self.buffer(st), intrin.acc_lanes),
                                    ("inp", self.buffer(self._stage_of(inp.tensor)), intrin.inp_lanes),
                                    ("wgt", self.buffer(self._stage_of(wgt.tensor)), intrin.wgt_lanes)):
            off = idx[role]
            lin = ir.linear(off, sorted(ir.free_vars(off), key=lambda v: v.name))
            if lin is not None and (any(cf % lanes for cf in lin[0]) or
                                    (isinstance(lin[1], IntImm) and lin[1].value % lanes)):
                raise LowerError(f"{where}: the {role} access {ir.to_text(off)} does not start on an element "
                                 f"boundary of {lanes} lanes")
            ptrs[role] = Call("tvm_access_ptr", (buf_of, off))
        z, one = IntImm(0), IntImm(1)
        if reset:
            args = (z, one, ptrs["out"], z, z, z, z, z)
        else:
            args = (z, z, ptrs["out"], ptrs["inp"], ptrs["wgt"], z, z, z)
        return Attr("coproc_scope", 2, Attr("coproc_uop_scope", "VTAPushGEMMOp",
                                            Evaluate(Call("vta.uop_push", args))))


def _floordiv(e, m: int):
    """``e // m`` simplified when every variable's coefficient is a multiple of ``m``
    (``(16*f + 15) // 16`` is ``f``), which ir.simplify leaves alone unless the division is exact."""
    vs = sorted(ir.free_vars(e), key=lambda v: v.name)
    lin = ir.linear(e, vs)
    if lin is not None and isinstance(lin[1], IntImm) and all(cf % m == 0 for cf in lin[0]):
        out = IntImm(lin[1].value // m)
        for v, cf in zip(vs, lin[0]):
            out = out + v * (cf // m)
        return simplify(out)
    return simplify(e // m)


def _subst(e, mapping: dict):
    return map_expr(e, lambda n: mapping.get(n) if isinstance(n, IterVar) and n in mapping else None)


def _reads(e) -> list:
    found = []
    map_expr(e, lambda n: found.append(n) if isinstance(n, TensorRead) else None)
    return found

