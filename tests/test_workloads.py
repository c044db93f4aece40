"""ResNet-18 workload streams: correct bytes against the numpy conv reference on both engines, the
ideal GEMM uop counts of spec 7.3 at full size, and the peak memory of a full C2 run."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hw.config import load_config, load_preset
from hw.isa import OP_GEMM, decode_fields
from sim import functional
from sim.cycle import run_image
from sim.programs.resnet import RESNET18, conv_image, gemm_bound_image

# hardware spec 7.3, column "GEMM uops (ideal)"
SPEC_GEMM_UOPS = {"C2": 451_584, "C3": 225_792, "C4": 25_088, "C5": 451_584, "C6": 225_792,
                  "C7": 25_088, "C8": 451_584, "C9": 225_792, "C10": 25_088, "C11": 451_584}
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cfg():
    return load_config()


@pytest.mark.parametrize("layer", list(RESNET18))
def test_reduced_layer_matches_reference(cfg, layer):
    img = conv_image(cfg, layer, reduce=8)
    r = run_image(img)
    assert r.outputs["y"] == img.expected["y"]
    ref = functional.run_image(img)
    assert np.array_equal(r.dram, ref.dram) and r.counters == ref.counters
    c = RESNET18[layer].reduced(8)
    assert r.counters["gemm_counter"] == c.oh * c.ow * (c.cout // 16) * (c.cin // 16) * c.k * c.k
    assert r.leftover_tokens == {}
    assert r.cycles >= r.counters["gemm_counter"]


@pytest.mark.parametrize("layer", list(RESNET18))
def test_full_size_stream_has_the_ideal_gemm_count(cfg, layer):
    img = conv_image(cfg, layer)
    f = decode_fields(cfg, img.insn_bytes())
    g = (f["opcode"] == OP_GEMM) & (f["reset_reg"] == 0)
    n = f["iter_out"] * f["iter_in"] * (f["uop_end"] - f["uop_bgn"])
    assert int(n[g].sum()) == SPEC_GEMM_UOPS[layer]
    assert np.frombuffer(img.expected["y"], np.int8).max() > 0        # the reference is not all zeros


@pytest.mark.parametrize("preset", ["1x8x8", "2x16x16", "1x32x32"])
def test_layers_on_other_presets(preset):
    pcfg = load_preset(preset)
    for layer in ("C2", "C4", "C9"):
        img = conv_image(pcfg, layer, reduce=8)
        assert run_image(img).outputs["y"] == img.expected["y"], layer


def test_gemm_bound_stream(cfg):
    img = gemm_bound_image(cfg, gemms=4, repeat=32)
    r = run_image(img)
    assert r.outputs["y"] == img.expected["y"]
    assert r.counters["gemm_counter"] == 4 * 16 * 32 * 16
    # GEMM-bound: compute busy nearly all the time
    assert r.breakdown["compute"]["busy"] > 0.8 * r.cycles


def test_full_c2_peak_memory_under_1gb(tmp_path):
    code = (
        "import resource, json\n"
        "from hw.config import load_config\n"
        "from sim.programs.resnet import conv_image\n"
        "from sim.cycle import run_image\n"
        "img = conv_image(load_config(), 'C2')\n"
        "r = run_image(img)\n"
        "ok = r.outputs['y'] == img.expected['y']\n"
        "print(json.dumps({'ok': ok, 'cycles': r.cycles,"
        " 'maxrss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["ok"]
    assert doc["maxrss_kb"] * 1024 < 1 << 30, f"peak RSS {doc['maxrss_kb'] / 1024:.0f} MiB"


def test_cli_workload_then_run_cycle_json(tmp_path, capsys):
    from sim.cli import main
    assert main(["workload", "C4", "--reduce", "8", "--out", str(tmp_path / "c4")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "c4"), "--engine", "cycle", "--check", "--json",
                 "--trace", str(tmp_path / "t.csv"), "--perfetto", str(tmp_path / "p.json")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["check"]["ok"] and doc["cycles"] > doc["counters"]["gemm_counter"] > 0
    assert set(doc["breakdown"]) == {"fetch", "load", "compute", "store"}
    assert all(sum(b.values()) == doc["cycles"] for b in doc["breakdown"].values())
    assert doc["cycles_per_s"] > 0 and doc["wall_s"] > 0
    assert (tmp_path / "t.csv").stat().st_size > 0 and json.loads((tmp_path / "p.json").read_text())["traceEvents"]


def test_cli_workload_bad_reduce_is_one_line_error(tmp_path, capsys):
    from sim.cli import main
    assert main(["workload", "C2", "--reduce", "0", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "reduce = 0" in err
