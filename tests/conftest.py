"""Fixtures every test directory shares: how two runs of one image are held equal.

``cfg``: the default config (``config/vta_config.json``), one per session, for every test directory.

``verilator_build``: the Verilator build of the default config, once per session (the build cache of
:mod:`vtasim.sim.rtl.runner` shares it with later sessions and pytest-xdist workers).

``same_run(image, expected, actual, timing=True)`` (:func:`engine_checks.same_run`) asserts identical
DRAM, outputs, counters and leftover tokens, the image's numpy reference outputs, and (with
``timing``) identical retire records and cycle counts.  Configs by
name come from :func:`vtasim.hw.config.load_preset` (the shipped presets, :data:`vtasim.hw.config.PRESETS`).
"""

from __future__ import annotations

import pytest

from engine_checks import same_run as _same_run
from vtasim.hw.config import load_config


@pytest.fixture(scope="session")
def cfg():
    return load_config()


@pytest.fixture(scope="session")
def same_run():
    return _same_run


@pytest.fixture(scope="session")
def verilator_build():
    from vtasim.hw.config import load_config
    from vtasim.sim.rtl.runner import get_build
    return get_build(load_config(), "verilator")
