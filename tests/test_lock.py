"""The lock (``constraints.txt``) agrees with ``pyproject.toml``.

References: the ranges and extras declared in ``pyproject.toml`` (read with tomllib) and the
requirement metadata of the installed distributions (importlib.metadata), walked transitively from
``vtasim[dev]``. A package the suite needs but the lock does not pin, or a pin outside the range
that pyproject.toml declares, fails here before it fails on a user's fresh machine.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            pins[canonicalize_name(name)] = version
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**default_environment(), "extra": e}) for e in extras or {""})


def test_every_pin_is_inside_pyprojects_ranges():
    pins = _pins()
    project = _project()
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for group in project["optional-dependencies"].values() for r in group]
    for req in reqs:
        name = canonicalize_name(req.name)
        if name == "vtasim":
            continue
        assert name in pins, f"{req.name} is a dependency of vtasim but constraints.txt does not pin it"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's range {req.specifier}")


def test_the_lock_covers_the_whole_requirement_tree_of_the_dev_extra():
    """Every distribution reachable from vtasim[dev] (as installed here) is pinned."""
    pins = _pins()
    todo = [(Requirement("vtasim[dev]"), {"dev"})]
    seen: set[str] = set()
    missing = []
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        key = name + "[" + ",".join(sorted(extras)) + "]"
        if key in seen:
            continue
        seen.add(key)
        if name != "vtasim" and name not in pins:
            missing.append(req.name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue                      # not installed here: the first test still checks direct ones
        for sub in dist.requires or ():
            sub_req = Requirement(sub)
            if _applies(sub_req, extras):
                todo.append((sub_req, set(sub_req.extras)))
    assert not missing, f"installed requirements of vtasim[dev] that constraints.txt does not pin: {sorted(set(missing))}"
