"""Schedules: how each tensor of a compute graph becomes loops (TVM's ``te.Schedule``, thin).

``create_schedule(out.op)`` makes one :class:`Stage` per op; ``s[T]`` is the stage of tensor
``T``.  A stage keeps the leaf axes (the loops it will have, outermost first), the split/fuse
relations from its op's axes to them, where it is computed (root, inline, or ``compute_at`` a
loop of another stage), its storage scope and per-axis annotations (pragma, tensorize, bind).
Nothing is lowered here: extents of split axes and the regions of attached stages are worked out
by :func:`vtasim.compiler.lowering.lower.lower`.

Primitives check what they can at once and raise :class:`ScheduleError` naming the stage, the
axis and the rule; what depends on inferred bounds (a tensorize whose axes do not match the
intrinsic, a split factor that does not divide) is checked by ``lower``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vtasim.compiler.lowering import ir
from vtasim.compiler.dsl.tensor import (ComputeOp, DSLError, IterVar, PlaceholderOp, Reduce, Tensor, TensorRead,
                         compute, map_expr)

__all__ = ["Schedule", "Stage", "Split", "Fuse", "ScheduleError", "create_schedule", "thread_axis"]

from vtasim.compiler.dsl.tensor import thread_axis  # noqa: E402  (re-exported: schedules bind to thread axes)

_SCOPES = (ir.SCOPE_GLOBAL, ir.SCOPE_INP, ir.SCOPE_WGT, ir.SCOPE_ACC)


class ScheduleError(DSLError):
    """A schedule primitive used against its rule."""

    where = "schedule"


@dataclass(eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass(eq=False)
class AxisAttrs:
    pragmas: list = field(default_factory=list)      # (name, value)
    tensorize: object = None                         # the intrinsic
    thread: IterVar | None = None                    # bound thread axis


class Stage:
    """One op's loops.  ``op`` is the op this stage computes (a schedule-made copy op after
    ``cache_write``); ``body`` is the expression lowered for it (cache_read/compute_inline
    rewrite it; the op given by the user is never changed)."""

    def __init__(self, op, schedule: "Schedule"):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.is_placeholder = isinstance(op, PlaceholderOp)
        self.body = None if self.is_placeholder else op.body
        axes = () if self.is_placeholder else tuple(op.axis) + tuple(op.reduce_axis)
        self.all_iter_vars: list = list(axes)
        self.leaf_iter_vars: list = list(axes)
        self.relations: list = []
        self.attach_type = "root"                        # root | inline | scope
        self.attach_stage: "Stage | None" = None
        self.attach_ivar: IterVar | None = None
        self.scope: str | None = None
        self.attrs: dict = {}                            # IterVar -> AxisAttrs
        self.is_output = False

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self):
        return f"stage({self.name})"

    # -- checks ------------------------------------------------------------------------------
    def _need_compute(self, what: str):
        if self.is_placeholder:
            raise ScheduleError(f"{what} of `{self.name}`: it is a placeholder (an input), it has no loops")

    def _leaf(self, axis, what: str) -> IterVar:
        self._need_compute(what)
        if not isinstance(axis, IterVar):
            raise ScheduleError(f"{what} of `{self.name}`: {axis!r} is not an axis")
        if axis not in self.leaf_iter_vars:
            leaves = ", ".join(v.name for v in self.leaf_iter_vars)
            if axis in self.all_iter_vars:
                raise ScheduleError(f"{what} of `{self.name}`: axis `{axis.name}` was already split or fused "
                                    f"(leaf axes: {leaves})")
            raise ScheduleError(f"{what} of `{self.name}`: axis `{axis.name}` is not an axis of `{self.name}` "
                                f"(leaf axes: {leaves})")
        return axis

    def _attrs(self, iv) -> AxisAttrs:
        return self.attrs.setdefault(iv, AxisAttrs())

    # -- loop structure ----------------------------------------------------------------------
    def split(self, parent, factor=None, nparts=None):
        """Split ``parent`` into ``(outer, inner)``: ``inner`` has ``factor`` iterations, or
        ``outer`` has ``nparts``.  Returns ``(outer, inner)``."""
        parent = self._leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split of `{self.name}` at `{parent.name}`: give exactly one of factor and nparts")
        n = factor if factor is not None else nparts
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ScheduleError(f"split of `{self.name}` at `{parent.name}`: the factor must be a positive integer, got {n!r}")
        outer = IterVar(f"{parent.name}.outer", None, parent.iter_type)
        inner = IterVar(f"{parent.name}.inner", None, parent.iter_type)
        self.relations.append(Split(parent, outer, inner, factor, nparts))
        k = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[k:k + 1] = [outer, inner]
        self.all_iter_vars += [outer, inner]
        return outer, inner

    def tile(self, x_parent, y_parent, x_factor, y_factor):
        """Split both axes and order them ``(x.outer, y.outer, x.inner, y.inner)``."""
        xo, xi = self.split(x_parent, x_factor)
        yo, yi = self.split(y_parent, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, outer, inner):
        """Fuse two adjacent leaf axes (``outer`` directly before ``inner``) into one."""
        outer = self._leaf(outer, "fuse")
        inner = self._leaf(inner, "fuse")
        k = self.leaf_iter_vars.index(outer)
        if self.leaf_iter_vars.index(inner) != k + 1:
            raise ScheduleError(f"fuse of `{self.name}`: `{outer.name}` and `{inner.name}` must be adjacent "
                                f"leaf axes, outer first")
        if outer.iter_type != inner.iter_type:
            raise ScheduleError(f"fuse of `{self.name}`: `{outer.name}` is {outer.iter_type}, `{inner.name}` is "
                                f"{inner.iter_type}; only axes of one kind fuse")
        fused = IterVar(f"{outer.name}.{inner.name}.fused", None, outer.iter_type)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf_iter_vars[k:k + 2] = [fused]
        self.all_iter_vars.append(fused)
        return fused

    def reorder(self, *axes):
        """Put the given leaf axes in this order, in the positions they occupy now."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        axes = [self._leaf(a, "reorder") for a in axes]
        if len(set(axes)) != len(axes):
            raise ScheduleError(f"reorder of `{self.name}`: an axis is given twice "
                                f"({', '.join(a.name for a in axes)})")
        pos = sorted(self.leaf_iter_vars.index(a) for a in axes)
        for p, a in zip(pos, axes):
            self.leaf_iter_vars[p] = a

    # -- placement ---------------------------------------------------------------------------
    def compute_at(self, parent: "Stage", axis):
        """Compute this stage inside loop ``axis`` of stage ``parent`` (the region one iteration
        of that loop needs; ``lower`` infers it)."""
        self._need_compute("compute_at")
        if not isinstance(parent, Stage):
            raise ScheduleError(f"compute_at of `{self.name}`: the target must be a stage (s[T]), got {parent!r}")
        if parent is self:
            raise ScheduleError(f"compute_at of `{self.name}`: a stage cannot be computed inside its own loop")
        if parent.is_placeholder:
            raise ScheduleError(f"compute_at of `{self.name}`: `{parent.name}` is a placeholder, it has no loops")
        if not isinstance(axis, IterVar) or axis not in parent.all_iter_vars:
            name = getattr(axis, "name", repr(axis))
            raise ScheduleError(f"compute_at of `{self.name}`: `{name}` is not an axis of `{parent.name}`")
        self.attach_type, self.attach_stage, self.attach_ivar = "scope", parent, axis

    def compute_root(self):
        self._need_compute("compute_root")
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None

    def compute_inline(self):
        """Substitute this stage's body into every reader (it gets no loops and no buffer)."""
        self._need_compute("compute_inline")
        if isinstance(self.body, Reduce):
            raise ScheduleError(f"compute_inline of `{self.name}`: a reduction cannot be inlined")
        if self.is_output:
            raise ScheduleError(f"compute_inline of `{self.name}`: it is an output of the schedule")
        self.attach_type, self.attach_stage, self.attach_ivar = "inline", None, None

    def set_scope(self, scope: str):
        self._need_compute("set_scope")
        if scope not in _SCOPES:
            raise ScheduleError(f"set_scope of `{self.name}`: unknown scope {scope!r} (known: {', '.join(_SCOPES)})")
        self.scope = scope

    # -- annotations -------------------------------------------------------------------------
    def pragma(self, axis, name: str, value=1):
        """Annotate the loop of ``axis`` (``dma_copy``, ``alu``...): the whole nest under it
        becomes one pass-recognised region ``Attr("pragma_<name>", value, ...)``."""
        axis = self._leaf(axis, "pragma")
        if not isinstance(name, str) or not name:
            raise ScheduleError(f"pragma of `{self.name}` at `{axis.name}`: the pragma name must be a string")
        self._attrs(axis).pragmas.append((name, value))

    def tensorize(self, axis, intrin):
        """Replace the loops from ``axis`` inward by ``intrin`` (the GEMM intrinsic)."""
        axis = self._leaf(axis, "tensorize")
        k = self.leaf_iter_vars.index(axis)
        inner = self.leaf_iter_vars[k:]
        if len(inner) != 3:
            raise ScheduleError(f"tensorize of `{self.name}` at `{axis.name}`: {len(inner)} axes from `{axis.name}` "
                                f"inward ({', '.join(v.name for v in inner)}), the intrinsic needs 3 "
                                f"(BATCH, BLOCK_OUT, BLOCK_IN)")
        if not isinstance(self.body, Reduce):
            raise ScheduleError(f"tensorize of `{self.name}` at `{axis.name}`: the stage is not a reduction, "
                                f"the GEMM intrinsic is sum_k inp[i, k] * wgt[j, k]")
        for a in self.attrs.values():
            if a.tensorize is not None:
                raise ScheduleError(f"tensorize of `{self.name}`: the stage is already tensorized")
        self._attrs(axis).tensorize = intrin

    def bind(self, axis, thread: IterVar):
        """Bind a leaf axis to a thread axis; ``cthread`` makes it a virtual thread."""
        axis = self._leaf(axis, "bind")
        if not isinstance(thread, IterVar) or thread.iter_type != "thread":
            raise ScheduleError(f"bind of `{self.name}` at `{axis.name}`: bind to thread_axis(\"cthread\")")
        if thread.thread_tag != "cthread":
            raise ScheduleError(f"bind of `{self.name}` at `{axis.name}`: thread tag {thread.thread_tag!r}; "
                                f"VTA lowers only virtual threads (\"cthread\")")
        if axis.iter_type == "reduce":
            raise ScheduleError(f"bind of `{self.name}` at `{axis.name}`: a reduction axis cannot be a thread")
        for other, a in self.attrs.items():
            if a.thread is thread and other is not axis:
                raise ScheduleError(f"bind of `{self.name}` at `{axis.name}`: the thread axis is already bound to "
                                    f"`{other.name}`; make one thread_axis per bound loop")
        self._attrs(axis).thread = thread


