"""The engine contract in one place: the registry of engines, running one by name, checking a result.

Every engine is a module with ``run_image(image, **opts) -> RunResult`` (:mod:`sim.result`); options
an engine does not know are ignored, so one call site serves all three::

    >>> from sim.engines import run_engine, check_result
    >>> result = run_engine("cycle", image)                    # doctest: +SKIP
    >>> check_result(image, result)                            # doctest: +SKIP
    []

Engines are imported only when asked for (the RTL engine needs cocotb and a simulator); an engine
that cannot be imported raises :class:`EngineUnavailable`, a :class:`~sim.errors.SimError`.
"""

from __future__ import annotations

import importlib

import numpy as np

from sim.errors import SimError

__all__ = ["ENGINES", "EngineUnavailable", "run_engine", "check_result", "engine_module"]

# Abstraction level -> module implementing it (PyMTL3's naming: functional / cycle / rtl).
ENGINES = {"functional": "sim.functional", "cycle": "sim.cycle", "rtl": "sim.rtl"}


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


def run_engine(name: str, image, **opts):
    """``<engine module>.run_image(image, **opts)``, importing the engine only now."""
    return engine_module(name).run_image(image, **opts)


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
