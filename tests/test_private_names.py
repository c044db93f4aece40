"""No module reaches into another module's private names (architecture: private names start with ``_``
and stay inside their module).

Every Python source of the packages, benchmarks and examples is parsed (tests are white-box and
may look inside the module they test); a use is private when a name starting with one underscore (not a dunder) is

* imported from another module: ``from vtasim.sim.cycle.engine import _memory_pool``, or
* read as an attribute of a name this file imported: ``vtasim.hw.config._ALL_KEYS``,
  ``FunctionalMachine._indices`` (``FunctionalMachine`` imported from ``vtasim.sim.functional``).

* read as an attribute of any object, when no code of this file defines that name but a module of
  the project does: ``machine._indices(...)`` where ``machine`` is a ``FunctionalMachine``.

A module's own ``self._x`` / ``cls._x`` are its business.  Third-party private names (``argparse``,
numba) are outside this rule; a namedtuple's ``_replace`` / ``_asdict`` / ``_fields`` / ``_make`` are public.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("hw", "waveforms", "sim", "compiler", "bench", "examples")
PACKAGES = ("hw", "waveforms", "sim", "compiler")
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def sources() -> list:
    files = []
    for top in TOP:
        files += sorted(p for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)
    return files


def defined_names(tree: ast.AST) -> set:
    """The names a file defines: functions, classes, assigned names and attributes, arguments."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.attr)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            out.add(node.arg)
    return out


def _project(src: str) -> bool:
    return src.startswith(".") or src.split(".")[0] in PACKAGES


def private_uses(path: Path, tree: ast.AST, project_private: set = frozenset()) -> list:
    """``"file:line: what"`` for every private name of another project module this file uses;
    ``project_private``: the private names the project's modules define (for the third form)."""
    rel = path.relative_to(ROOT)
    imported = {}                          # local name -> where it came from
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = ("." * node.level) + (node.module or "")
            for alias in node.names:
                if _private(alias.name) and _project(src):
                    out.append(f"{rel}:{node.lineno}: from {src} import {alias.name}")
                imported[alias.asname or alias.name] = f"{src}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imported[alias.asname] = alias.name
                else:
                    imported[alias.name.split(".")[0]] = alias.name.split(".")[0]
    own = defined_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)) or node.attr in NAMEDTUPLE_API:
            continue
        base = node.value
        chain = []
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in imported:
            if _project(imported[base.id]):
                dotted = ".".join([imported[base.id]] + chain[::-1])
                out.append(f"{rel}:{node.lineno}: {dotted}.{node.attr}")
        elif node.attr not in own and node.attr in project_private and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.append(f"{rel}:{node.lineno}: .{node.attr} of {ast.unparse(node.value)} (defined in another module)")
    return out


def parsed() -> dict:
    return {path: ast.parse(path.read_text(), str(path)) for path in sources()}


def project_private_names(trees: dict) -> set:
    return {n for path, tree in trees.items() if path.relative_to(ROOT).parts[0] in PACKAGES
            for n in defined_names(tree) if _private(n)}


def test_no_module_uses_another_modules_private_names():
    trees = parsed()
    names = project_private_names(trees)
    problems = []
    for path, tree in trees.items():
        problems += private_uses(path, tree, names)
    assert not problems, ("private names used across modules (make them public or keep the use inside "
                          "their module):\n" + "\n".join(problems))


def test_the_scan_catches_both_forms():
    """The scan is not vacuous: both forms of a private use are found, a module's own are not."""
    text = ("from vtasim.hw.config import _ALL_KEYS\nimport vtasim.hw.config\nfrom vtasim.sim.functional import FunctionalMachine\n"
            "x = vtasim.hw.config._current\ny = FunctionalMachine._indices\n"
            "m = FunctionalMachine(p)\nz = m._indices(1)\nimport argparse\na = argparse._HelpAction\n"
            "class A:\n    def f(self):\n        self._mine = 1\n        return self._own, other._mine\n")
    found = private_uses(ROOT / "tests" / "x.py", ast.parse(text), {"_indices", "_mine"})
    assert [f.split(": ", 1)[1] for f in found] == [
        "from vtasim.hw.config import _ALL_KEYS", "vtasim.hw.config._current", "vtasim.sim.functional.FunctionalMachine._indices",
        ".indices of m (defined in another module)".replace(".indices", "._indices")]