class Schedule:
    """The stages of a compute graph, inputs first (TVM's post-DFS order)."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.stages: list[Stage] = []
        self.stage_map: dict = {}                       # id(op) -> Stage (user ops and made ops)
        for op in _post_dfs(outputs):
            st = Stage(op, self)
            st.is_output = any(op is o for o in outputs)
            self.stages.append(st)
            self.stage_map[id(op)] = st

    def __getitem__(self, t) -> Stage:
        op = t.op if isinstance(t, Tensor) else t
        st = self.stage_map.get(id(op))
        if st is None:
            raise ScheduleError(f"`{getattr(op, 'name', op)}` is not part of this schedule")
        return st

    def stage_of(self, t: Tensor) -> Stage:
        return self[t]

    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """A copy of ``tensor`` in ``scope`` (``<name>.<scope>``) that ``readers`` read instead."""
        src = self[tensor]
        readers = [readers] if not isinstance(readers, (list, tuple)) else list(readers)
        reader_stages = [self[r] for r in readers]
        cache = compute(tensor.shape, lambda *i: tensor(*i), f"{tensor.name}.{scope}")
        for rs in reader_stages:
            if rs.is_placeholder:
                raise ScheduleError(f"cache_read of `{tensor.name}`: reader `{rs.name}` is a placeholder")
            before = rs.body
            rs.body = _replace_reads(rs.body, tensor, cache)
            if rs.body is before:
                raise ScheduleError(f"cache_read of `{tensor.name}`: `{rs.name}` does not read it")
        st = Stage(cache.op, self)
        st.scope = scope
        self.stages.insert(self.stages.index(src) + 1, st)
        self.stage_map[id(cache.op)] = st
        return cache

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a new ``<name>.<scope>`` stage; its own stage becomes a copy
        out of it (and loses its splits: schedule it afterwards)."""
        st = self[tensor]
        st._need_compute("cache_write")
        op = st.op
        sub = {iv: IterVar(iv.name, iv.extent, iv.iter_type) for iv in tuple(op.axis) + tuple(op.reduce_axis)}
        def rename(e):
            if isinstance(e, IterVar) and e in sub:
                return sub[e]
            return None
        body = map_expr(st.body, rename)
        if isinstance(body, Reduce):
            body = Reduce(body.op, body.source, tuple(sub[a] for a in body.axes))
        cache_op = ComputeOp(f"{tensor.name}.{scope}", [sub[a] for a in op.axis], body)
        cache = cache_op.output(0)
        cst = Stage(cache_op, self)
        cst.scope = scope
        # the original stage now copies the cache: a new op over the same axes
        copy_op = ComputeOp(op.name, op.axis, TensorRead(cache, tuple(op.axis)), op.tag)
        st.op = copy_op
        st.body = copy_op.body
        st.all_iter_vars = list(op.axis)
        st.leaf_iter_vars = list(op.axis)
        st.relations, st.attrs = [], {}
        self.stages.insert(self.stages.index(st), cst)
        self.stage_map[id(cache_op)] = cst
        self.stage_map[id(copy_op)] = st
        return cache


def _replace_reads(body, old: Tensor, new: Tensor):
    changed = []
    def post(e):
        if isinstance(e, TensorRead) and e.tensor is old:
            changed.append(e)
            return TensorRead(new, e.indices)
        return None
    out = map_expr(body, post)
    return out if changed else body


def _post_dfs(outputs) -> list:
    order, seen = [], set()
    def visit(op):
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)
    for o in outputs:
        visit(o)
    return order


def create_schedule(ops) -> Schedule:
    """A schedule for the output op(s) (tensors are accepted too)."""
    ops = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    ops = [o.op if isinstance(o, Tensor) else o for o in ops]
    for o in ops:
        if not isinstance(o, (ComputeOp, PlaceholderOp)):
            raise ScheduleError(f"create_schedule: {o!r} is not an op or a tensor")
    return Schedule(ops)
