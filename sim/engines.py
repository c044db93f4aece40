"""The engine contract in one place: the registry, the interface every engine declares, running one.

An engine is a module with

* ``run_image(image, **options) -> RunResult`` (:mod:`vtasim.sim.result`): one memory image;
* ``run_images(images, **batch_options) -> list[RunResult]``: many, in input order;
* ``OPTIONS`` and ``BATCH_OPTIONS``: the :class:`Option` s those two accept, with their types;
* ``TIMED``: True when its results carry retire records and cycles (then :func:`run_engine` also
  takes ``trace`` and ``perfetto``, written by :func:`vtasim.sim.trace.write_run` for every engine alike).

:func:`run_engine` and :func:`run_many` enforce it: an option the engine does not declare, or a value of
the wrong type, is a :class:`~vtasim.sim.errors.SimError` naming the engine and the options it has::

    >>> from vtasim.sim.engines import run_engine, check_result
    >>> result = run_engine("cycle", image, gemm="int")        # doctest: +SKIP
    >>> run_engine("cycle", image, gem="int")                  # doctest: +SKIP
    SimError: engine 'cycle' has no option 'gem' for run_engine; its options: progress, gemm, trace, perfetto
    >>> check_result(image, result)                            # doctest: +SKIP
    []

Engines are imported only when asked for (the RTL engine needs cocotb and a simulator); an engine
that cannot be imported raises :class:`EngineUnavailable`, a :class:`~vtasim.sim.errors.SimError`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasim.sim.errors import SimError

__all__ = ["ENGINES", "Option", "TRACE_OPTIONS", "EngineUnavailable", "engine_module", "engine_options",
           "run_engine", "run_many", "check_result"]

# Abstraction level -> module implementing it (PyMTL3's naming: functional / cycle / rtl).
ENGINES = {"functional": "vtasim.sim.functional", "cycle": "vtasim.sim.cycle", "rtl": "vtasim.sim.rtl"}


@dataclass(frozen=True)
class Option:
    """One engine option: its name, the types a value may have (None is always allowed: the
    default), what it does, and the values it may take (empty: any of the types)."""

    name: str
    types: tuple
    meaning: str
    choices: tuple = ()

    def check(self, engine: str, value) -> None:
        if value is None:
            return
        ok = isinstance(value, self.types) and not (isinstance(value, bool) and bool not in self.types)
        if not ok:
            kinds = " or ".join(t.__name__ for t in self.types)
            raise SimError(f"engine {engine!r}: option {self.name} = {value!r} must be {kinds} ({self.meaning})")
        if self.choices and value not in self.choices:
            raise SimError(f"engine {engine!r}: option {self.name} = {value!r} is not one of "
                           f"{', '.join(map(repr, self.choices))} ({self.meaning})")


# Written by the protocol (vtasim.sim.trace.write_run) for every TIMED engine: not an engine's own options.
TRACE_OPTIONS = (
    Option("trace", (str, Path), "CSV file of the retire records"),
    Option("perfetto", (str, Path), "Perfetto / Chrome trace-event JSON file of the run"),
)


class EngineUnavailable(SimError):
    """The requested engine's module is not importable in this installation."""


def engine_module(name: str):
    """The module of engine ``name``, imported now."""
    if name not in ENGINES:
        raise SimError(f"engine {name!r} is not one of {', '.join(ENGINES)}")
    try:
        return importlib.import_module(ENGINES[name])
    except ImportError as exc:
        raise EngineUnavailable(f"engine {name!r} is not available ({ENGINES[name]}: {exc})") from None


def engine_options(name: str, batch: bool = False) -> tuple:
    """The :class:`Option` s of ``run_engine(name, ...)`` (``batch``: of ``run_many(name, ...)``)."""
    mod = engine_module(name)
    if batch:
        return tuple(mod.BATCH_OPTIONS)
    return tuple(mod.OPTIONS) + (TRACE_OPTIONS if mod.TIMED else ())


def _check(name: str, opts: dict, batch: bool) -> None:
    declared = {o.name: o for o in engine_options(name, batch)}
    call = "run_many" if batch else "run_engine"
    for key, value in opts.items():
        if key not in declared:
            why = ""
            if not batch and key in {o.name for o in TRACE_OPTIONS}:
                why = " (it has no timing: its results carry no retire records; the cycle and rtl engines do)"
            raise SimError(f"engine {name!r} has no option {key!r} for {call}{why}; its options: "
                           f"{', '.join(declared) or 'none'}")
        declared[key].check(name, value)


def run_engine(name: str, image, **opts):
    """``<engine>.run_image(image, **opts)`` after checking ``opts`` against the engine's options;
    ``trace`` / ``perfetto`` (timed engines) are written from the result."""
    _check(name, opts, batch=False)
    trace, perfetto = opts.pop("trace", None), opts.pop("perfetto", None)
    result = engine_module(name).run_image(image, **opts)
    if trace is not None or perfetto is not None:
        from vtasim.sim.trace import write_run
        write_run(result, trace, perfetto)
    return result


def run_many(name: str, images, **opts) -> list:
    """``<engine>.run_images(images, **opts)`` after checking ``opts``: a list of results in the order
    of ``images``."""
    _check(name, opts, batch=True)
    return engine_module(name).run_images(list(images), **opts)


def check_result(image, result) -> list:
    """Mismatches against the image's expected outputs and counters, as one-line strings."""
    problems = []
    for name, want in image.expected.items():
        got = result.outputs[name]
        if got != want:
            a, b = np.frombuffer(want, np.uint8), np.frombuffer(got, np.uint8)
            k = int(np.argmax(a != b))
            ndiff = int(np.count_nonzero(a != b))
            problems.append(f"output {name!r}: byte {k} (element {k // image.cfg.out_elem_bytes}, lane "
                            f"{k % image.cfg.out_elem_bytes}) expected {a[k].astype(np.int8)} (0x{a[k]:02x}), "
                            f"got {b[k].astype(np.int8)} (0x{b[k]:02x}); {ndiff} of {len(a)} bytes differ")
    for key, want in (image.expected_counters or {}).items():
        got = result.counters.get(key)
        if got != want:
            problems.append(f"counter {key}: expected {want}, got {got}")
    return problems
