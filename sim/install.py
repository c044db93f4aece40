"""What this installation of vtasim is: its version and its optional extras.

Both facts live in ``pyproject.toml`` (``[project] version`` and ``[project.optional-dependencies]``)
and nowhere else.  They are read from the source tree's ``pyproject.toml`` when vtasim runs from a
checkout, else from the installed package metadata (which pip derives from that file)::

    >>> from vtasim.sim.install import extra_of, require
    >>> extra_of("sklearn")
    'onnx'
    >>> require(["cocotb_tools"], "vtasim run --engine rtl")      # doctest: +SKIP
    MissingExtra: vtasim run --engine rtl needs the 'rtl' extra: pip install 'vtasim[rtl]' (cocotb_tools is not installed)

A command checks the modules it will import before it starts (:func:`require`); ``vtasim``'s main
turns any other :class:`ModuleNotFoundError` of an extra's module into the same one line
(:func:`missing_extra`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
from functools import lru_cache
from pathlib import Path

from vtasim.sim.errors import SimError

__all__ = ["MissingExtra", "DIST", "version", "extras", "extra_of", "pip_command", "require", "missing_note",
           "missing_extra"]

DIST = "vtasim"
_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# Distributions whose import names are not their own name (every other one imports as its name
# with '-' -> '_').  A fact about those packages, not about vtasim's extras.
_IMPORT_NAMES = {"scikit-learn": ("sklearn",), "cocotb": ("cocotb", "cocotb_tools"),
                 "dask": ("dask", "distributed")}


class MissingExtra(SimError):
    """A command needs a module of an optional extra that is not installed."""


def _project() -> dict | None:
    """``[project]`` of the source tree's pyproject.toml when it is vtasim's (a checkout), else None."""
    try:
        doc = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    project = doc.get("project", {})
    return project if project.get("name") == DIST else None


def version() -> str:
    """The version: the checkout's pyproject.toml, else the installed metadata, else ``unknown``."""
    project = _project()
    if project and project.get("version"):
        return str(project["version"])
    try:
        return importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed, no pyproject.toml)"


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (``dask[distributed]>=1`` -> ``dask``)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


@lru_cache(maxsize=1)
def extras() -> dict:
    """Extra name -> tuple of the distribution names it installs (vtasim's own aggregate ``dev`` included)."""
    project = _project()
    if project is not None:
        table = {extra: [_name(r) for r in reqs] for extra, reqs in project.get("optional-dependencies", {}).items()}
    else:
        table = {}
        try:
            requires = importlib.metadata.requires(DIST) or []
        except importlib.metadata.PackageNotFoundError:
            requires = []
        for req in requires:
            m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
            if m:
                table.setdefault(m.group(1), []).append(_name(req.split(";")[0]))
    return {extra: tuple(names) for extra, names in table.items()}


def _import_names(dist: str) -> tuple:
    return _IMPORT_NAMES.get(dist, (dist.replace("-", "_"),))


def extra_of(module: str) -> str | None:
    """The extra that installs top-level module ``module`` (the smallest one if several do), or None."""
    top = module.split(".")[0]
    owners = [(len(dists), extra) for extra, dists in extras().items()
              if any(top in _import_names(d) for d in dists if d != DIST)]
    return min(owners)[1] if owners else None


def pip_command(extra: str) -> str:
    return f"pip install '{DIST}[{extra}]'"


def _message(what: str, module: str) -> str | None:
    extra = extra_of(module)
    if extra is None:
        return None
    return f"{what} needs the '{extra}' extra: {pip_command(extra)} ({module.split('.')[0]} is not installed)"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_note(modules, what: str) -> str | None:
    """The one line of :func:`require` when a module in ``modules`` cannot be imported, else None
    (for output that is optional: the command goes on without it and prints the note)."""
    for module in modules:
        if not _importable(module):
            message = _message(what, module)
            if message is None:
                raise ValueError(f"{module!r} belongs to no extra of {DIST} (pyproject.toml)")
            return message
    return None


def require(modules, what: str) -> None:
    """Raise :class:`MissingExtra` (one line naming the extra and the pip command) unless every module
    in ``modules`` can be imported; ``what`` is the command (and option) that needs them."""
    message = missing_note(modules, what)
    if message is not None:
        raise MissingExtra(message)


def missing_extra(exc: BaseException, what: str) -> MissingExtra | None:
    """The one-line :class:`MissingExtra` for an ImportError of an extra's module, else None."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ImportError) or not name:
        return None
    message = _message(what, name)
    return MissingExtra(message) if message else None
