"""Imports run one way, ``hw`` <- ``waveforms`` <- ``sim`` <- ``compiler``, and no modules import each other.

The package sources are parsed (ast), not imported, so every import counts: module level and inside
functions alike.  ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module.
Reference: the rule in DEVELOPERS.md and the layer order below, independent of the code under test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("hw", "waveforms", "sim", "compiler")       # lowest first; a module may import only leftwards


def _modules() -> dict:
    """``{dotted module name: path}`` of every Python file of the layered packages."""
    out = {}
    for top in LAYERS:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict) -> set:
    """Project modules that module ``name`` imports."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            if t.split(".")[0] in LAYERS:
                found.add(t)
    found.discard(name)
    return found


def _graph() -> dict:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_the_packages():
    graph = _graph()
    assert {"vtasim.hw.config", "vtasim.hw.isa", "vtasim.sim.engines", "vtasim.sim.cli", "vtasim.sim.rtl.runner", "vtasim.waveforms.vcd"} <= set(graph)
    assert "vtasim.hw.config" in graph["vtasim.hw.isa"] and "vtasim.sim.engines" in graph["vtasim.sim.cli.run"]


@pytest.mark.parametrize("layer", LAYERS)
def test_no_upward_import(layer):
    rank = {top: k for k, top in enumerate(LAYERS)}
    bad = sorted(f"{src} imports {dst}" for src, dsts in _graph().items() if src.split(".")[0] == layer
                 for dst in dsts if rank[dst.split(".")[0]] > rank[layer])
    assert not bad, f"imports against {' <- '.join(LAYERS)}:\n" + "\n".join(bad)


def test_no_import_circles():
    circles = _cycles(_graph())
    assert not circles, "modules importing each other: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_checks_catch_what_they_are_for():
    """The checks themselves fail on a planted upward edge and a planted circle."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
