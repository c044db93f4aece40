"""The GEMM-bound synthetic stream, the peak memory of a full compiled C2 run, and the ``workload`` /
``compile`` + ``run --json`` command path."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vtasim.hw.config import load_config
from vtasim.sim.cycle import run_image
from vtasim.sim.programs.synthetic import gemm_bound_image

REPO = Path(__file__).resolve().parent.parent


def test_gemm_bound_stream():
    img = gemm_bound_image(load_config(), gemms=4, repeat=32)
    r = run_image(img)
    assert r.outputs["y"] == img.expected["y"]
    assert r.counters["gemm_counter"] == 4 * 16 * 32 * 16
    # GEMM-bound: compute busy nearly all the time
    assert r.breakdown["compute"]["busy"] > 0.8 * r.cycles


def test_full_c2_peak_memory_under_1gb():
    code = (
        "import resource, json\n"
        "from vtasim.hw.config import load_config\n"
        "from vtasim.compiler.ops import compile_workload\n"
        "from vtasim.sim.cycle import run_image\n"
        "img = compile_workload('resnet18.C2', load_config()).image\n"
        "r = run_image(img)\n"
        "ok = r.outputs['res'] == img.expected['res']\n"
        "print(json.dumps({'ok': ok, 'cycles': r.cycles,"
        " 'maxrss_kb': int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1])}))\n")
    # compile the numba kernels into the on-disk cache first, in another process: the bound is about
    # the run, not about LLVM compiling the engine (which a cold cache or another worker's fresh
    # cache write would otherwise add to the peak)
    subprocess.run([sys.executable, "-c", "from vtasim.sim.cycle import engine; engine.warm_up()"], cwd=REPO,
                   capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["ok"]
    assert doc["maxrss_kb"] * 1024 < 1 << 30, f"peak RSS {doc['maxrss_kb'] / 1024:.0f} MiB"


def test_cli_compile_then_run_cycle_json(tmp_path, capsys):
    from vtasim.sim.cli import main
    assert main(["compile", "resnet18.C4", "--reduce", "8", "--out", str(tmp_path / "c4")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "c4"), "--engine", "cycle", "--check", "--json",
                 "--trace", str(tmp_path / "t.csv"), "--perfetto", str(tmp_path / "p.json")]) == 0
    doc = json.loads(capsys.readouterr().out)
    from vtasim.sim.functional import run_image as functional_run
    from vtasim.sim.image import MemoryImage
    from vtasim.sim.trace import read_csv
    image = MemoryImage.load(tmp_path / "c4")
    ref = run_image(image)                                   # the same image through the API
    assert doc["check"]["ok"] and doc["cycles"] == ref.cycles and doc["breakdown"] == ref.breakdown
    assert doc["counters"] == functional_run(image).counters  # the functional model counts as it runs
    assert set(doc["breakdown"]) == {"fetch", "load", "compute", "store"}
    assert all(sum(b.values()) == doc["cycles"] for b in doc["breakdown"].values())
    assert doc["cycles_per_s"] == pytest.approx(doc["cycles"] / doc["wall_s"])
    assert read_csv(tmp_path / "t.csv") == list(ref.trace)
    events = json.loads((tmp_path / "p.json").read_text())["traceEvents"]
    spans = sorted((e["args"]["program_index"], e["ts"], e["dur"]) for e in events if "program_index" in e.get("args", {}))
    assert spans == sorted((r.program_index, r.start_cycle, r.end_cycle - r.start_cycle + 1) for r in ref.trace)


def test_cli_workload_names_the_compiler_for_resnet_layers(tmp_path, capsys):
    from vtasim.sim.cli import main
    assert main(["workload", "gemm-bound", "--out", str(tmp_path / "gb")]) == 0
    assert main(["run", str(tmp_path / "gb"), "--engine", "cycle", "--check"]) == 0
    capsys.readouterr()
    assert main(["workload", "C2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "vtasim compile resnet18.C2" in err
