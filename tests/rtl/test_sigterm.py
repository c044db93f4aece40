"""An RTL run ended by SIGTERM removes its work directory and exits 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.rtl
REPO = Path(__file__).resolve().parents[2]


def test_sigterm_during_an_rtl_run_leaves_no_work_dir(cfg, verilator_build, tmp_path):
    from vtasim.sim.programs.synthetic import gemm_bound_image
    image = gemm_bound_image(cfg, gemms=128, repeat=256)          # ~8 M cycles: seconds on Verilator
    image.save(tmp_path / "long")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch))
    proc = subprocess.Popen([sys.executable, "-m", "vtasim.sim.cli", "run", str(tmp_path / "long"), "--engine", "rtl"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120                 # a safety bound against a hung test, not a speed check
        while not any(p.name.startswith("vtasim-rtl-") for p in scratch.iterdir()):
            assert proc.poll() is None, f"the run ended before it started simulating: {proc.communicate()}"
            assert time.monotonic() < deadline, "no RTL work directory appeared"
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("vtasim-rtl-")] == []
