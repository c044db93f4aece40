"""Shared fixtures of the simulator tests: one build per (config, simulator) per session.

Builds live in the cache of :mod:`hw.cosim.runner` (``$VTASIM_BUILD_DIR``), so a second session, or
the second pytest-xdist worker, reuses the first one's build (a file lock serialises the compile).
"""

from __future__ import annotations

import numpy as np
import pytest

from hw.config import load_config


@pytest.fixture(scope="session")
def cfg():
    return load_config()


@pytest.fixture(scope="session")
def verilator_build(cfg):
    from hw.cosim.runner import get_build
    return get_build(cfg, "verilator")


@pytest.fixture(scope="session")
def icarus_build(cfg):
    from hw.cosim.runner import get_build
    return get_build(cfg, "icarus")


def _same_run(image, expected, actual, timing=True):
    """Assert identical bytes (and, with ``timing``, identical retire records and cycles)."""
    from sim.diff import compare
    if isinstance(actual, BaseException):
        raise actual
    d = compare(expected, actual, image, timing=timing)
    assert d.ok, "\n" + d.report()
    # Belt and braces next to the diff: the raw facts the diff summarises.
    assert np.array_equal(np.asarray(expected.dram), np.asarray(actual.dram))
    assert actual.outputs == expected.outputs
    for name, data in image.expected.items():
        assert actual.outputs[name] == data, f"output {name!r} differs from the numpy reference"
    if timing:
        assert list(actual.trace) == list(expected.trace)
        assert actual.cycles == expected.cycles
    # The rtl result derives these from the stream; the models count them as they run.
    assert actual.counters == expected.counters
    assert actual.leftover_tokens == expected.leftover_tokens
    return d


@pytest.fixture(scope="session")
def same_run():
    return _same_run
