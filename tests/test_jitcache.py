"""The numba cache stamp of the cycle engine's compiled code covers the files compiled into it, so
an edit to the kernels or the layout constants cannot leave a stale event loop in the cache."""

import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vtasim.hw.config import load_config
from vtasim.sim.cycle import core, jitcache, kernels
from vtasim.sim.cycle.engine import warm_up
from vtasim.sim.programs.unit import UNIT_PROGRAMS


def test_core_stamp_covers_kernels(tmp_path, monkeypatch):
    loc = core.run_slice._cache._impl.locator
    assert isinstance(loc, jitcache._Stamped)
    assert isinstance(kernels.gemm_kernel._cache._impl.locator, jitcache._Stamped)
    before = loc.get_source_stamp()
    edited = tmp_path / "kernels.py"
    edited.write_bytes((jitcache._HERE / "kernels.py").read_bytes() + b"\n# edited\n")
    deps = tuple(edited if p.name == "kernels.py" else p for p in jitcache._DEPS)
    assert deps != jitcache._DEPS
    monkeypatch.setattr(jitcache, "_DEPS", deps)
    assert loc.get_source_stamp() != before
    assert loc.get_source_stamp()[0] == before[0]          # core.py itself is unchanged


# ---- the compile notice: on a miss of the on-disk cache only ------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _fresh_module(tmp_path, name):
    """Import ``name`` from ``tmp_path`` as a new module object (a new numba dispatcher each time)."""
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def test_compile_notice_on_cache_miss_only(tmp_path, monkeypatch):
    (tmp_path / "jit_probe_mod.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef probe(x):\n    return x * 3 + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cold = io.StringIO()
    with jitcache.compile_notice(cold) as heard:
        assert _fresh_module(tmp_path, "jit_probe_mod").probe(4) == 13
    assert heard.compiled
    lines = cold.getvalue().splitlines()
    assert lines[0] == jitcache.COMPILE_NOTE and lines[1].startswith("compiled the cycle engine in ")
    assert len(lines) == 2
    assert list((tmp_path / "__pycache__").glob("jit_probe_mod.probe-*.nbi"))      # numba saved it
    warm = io.StringIO()
    with jitcache.compile_notice(warm) as heard:        # new dispatcher, same source: loads from disk
        assert _fresh_module(tmp_path, "jit_probe_mod").probe(5) == 16
    assert not heard.compiled and warm.getvalue() == ""
    sys.modules.pop("jit_probe_mod", None)


def _run_cycle(img, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "run", str(img), "--engine", "cycle", "--check"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_cli_run_on_warm_cache_says_nothing(tmp_path):
    warm_up()                                   # this process compiled or loaded: the cache is on disk now
    img = UNIT_PROGRAMS["relu"](load_config()).save(tmp_path / "relu")
    p = _run_cycle(img)
    assert p.returncode == 0, p.stderr
    assert jitcache.COMPILE_NOTE not in p.stderr and "compiled the cycle engine" not in p.stderr


@pytest.mark.slow
def test_cli_run_on_empty_cache_announces_compile(tmp_path):
    img = UNIT_PROGRAMS["relu"](load_config()).save(tmp_path / "relu")
    p = _run_cycle(img, {"NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    assert p.returncode == 0, p.stderr
    assert p.stderr.count(jitcache.COMPILE_NOTE) == 1
    assert p.stderr.count("compiled the cycle engine in ") == 1
    assert list((tmp_path / "numba").rglob("*.nbi"))       # it compiled into the fresh location
