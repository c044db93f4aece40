"""numba's on-disk cache for the cycle engine, keyed on every source file the compiled code uses.

numba stamps a cached function with the hash of the one file that defines it.  The event loop in
:mod:`vtasim.sim.cycle.core` compiles the kernels of :mod:`vtasim.sim.cycle.kernels` and the constants of
:mod:`vtasim.sim.cycle.layout`, :mod:`vtasim.hw.isa`, :mod:`vtasim.hw.alu` (the ALU opcodes), :mod:`vtasim.hw.fields` and :mod:`vtasim.hw.config` into its
own machine code, so an edit to any of those would leave a stale ``core`` entry in the cache that numba keeps loading
(old semantics with new Python around it).  Importing this module (before any ``@njit(cache=True)`` of
the package runs) makes the stamp of every function defined in ``sim/cycle`` cover all of them, and so
does that of the functional engine's compiled ALU loop (``sim/functional.py``, which compiles in the
opcodes of :mod:`vtasim.hw.alu` too).

:func:`compile_notice` tells the user when that cache misses: numba broadcasts its public
``"numba:compile"`` event only when a function is compiled, not when its machine code is loaded from
the cache, so the note appears on the first run after an install or a source edit and never on a
warm cache.
"""

from __future__ import annotations

import hashlib
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from numba.core import caching, event

_HERE = Path(__file__).resolve().parent
_DEPS = (_HERE / "core.py", _HERE / "kernels.py", _HERE / "gemm_fast.py", _HERE / "gemm_simd.py", _HERE / "simd.py", _HERE / "layout.py",
         _HERE.parent.parent / "hw" / "isa.py", _HERE.parent.parent / "hw" / "config.py",
         _HERE.parent.parent / "hw" / "fields.py", _HERE.parent.parent / "hw" / "alu.py",
         _HERE.parent.parent / "hw" / "timing.py")
_ALSO = (_HERE.parent / "functional.py",)     # outside sim/cycle, compiled with the ALU opcodes


def _deps_stamp() -> str:
    h = hashlib.sha256()
    for p in _DEPS:
        h.update(p.read_bytes())
    return h.hexdigest()


class _Stamped:
    """A numba locator whose source stamp also covers :data:`_DEPS`; everything else delegated."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def get_source_stamp(self):
        return (self._inner.get_source_stamp(), _deps_stamp())


class DependencyStampLocator:
    """First in numba's locator list; only claims functions defined in ``sim/cycle`` (and :data:`_ALSO`)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        path = Path(py_file).resolve()
        if path.parent != _HERE and path not in _ALSO:
            return None
        for other in _LOCATORS:
            if other is not cls:
                inner = other.from_function(py_func, py_file)
                if inner is not None:
                    return _Stamped(inner)
        return None


# numba's locator list is internal (numba 0.68 is pinned); should it move, fall back to numba's own
# per-file stamp rather than break the engine.
_LOCATORS = getattr(getattr(caching, "CacheImpl", None), "_locator_classes", None)
if isinstance(_LOCATORS, list) and DependencyStampLocator not in _LOCATORS:
    _LOCATORS.insert(0, DependencyStampLocator)


COMPILE_NOTE = "compiling the cycle engine (about 40 s, once per install)..."


class _FirstCompile(event.Listener):
    """Writes :data:`COMPILE_NOTE` on the first compile it hears of (nested compiles add nothing)."""

    def __init__(self, stream):
        self.stream = stream
        self.compiled = False

    def on_start(self, ev):
        if not self.compiled:
            self.compiled = True
            self.stream.write(COMPILE_NOTE + "\n")
            self.stream.flush()

    def on_end(self, ev):
        pass


@contextmanager
def compile_notice(stream=None):
    """Announce on ``stream`` (default: ``sys.stderr`` at call time) a numba compile inside the block:
    :data:`COMPILE_NOTE` when the first function compiles, a done line with the time at the end of the
    block.  Silent when everything loads from the on-disk cache.  Yields the listener (``.compiled``)."""
    stream = sys.stderr if stream is None else stream
    listener = _FirstCompile(stream)
    t0 = time.perf_counter()
    with event.install_listener("numba:compile", listener):
        yield listener
    if listener.compiled:
        stream.write(f"compiled the cycle engine in {time.perf_counter() - t0:.0f} s; "
                     "later runs load it from the cache\n")
        stream.flush()
