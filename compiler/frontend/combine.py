"""CombineParallelConv2D and CombineParallelDense (Relay's names): sibling layers over one input become
one wider VTA layer.

An inception block's 1x1 branches, or a transformer's Q/K/V projections, are convolutions / dense
layers that read the same tensor.  On VTA each is a region of its own, padding its output channels
to the block and loading the input again; combined, the input is loaded once and the output
channels pack together.  The passes run on the composite ``qconv``/``qdense`` nodes after
:func:`~vtasim.compiler.frontend.fuse.fuse_ops`, where the quantisation parameters are known.

Siblings combine when they read the same quantised tensor (for ``qdense``: or ``Reshape``s of one
tensor to one shape, as the 3-d MatMul fusion makes) with the same input quantisation, weight shape
but for the output channels, strides and pads, no dilation, one group, int8 symmetric weights (VTA
layers) and the same output type.  The combined layer

* concatenates the weights on the output-channel axis, and the int32 biases (0 for a branch without);
* keeps each branch's requantisation per output channel: ``w_scale`` becomes the per-channel vector
  of the branches' weight scales and, where the branches differ, ``y_scale``, ``y_zp`` and the
  output range (``limits``) per-channel vectors of theirs, so each channel's multiplier
  ``x_scale * w_scale / y_scale`` is the same float64 number as in its branch;
* is followed by a host ``Split`` on the channel axis that gives back the branches' output values.

Its outputs are bit-identical to the branches' (docs/quantisation.md section 5): either every
branch's plan (:func:`vtasim.compiler.qnn.plan_requant`) and the combined layer's is exact
(``max_error_lsb == 0``) and the branches share zero point and range, or the combined layer carries
:func:`merged_plan` of the branches' own plans (``attrs["requant_plan"]``), which gives each
channel its branch's steps.  Branches whose plans cannot merge stay alone; the note says what was
combined and why a sibling was not.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.composite import out_limits
from vtasim.compiler.frontend.graph import Graph, Node
from vtasim.compiler.frontend.region import VtaRegion, region_problem

__all__ = ["combine_parallel_conv2d", "combine_parallel_dense", "merged_plan"]


def _source(g: Graph, prod: dict, v: str):
    """What a layer reads: the value, or (for a ``Reshape`` by a constant shape) the reshaped value and the
    shape, so that two dense layers reading equal reshapes of one tensor are siblings."""
    p = prod.get(v)
    if p is not None and p.op == "Reshape" and len(p.inputs) > 1 and p.inputs[1] in g.consts:
        return ("reshape", p.inputs[0], tuple(int(d) for d in g.consts[p.inputs[1]].reshape(-1)))
    return v


def _scalar_key(v):
    return tuple(np.asarray(v, np.float64).reshape(-1).tolist())


def _key(g: Graph, prod: dict, n: Node):
    a = n.attrs
    geometry = (a["weight"].shape[1:],)
    if n.op == "qconv":
        geometry += (tuple(a["strides"]), tuple(a["pads"]), tuple(a["dilations"]), int(a["group"]))
    return (n.op, _source(g, prod, n.inputs[0]), geometry, _scalar_key(a["x_scale"]), int(a["x_zp"]),
            np.dtype(a["x_dtype"]).str, np.dtype(a["y_dtype"]).str)


def _eligible(n: Node) -> bool:
    a = n.attrs
    if region_problem(n) is not None or np.ndim(a["y_scale"]) or np.ndim(a["y_zp"]):
        return False
    return n.op == "qdense" or (int(a["group"]) == 1 and list(a["dilations"]) == [1, 1])


def _per_channel(v, o: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(v, np.float64), (o,)).astype(np.float64)


def _combined(branches: list, name: str) -> Node:
    first = branches[0].attrs
    ws = [b.attrs["weight"] for b in branches]
    sizes = [w.shape[0] for w in ws]
    biases = [b.attrs["bias"] if b.attrs["bias"] is not None else np.zeros(o, np.int32)
              for b, o in zip(branches, sizes)]
    attrs = dict(first)
    attrs.update(weight=np.ascontiguousarray(np.concatenate(ws, axis=0)),
                 bias=None if all(b.attrs["bias"] is None for b in branches) else np.concatenate(biases).astype(np.int32),
                 w_scale=np.concatenate([_per_channel(b.attrs["w_scale"], o) for b, o in zip(branches, sizes)]),
                 w_zp=0, combined=[b.name for b in branches])
    for what, values in (("y_scale", [float(b.attrs["y_scale"]) for b in branches]),
                         ("y_zp", [int(b.attrs["y_zp"]) for b in branches])):
        attrs[what] = values[0] if len(set(values)) == 1 else \
            np.concatenate([np.full(o, v) for v, o in zip(values, sizes)])
    limits = [out_limits(b.attrs) for b in branches]
    attrs["limits"] = limits[0] if len(set(limits)) == 1 else \
        tuple(np.concatenate([np.full(o, lim[k], np.int64) for lim, o in zip(limits, sizes)]) for k in (0, 1))
    attrs.pop("layout", None)
    where = f"{branches[0].where} + {len(branches) - 1} parallel sibling(s)"
    return Node(branches[0].op, [branches[0].inputs[0]], [name], attrs, name, where)


def _plans(nodes: list, cfg, requant: str):
    """[plan] of each node on VTA, or the reason one cannot run there."""
    from vtasim.compiler.errors import CompileError
    out = []
    for n in nodes:
        try:
            out.append(VtaRegion(n, cfg, path=requant).check(n.attrs["x_dtype"])[1])
        except CompileError as e:
            return f"{n.name}: {e}"
    return out


_FILL = {"add": 0, "mul": 1, "min": (1 << 31) - 1, "max": -(1 << 31)}     # each step kind's identity


def _segments(plan):
    """The plan's steps cut at its shifts: ([[(kind, operand)] between shifts], [shift steps])."""
    segs, shifts, cur = [], [], []
    for kind, operand in plan.steps:
        if kind in ("shr", "shl"):
            segs.append(cur)
            shifts.append((kind, operand))
            cur = []
        else:
            cur.append((kind, operand))
    return segs + [cur], shifts


