"""Graph passes with the names users know from TVM/Relay, each ``pass(graph, ...) -> graph``.

* :func:`dead_code_elimination` - nodes whose outputs nobody uses;
* :func:`fold_constants` - nodes whose inputs are all constants are evaluated on the host (quantised
  weights stay quantised: a ``DequantizeLinear`` of a constant is not folded);
* :func:`simplify_inference` - ``BatchNormalization`` folded into the float ``Conv`` before it (or
  rewritten as ``Mul`` + ``Add``), ``Dropout``/``Identity`` removed;
* :func:`eliminate_common_subexpr` - identical nodes (op, inputs, attributes) merged;
* :func:`fuse_ops` (in :mod:`vtasim.compiler.frontend.fuse`) - QDQ patterns to the composite quantised ops;
* :func:`legalize` - activations VTA cannot run are reported with their substitute;
* partitioning and layout packing live in :mod:`vtasim.compiler.frontend.partition`.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.graph import Graph, Node

__all__ = ["dead_code_elimination", "fold_constants", "simplify_inference", "eliminate_common_subexpr",
           "legalize", "rename_uses", "Renames"]


def rename_uses(g: Graph, old: str, new: str) -> None:
    """Every use of value ``old`` becomes ``new``: one walk over the graph (a pass renaming many values
    uses :class:`Renames`, which applies them all in one walk)."""
    for n in g.nodes:
        n.inputs = [new if i == old else i for i in n.inputs]
    g.outputs = [new if o == old else o for o in g.outputs]


class Renames:
    """Values renamed during one walk over a topologically ordered graph, applied as the walk goes
    (:meth:`inputs` before a node is looked at, :meth:`finish` to the graph outputs): time linear in
    the graph, where a :func:`rename_uses` per renamed value is quadratic (a 20,000-node Identity chain)."""

    def __init__(self):
        self.to: dict = {}

    def add(self, old: str, new: str) -> None:
        self.to[old] = self.to.get(new, new)     # targets stored resolved: a chain costs one look-up

    def inputs(self, n: Node) -> None:
        if self.to:
            n.inputs = [self.to.get(i, i) if i else i for i in n.inputs]

    def finish(self, g: Graph) -> None:
        g.outputs = [self.to.get(o, o) for o in g.outputs]


def dead_code_elimination(g: Graph) -> Graph:
    live = set(g.outputs)
    keep = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs):
            keep.append(n)
            live.update(i for i in n.inputs if i)
    removed = len(g.nodes) - len(keep)
    g.nodes = keep[::-1]
    g.consts = {k: v for k, v in g.consts.items() if k in live}
    if removed:
        g.notes.append(f"dead_code_elimination: removed {removed} node(s)")
    return g


def fold_constants(g: Graph) -> Graph:
    from vtasim.compiler.frontend.host_ops import run_host
    kept, folded = [], 0
    for n in g.nodes:
        args_const = all((not i) or i in g.consts for i in n.inputs)
        if args_const and n.inputs and n.op != "DequantizeLinear" and not n.op.islower():
            outs = run_host(n, [g.consts[i] if i else None for i in n.inputs])
            for name, v in zip(n.outputs, outs):
                g.consts[name] = np.asarray(v)
            folded += 1
        else:
            kept.append(n)
    g.nodes = kept
    if folded:
        g.notes.append(f"fold_constants: evaluated {folded} node(s) at compile time")
    return g


def _drop_identities(g: Graph) -> None:
    renames, kept = Renames(), []
    for n in g.nodes:
        renames.inputs(n)
        if n.op in ("Dropout", "Identity"):
            renames.add(n.outputs[0], n.inputs[0])
        else:
            kept.append(n)
    renames.finish(g)
    g.nodes = kept


def simplify_inference(g: Graph) -> Graph:
    _drop_identities(g)
    prod = g.producers()
    uses: dict = {}                 # value -> number of nodes using it (a folded BN still counts)
    for n in g.nodes:
        for i in n.inputs:
            if i:
                uses[i] = uses.get(i, 0) + 1
    outputs, taken = set(g.outputs), g.names()
    renames = Renames()
    nodes, folded, rewritten = [], 0, 0
    for n in g.nodes:
        renames.inputs(n)
        if n.op != "BatchNormalization":
            nodes.append(n)
            continue
        x, scale, bias, mean, var = n.inputs[:5]
        params = [g.const(v) for v in (scale, bias, mean, var)]
        if any(p is None for p in params):
            nodes.append(n)          # a training-mode or dynamic BN: runs as it is on the host
            continue
        s, b, m, v = (p.astype(np.float64) for p in params)
        k = s / np.sqrt(v + n.attrs.get("epsilon", 1e-5))
        shift = b - m * k
        conv = prod.get(x)
        if (conv is not None and conv.op == "Conv" and x not in outputs and uses.get(x) == 1
                and conv.inputs[1] in g.consts
                and (len(conv.inputs) < 3 or not conv.inputs[2] or conv.inputs[2] in g.consts)):
            w = g.consts[conv.inputs[1]].astype(np.float64)
            wname = g.fresh(conv.inputs[1] + "_bn", taken)
            g.consts[wname] = (w * k.reshape(-1, 1, 1, 1)).astype(np.float32)
            b0 = g.consts[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
            bname = g.fresh(conv.name + "_bn_bias", taken)
            g.consts[bname] = (b0 * k + shift).astype(np.float32)
            conv.inputs = [conv.inputs[0], wname, bname]
            renames.add(n.outputs[0], x)
            uses[x] += uses.get(n.outputs[0], 0)
            if n.outputs[0] in outputs:
                outputs.add(x)
            folded += 1
            continue
        rank = len(g.shapes[x]) if x in g.shapes else len(g.inputs[x][0]) if x in g.inputs else None
        if rank is None or rank < 2:
            nodes.append(n)          # rank unknown: the channel axis cannot be placed; runs on the host
            continue
        kname, bname = g.fresh(n.name + "_scale", taken), g.fresh(n.name + "_shift", taken)
        shape = (-1,) + (1,) * (rank - 2)        # channels on axis 1 of an (N, C, ...) input
        g.consts[kname] = k.astype(np.float32).reshape(shape)
        g.consts[bname] = shift.astype(np.float32).reshape(shape)
        mid = g.fresh(n.outputs[0] + "_scaled", taken)
        nodes.append(Node("Mul", [x, kname], [mid], {}, n.name + "_mul", n.where))
        nodes.append(Node("Add", [mid, bname], [n.outputs[0]], {}, n.name + "_add", n.where))
        rewritten += 1
    renames.finish(g)
    g.nodes = nodes
    if folded or rewritten:
        g.notes.append(f"simplify_inference: {folded} batch-norm(s) folded into conv weights, "
                       f"{rewritten} rewritten as multiply + add")
    return g


def _attr_key(v):
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_attr_key(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _attr_key(x)) for k, x in v.items()))
    if isinstance(v, np.dtype):
        return v.str
    return v


def eliminate_common_subexpr(g: Graph) -> Graph:
    seen, nodes, merged, renames = {}, [], 0, Renames()
    for n in g.nodes:
        renames.inputs(n)
        key = (n.op, tuple(n.inputs), _attr_key(n.attrs), len(n.outputs))
        if key in seen:
            for old, new in zip(n.outputs, seen[key].outputs):
                renames.add(old, new)
            merged += 1
            continue
        seen[key] = n
        nodes.append(n)
    renames.finish(g)
    g.nodes = nodes
    if merged:
        g.notes.append(f"eliminate_common_subexpr: merged {merged} node(s)")
    return g


SUBSTITUTES = {
    "Sigmoid": "quantise around it (QDQ) to get an int8 lookup table, or use HardSigmoid",
    "Tanh": "quantise around it (QDQ) to get an int8 lookup table",
    "HardSwish": "quantise around it (QDQ) to get an int8 lookup table",
    "HardSigmoid": "quantise around it (QDQ) to get an int8 lookup table",
    "Softmax": "leave it on the host (as a classifier's last op, or an attention's normalisation)",
}


def legalize(g: Graph) -> Graph:
    """Report every float activation left after fusion: VTA's ALU has no transcendental functions,
    so it runs on the host in float; the note names the supported substitute."""
    for n in g.nodes:
        if n.op in SUBSTITUTES:
            g.notes.append(f"legalize: {n.where}: {n.op} is not supported on VTA, runs on the host in float; "
                           f"substitute: {SUBSTITUTES[n.op]}")
        if n.op == "qlut":
            g.notes.append(f"legalize: {n.where}: {n.attrs['fn']} runs as a 256-entry int8 lookup table on the host")
    return g
