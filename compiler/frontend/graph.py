"""The front end's graph IR: ONNX-named ops over named values, constants held as numpy arrays.

A :class:`Graph` is a list of :class:`Node` in topological order.  Values are named strings; a
value is a graph input, a constant (``graph.consts``) or the output of exactly one node.  Imported
ops keep their ONNX names (``Conv``, ``QuantizeLinear`` ...); the passes add composite ops in lower
case (``qconv``, ``qdense``, ``qadd``, ``qlut``), whose attributes carry the integer parameters
(weights, bias, scales, zero points).  ``node.target`` is ``"host"`` or ``"vta"`` once the graph is
partitioned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Node", "Graph"]


@dataclass
class Node:
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    name: str = ""
    where: str = ""          # where it came from in the model, for error messages
    target: str = "host"

    def __repr__(self) -> str:
        return f"{self.op}[{self.name}]({', '.join(self.inputs)}) -> {', '.join(self.outputs)} @{self.target}"


@dataclass
class Graph:
    nodes: list[Node]
    inputs: dict               # name -> (shape tuple, numpy dtype)
    outputs: list[str]
    consts: dict               # name -> np.ndarray
    name: str = "model"
    notes: list = field(default_factory=list)   # what the passes did / suggest, for the report
    shapes: dict = field(default_factory=dict)  # value -> shape (ONNX shape inference; kept by the passes)

    def producers(self) -> dict:
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict:
        use: dict = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    use.setdefault(i, []).append(n)
        return use

    def const(self, name: str):
        """The constant array called ``name``, or None."""
        return self.consts.get(name)

    def names(self) -> set:
        """Every value name in use: inputs, constants, node outputs."""
        return set(self.inputs) | set(self.consts) | {o for n in self.nodes for o in n.outputs}

    def fresh(self, base: str, taken: set | None = None) -> str:
        """A value name not used yet, derived from ``base``.  ``taken``: :meth:`names` kept by a pass that
        makes many names (the new name is added to it), instead of a walk over the graph per name."""
        taken = self.names() if taken is None else taken
        k, name = 0, base
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    def counts(self) -> dict:
        out: dict = {}
        for n in self.nodes:
            out[n.op] = out.get(n.op, 0) + 1
        return out

    def copy(self) -> "Graph":
        return Graph([Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name, n.where, n.target)
                      for n in self.nodes], dict(self.inputs), list(self.outputs), dict(self.consts),
                     self.name, list(self.notes), dict(self.shapes))

    def __str__(self) -> str:
        lines = [f"graph {self.name}: inputs {list(self.inputs)}, outputs {self.outputs}, "
                 f"{len(self.consts)} constants"]
        lines += [f"  {n!r}" for n in self.nodes]
        return "\n".join(lines)


def np_scalar(a) -> float | int:
    arr = np.asarray(a)
    return arr.reshape(-1)[0].item()
