"""The built wheel is a working install: it carries ``config/`` and ``vtasim demo`` runs from it.

A copy of the source tree is built into a wheel (no build isolation, so no network: setuptools comes
from the dev extra), installed into a fresh virtual environment that sees the packages of the
interpreter running the tests (numpy/numba/matplotlib, through a ``.pth`` line naming that
interpreter's site-packages, so it works from a venv and from a system Python alike) but finds the
wheel's own copy of vtasim first, and ``vtasim demo`` runs there from an unrelated directory.  The reference: the files the wheel must contain, and the demo's own
check of its outputs against numpy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", "build", "dist", "runs", "*.egg-info", ".ruff_cache",
                                ".pytest_cache", "sim_build")


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_wheel_ships_config_and_runs_the_demo(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)])
    (wheel,) = dist.glob("vtasim-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # One top-level name in site-packages: the vtasim package (and the wheel's metadata).
    tops = {n.split("/")[0] for n in names}
    assert tops == {"vtasim", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, sorted(tops)
    shipped = {"vtasim/config/vta_config.json", "vtasim/hw/rtl/tb/tb_top.v", "vtasim/hw/rtl/vta_top.v",
               "vtasim/hw/rtl/tb/verilator_main.cpp"}
    shipped |= {f"vtasim/compiler/frontend/models/digits_{k}.onnx" for k in ("float", "int8_qdq", "int8_qop")}
    shipped |= {f"vtasim/config/presets/{p.name}" for p in (ROOT / "config" / "presets").glob("*.json")}
    # Every Python module of the tree is in the wheel (pyproject lists the packages one by one).
    shipped |= {f"vtasim/{p.relative_to(ROOT).as_posix()}" for top in ("hw", "sim", "compiler", "waveforms")
                for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts}
    assert shipped <= names, f"missing from the wheel: {sorted(shipped - names)}"
    assert not [n for n in names if "__pycache__" in n]

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    # The running interpreter's packages (a venv's own, not its base's), after the new venv's own
    # site-packages. A plain path line: .pth files in that directory (an editable vtasim) stay unread.
    outer = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    inner = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(inner) / "outer_packages.pth").write_text("".join(f"{d}\n" for d in outer))
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
          "--ignore-installed", str(wheel)])
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    where = _run([py, "-c", "import vtasim.hw.config as c; print(c.__file__); print(c.default_config_path())"],
                 cwd=work, env=env).stdout.split()
    site = venv / "lib"
    assert all(Path(p).is_relative_to(site) for p in where), f"not the installed copy: {where}"
    # No pyproject.toml beside an installed wheel: the version and the extras come from its metadata.
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _run([venv / "bin" / "vtasim", "--version"], cwd=work, env=env).stdout.strip() == \
        f"vtasim {project['version']}"
    facts = _run([py, "-c", "import vtasim.sim.install as i; print(i.extra_of('sklearn'), i.extra_of('distributed'), "
                  "i.extra_of('cocotb_tools'), i.extra_of('matplotlib'), sorted(i.extras()))"],
                 cwd=work, env=env).stdout.strip()
    assert facts == f"onnx scale rtl plot {sorted(project['optional-dependencies'])}", facts
    demo = _run([venv / "bin" / "vtasim", "demo", "--out", str(work / "demo")], cwd=work, env=env)
    assert "demo: all outputs match the numpy reference" in demo.stdout, demo.stdout