def _operand(plan, operand, o: int) -> np.ndarray:
    return np.asarray(plan.vectors[operand] if isinstance(operand, str) else np.full(o, operand), np.int64)


def merged_plan(plans: list, sizes: list):
    """One per-channel plan whose steps give, on each branch's channels, exactly that branch's plan's
    outputs, or None.  The branches' plans must shift alike (the same shifts in the same places: VTA's
    ALU shifts by immediates); their add/mul/min/max operands become per-channel vectors (or stay
    immediates where equal), and a step one branch lacks is that step's identity on its channels."""
    from vtasim.compiler.qnn.vta_requant import RequantPlan
    cut = [_segments(p) for p in plans]
    if any(c[1] != cut[0][1] for c in cut):
        return None
    steps, vectors = [], {}
    for k in range(len(cut[0][0])):
        segs = [c[0][k] for c in cut]
        kinds = max((tuple(op for op, _ in seg) for seg in segs), key=len)
        if any(seg and tuple(op for op, _ in seg) != kinds for seg in segs):
            return None
        for j, kind in enumerate(kinds):
            vals = np.concatenate([_operand(p, seg[j][1], o) if seg else np.full(o, _FILL[kind], np.int64)
                                   for p, seg, o in zip(plans, segs, sizes)])
            if np.all(vals == vals[0]) and not any(seg and isinstance(seg[j][1], str) for seg in segs):
                steps.append((kind, int(vals[0])))
            else:
                name = f"combined_{len(vectors)}"
                vectors[name] = vals.astype(np.int32)
                steps.append((kind, name))
        if k < len(cut[0][1]):
            steps.append(cut[0][1][k])
    per = [lambda v, p=p, o=o: np.broadcast_to(np.asarray(v), (o,)) for p, o in zip(plans, sizes)]
    first = plans[0]
    return RequantPlan("fixed" if vectors else first.path,
                       np.concatenate([f(p.multiplier) for f, p in zip(per, plans)]).astype(np.float64),
                       max(p.acc_bound for p in plans), first.out_zp, first.out_lo, first.out_hi, steps, vectors,
                       max(p.max_error_lsb for p in plans), max(p.error_bound for p in plans), None,
                       np.concatenate([f(p.sig) for f, p in zip(per, plans)]),
                       np.concatenate([f(p.shift) for f, p in zip(per, plans)]),
                       all(p.enumerated for p in plans))


def _cycles(g: Graph, nodes: list, cfg, requant: str):
    """Cycle-engine cycles of ``nodes`` as VTA regions on a zero input of their input's shape (the cost
    partitioning's estimate), or the reason there are none: an unknown input shape, or a layer that
    does not compile (a merged plan's vectors take accumulator space)."""
    from vtasim.compiler.errors import CompileError
    from vtasim.compiler.frontend.partition import estimate_cycles
    shape = g.shapes.get(nodes[0].inputs[0])
    if shape is None:
        return f"the input shape of {nodes[0].name!r} is unknown (no cycle estimate)"
    total = 0
    for n in nodes:
        try:
            total += estimate_cycles(VtaRegion(n, cfg, path=requant), shape, n.attrs["x_dtype"])
        except CompileError as e:
            return f"{n.name}: {e}"
    return total


