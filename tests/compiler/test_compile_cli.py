"""``vtasim compile`` / ``vtasim tune`` end to end through the command line."""

import json
import re

import numpy as np

from vtasim.sim.cli import main


def _printed_fractions(text: str):
    m = re.search(r"^outputs: ([\d.]+) % at 127, ([\d.]+) % at (-?\d+), ([\d.]+) % between$", text, re.M)
    assert m, text
    return float(m.group(1)), int(m.group(3)), float(m.group(2)), float(m.group(4))


def _counted_fractions(image_dir, lo):
    from vtasim.sim.image import MemoryImage
    (data,) = MemoryImage.load(image_dir).expected.values()
    v = np.frombuffer(data, np.int8)
    return [round(100 * f, 1) for f in (np.mean(v == 127), np.mean(v == lo), np.mean((v > lo) & (v < 127)))]


def test_compile_then_run_check(tmp_path, capsys):
    out = tmp_path / "c8"
    assert main(["compile", "resnet18.C8", "--reduce", "2", "--out", str(out), "--dump-ir", str(tmp_path / "ir")]) == 0
    text = capsys.readouterr().out
    assert "knobs from TopHub (adapted to reduce=2)" in text and "replay: vtasim run" in text
    at_hi, lo, at_lo, between = _printed_fractions(text)      # the clip bounds of the expected output
    assert lo == 0 and [at_hi, at_lo, between] == _counted_fractions(out, 0)
    assert at_hi <= 10 and between >= 25
    dumps = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert dumps[0] == "00_input.txt" and "12_fold_uop_loop.txt" in dumps and "00_lowered.txt" in dumps
    assert main(["run", str(out), "--engine", "cycle", "--check"]) == 0
    assert main(["run", str(out), "--engine", "functional", "--check"]) == 0


def test_compile_tophub_default_and_knob_errors(tmp_path, capsys):
    assert main(["compile", "resnet18.C10", "--out", str(tmp_path / "c10")]) == 0
    assert "knobs from TopHub" in capsys.readouterr().out
    assert main(["compile", "gemm.32x64x48", "--out", str(tmp_path / "g")]) == 0
    at_hi, lo, at_lo, between = _printed_fractions(capsys.readouterr().out)    # no clip: the int8 range
    assert lo == -128 and [at_hi, at_lo, between] == _counted_fractions(tmp_path / "g", -128)
    rc = main(["compile", "resnet18.C10", "--knobs", '{"tile_h": [3, 3]}', "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "tile_h = [3, 3] is not a split" in err
    rc = main(["compile", "resnet18.C99", "--out", str(tmp_path / "y")])
    assert rc == 2 and "unknown workload 'resnet18.C99'" in capsys.readouterr().err


def test_tune_writes_a_log_that_compile_reads(tmp_path, capsys):
    log = tmp_path / "tune.jsonl"
    rc = main(["tune", "dense.16x64x64", "--trials", "6", "--jobs", "2", "--log", str(log), "--seed", "1"])
    text = capsys.readouterr().out
    assert rc == 0 and "tuned" in text and "fallback" in text
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 6 and len({json.dumps(r["knobs"], sort_keys=True) for r in records}) == 6
    best = min((r for r in records if r["cycles"] is not None), key=lambda r: r["cycles"])
    tuned_line = next(line for line in text.splitlines() if line.startswith("tuned"))
    assert f"{best['cycles']:,d}" in tuned_line
    out = tmp_path / "d"
    assert main(["compile", "dense.16x64x64", "--log", str(log), "--out", str(out)]) == 0
    assert f"({best['cycles']} cycles)" in capsys.readouterr().out
    from vtasim.sim.cycle import run_image
    from vtasim.sim.image import MemoryImage
    assert run_image(MemoryImage.load(out)).cycles == best["cycles"]


def test_demo_compiles_c8_and_reports_ideal_gemm_count(tmp_path, capsys):
    """The README's first command: compile, simulate on both engines, check, report."""
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "with TopHub knobs" in text and "+ >>13, +bias" in text
    at_hi, lo, at_lo, between = _printed_fractions(text)
    assert lo == 0 and [at_hi, at_lo, between] == _counted_fractions(out, 0)
    # spec 7.1: C8 = 14*14 output pixels x 9 taps x 16 x 16 channel blocks, every MAC tile once
    assert f"GEMM uops: {14 * 14 * 9 * 16 * 16}, ideal {14 * 14 * 9 * 16 * 16}" in text
    assert (out / "ir" / "12_fold_uop_loop.txt").is_file() and (out / "ir" / "00_lowered.txt").is_file()
    assert main(["run", str(out), "--engine", "cycle", "--check"]) == 0


def test_demo_on_a_small_preset_adapts_the_knobs(tmp_path, capsys):
    assert main(["demo", "--config", "config/presets/1x8x8.json", "--reduce", "2", "--out", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "TopHub adapted to 1x8_" in text and "all outputs match the numpy reference" in text
