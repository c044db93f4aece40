"""Fixtures of the simulator tests: one build per (config, simulator) per session (``same_run`` and
``verilator_build`` are in the root ``tests/conftest.py``).

Builds live in the cache of :mod:`vtasim.sim.rtl.runner` (``$VTASIM_BUILD_DIR``), so a second session, or
the second pytest-xdist worker, reuses the first one's build (a file lock serialises the compile).
"""

from __future__ import annotations

import pytest



@pytest.fixture(scope="session")
def icarus_build(cfg):
    from vtasim.sim.rtl.runner import get_build
    return get_build(cfg, "icarus")


@pytest.fixture(scope="session")
def coverage_build(cfg):
    """The Verilator coverage build (its own cache entry); one per session, shared like the others."""
    from vtasim.sim.rtl.runner import get_build
    return get_build(cfg, "verilator", coverage=True)