def _clusters(branches, plans, g, taken, cfg, requant):
    """[(members + [combined node], merged plan or None)]: every branch in one layer when all their plans
    and the combined layer's are exact, else the branches grouped by their plans' shifts (merged)."""
    same_range = len({(int(b.attrs["y_zp"]), out_limits(b.attrs)) for b in branches}) == 1
    if same_range and not any(p.max_error_lsb for p in plans):
        comb = _combined(branches, g.fresh(f"{branches[0].name}_combined", taken))
        got = _plans([comb], cfg, requant)
        if not isinstance(got, str) and not got[0].max_error_lsb:
            return [(branches + [comb], None)]
    by_shifts: dict = {}
    for b, p in zip(branches, plans):
        by_shifts.setdefault(tuple(_segments(p)[1]), []).append((b, p))
    out = []
    for pairs in by_shifts.values():
        members = [b for b, _ in pairs]
        plan = merged_plan([p for _, p in pairs], [b.attrs["weight"].shape[0] for b in members]) \
            if len(pairs) > 1 else None
        if plan is not None:
            out.append((members + [_combined(members, g.fresh(f"{members[0].name}_combined", taken))], plan))
    return out


def _combine(g: Graph, op: str, pass_name: str, cfg, requant: str, skip_first_conv: bool) -> Graph:
    prod = g.producers()
    first_conv = next((n for n in g.nodes if n.op == "qconv"), None) if skip_first_conv else None
    groups: dict = {}
    for n in g.nodes:
        if n.op == op and n is not first_conv and _eligible(n):
            groups.setdefault(_key(g, prod, n), []).append(n)
    taken = g.names()
    replace: dict = {}           # id(first branch) -> [combined, Split]; other branches -> []
    for branches in groups.values():
        if len(branches) < 2:
            continue
        names = ", ".join(repr(b.name) for b in branches)
        plans = _plans(branches, cfg, requant)
        if isinstance(plans, str):
            g.notes.append(f"{pass_name}: {names} over {branches[0].inputs[0]!r} not combined: {plans}")
            continue
        tried: set = set()
        for members, plan in _clusters(branches, plans, g, taken, cfg, requant):
            comb = members[-1]
            members = members[:-1]
            tried.update(id(b) for b in members)
            sizes = [b.attrs["weight"].shape[0] for b in members]
            if plan is not None:
                comb.attrs["requant_plan"] = plan
            label = f"{pass_name}: {', '.join(repr(b.name) for b in members)} over {members[0].inputs[0]!r}"
            apart, together = _cycles(g, members, cfg, requant), _cycles(g, [comb], cfg, requant)
            why = apart if isinstance(apart, str) else together if isinstance(together, str) else None
            if why or together >= apart:
                g.notes.append(f"{label} not combined: " + (why or f"{together:,} cycles combined against "
                                                                  f"{apart:,} apart on the cycle engine"))
                continue
            out_shape = g.shapes.get(members[0].outputs[0])
            if out_shape is not None:
                g.shapes[comb.outputs[0]] = (out_shape[0], sum(sizes)) + tuple(out_shape[2:])
            split = Node("Split", [comb.outputs[0]], [b.outputs[0] for b in members], {"axis": 1, "split": sizes},
                         f"{comb.name}_split", comb.where)
            replace[id(members[0])] = [comb, split]
            for b in members[1:]:
                replace[id(b)] = []
            g.notes.append(f"{label} -> one {op} of {sum(sizes)} output channels {sizes}, split on the host; "
                           f"{apart:,} -> {together:,} cycles"
                           + (" (their requantisation plans merged per channel)" if plan is not None else ""))
        left = [b.name for b in branches if id(b) not in tried]
        if left:
            g.notes.append(f"{pass_name}: {', '.join(map(repr, left))} over {branches[0].inputs[0]!r} not combined: "
                           f"their requantisation plans are not all exact and shift differently from every sibling's")
    if replace:
        g.nodes = [m for n in g.nodes for m in replace.get(id(n), [n])]
    return g


def combine_parallel_conv2d(g: Graph, cfg, requant: str = "auto", skip_first_conv: bool = False) -> Graph:
    """Sibling ``qconv``s over one input -> one ``qconv`` + ``Split``.  ``skip_first_conv``: the graph's
    first convolution stays alone (partitioning keeps it on the host)."""
    return _combine(g, "qconv", "combine_parallel_conv2d", cfg, requant, skip_first_conv)


def combine_parallel_dense(g: Graph, cfg, requant: str = "auto") -> Graph:
    """Sibling ``qdense``s over one input -> one ``qdense`` + ``Split``."""
    return _combine(g, "qdense", "combine_parallel_dense", cfg, requant, False)
