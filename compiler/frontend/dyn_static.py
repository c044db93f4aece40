"""DynamicToStatic (Relay's name): shape computations over static shapes become constants.

ONNX exporters compute shapes in the graph: PyTorch writes ``x.view(x.size(0), -1)`` as
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` and ``torch.ones_like``/``expand`` as
``Shape -> ConstantOfShape`` / ``Expand``.  The importer's shapes are static wherever onnx's shape
inference, run with the inputs at the shapes the importer fixed, gives numbers
(:func:`vtasim.compiler.frontend.onnx_import.from_onnx`); a value whose shape depends on the data has no
entry in ``graph.shapes``.

:func:`dynamic_to_static`

* replaces every ``Shape``/``Size`` of a value with a static shape by its constant;
* evaluates, in graph order, each node whose inputs are then all constants and one of them came from
  this pass (the ``Gather``/``Unsqueeze``/``Concat``/``Cast``/arithmetic over shapes, ``ConstantOfShape``
  of a now-constant shape - :func:`~vtasim.compiler.frontend.passes.fold_constants` could not start these
  chains because a ``Shape`` input is never a constant);
* records the output shape of a ``Reshape``/``Expand`` whose shape input became constant (its data
  input is a tensor: it stays, now with a static shape).

Shapes that depend on the data stay as they are and run on the host (:mod:`vtasim.compiler.frontend.shape_ops`);
the note names them.
"""

from __future__ import annotations

from math import prod

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.graph import Graph
from vtasim.compiler.frontend.shape_ops import expand_shape, shape_slice

__all__ = ["dynamic_to_static", "static_shape", "reshape_shape"]

_SHAPE_READERS = ("Shape", "Size")
_SHAPED_BY_INPUT = ("Reshape", "Expand")


def static_shape(g: Graph, v: str):
    """The shape of value ``v`` when it is known at compile time, else None."""
    if v in g.consts:
        return tuple(np.shape(g.consts[v]))
    if v in g.inputs:
        return tuple(g.inputs[v][0])
    got = g.shapes.get(v)
    return tuple(got) if got is not None else None


def reshape_shape(node, x_shape: tuple, shape) -> tuple:
    """``Reshape``'s output shape from its input shape and its (constant) shape input: ``0`` copies the
    input's dimension (unless ``allowzero``), one ``-1`` takes what is left."""
    want = [int(d) for d in np.asarray(shape).reshape(-1)]
    if not node.attrs.get("allowzero", 0):
        want = [x_shape[k] if d == 0 and k < len(x_shape) else d for k, d in enumerate(want)]
    total = prod(x_shape)
    if want.count(-1) > 1 or any(d < -1 for d in want):
        raise FrontendError(f"{node.where}: Reshape to {tuple(want)} (at most one -1, no other negative size)")
    if -1 in want:
        rest = prod(d for d in want if d != -1)
        if rest == 0 or total % rest:
            raise FrontendError(f"{node.where}: Reshape of {tuple(x_shape)} to {tuple(want)}: "
                                f"{total} elements do not divide")
        want[want.index(-1)] = total // rest
    if prod(want) != total:
        raise FrontendError(f"{node.where}: Reshape of {tuple(x_shape)} ({total} elements) to {tuple(want)}")
    return tuple(want)


def dynamic_to_static(g: Graph) -> Graph:
    from vtasim.compiler.frontend.host_ops import run_host
    derived: set = set()                     # constants this pass made
    readers, evaluated, kept, left = 0, {}, [], []
    now_static = []
    for n in g.nodes:
        if n.op in _SHAPE_READERS:
            shape = static_shape(g, n.inputs[0])
            if shape is None:
                left.append(f"{n.op} {n.name!r} (input {n.inputs[0]!r} has a data-dependent shape)")
                kept.append(n)
                continue
            s = shape_slice(n, shape) if n.op == "Shape" else prod(shape)
            g.consts[n.outputs[0]] = np.array(s, np.int64)
            derived.add(n.outputs[0])
            readers += 1
            continue
        ins = [i for i in n.inputs if i]
        if ins and all(i in g.consts for i in ins) and any(i in derived for i in ins) and not n.op.islower():
            outs = run_host(n, [g.consts[i] if i else None for i in n.inputs])
            for name, v in zip(n.outputs, outs):
                g.consts[name] = np.asarray(v)
                derived.add(name)
            evaluated[n.op] = evaluated.get(n.op, 0) + 1
            continue
        if n.op in _SHAPED_BY_INPUT and len(n.inputs) > 1 and n.inputs[1] in derived:
            x_shape = static_shape(g, n.inputs[0])
            if x_shape is not None:
                shape = g.consts[n.inputs[1]]
                out = reshape_shape(n, x_shape, shape) if n.op == "Reshape" else expand_shape(n, x_shape, shape)
                g.shapes[n.outputs[0]] = out
                now_static.append(f"{n.op} {n.name!r} -> {out}")
        kept.append(n)
    g.nodes = kept
    if readers or evaluated:
        ops = ", ".join(f"{v} {k}" for k, v in sorted(evaluated.items()))
        g.notes.append(f"dynamic_to_static: {readers} Shape/Size op(s) of static tensors folded to constants"
                       + (f", {sum(evaluated.values())} shape op(s) evaluated at compile time ({ops})" if ops else "")
                       + (f"; now static: {', '.join(now_static)}" if now_static else ""))
    if left:
        g.notes.append(f"dynamic_to_static: {len(left)} shape op(s) left to run on the host: {'; '.join(left)}")
    return g
