"""``vtasim fuzz`` at scale: batches generated, run and dropped one after another; a
seed that fails is reported and the campaign goes on.

The RTL is replaced by a stand-in that returns the cycle engine's own result (the reference), so
these run without a simulator; tests/rtl/test_cosim_random.py runs the real thing."""

from __future__ import annotations

import gc
import weakref

import pytest

import vtasim.sim.programs.randprog as randprog
import vtasim.sim.rtl as rtl_pkg
from vtasim.sim.cli import main
from vtasim.sim.errors import SimulatorError


@pytest.fixture
def fake_rtl(monkeypatch):
    """run_images stand-in: the cycle engine's result per image; records each batch's size and watchdogs.
    ``wrong`` seeds (by image identity) get their last retire record dropped (a divergence)."""
    from vtasim.sim.cycle import run_image
    calls = {"sizes": [], "limits": [], "wrong": set(), "crash_batch": None}

    def run_images(images, sim="verilator", errors="raise", max_cycles=None, **kw):
        calls["sizes"].append(len(images))
        calls["limits"].append(list(max_cycles))
        if calls["crash_batch"] == len(calls["sizes"]):
            raise SimulatorError("verilator stopped before job 0 finished; simulator log x")
        out = []
        for im in images:
            r = run_image(im)
            r.engine = "rtl"
            if id(im) in calls["wrong"]:
                r.trace = r.trace[:-1]
            out.append(r)
        return out
    monkeypatch.setattr(rtl_pkg, "run_images", run_images)
    return calls


@pytest.fixture
def tracked(monkeypatch):
    """Wrap the generator: how many generated images are alive at each generation, and the images by seed."""
    real = randprog.generate
    state = {"alive": 0, "peak": 0, "by_seed": {}, "fail": set()}

    def gone():
        state["alive"] -= 1

    def generate(cfg, seed, **knobs):
        if seed in state["fail"]:
            raise ValueError(f"generator bug on seed {seed}")
        gc.collect()
        im = real(cfg, seed, **knobs)
        state["alive"] += 1
        state["peak"] = max(state["peak"], state["alive"])
        weakref.finalize(im, gone)
        state["by_seed"][seed] = weakref.ref(im)
        return im
    monkeypatch.setattr(randprog, "generate", generate)
    return state


def test_fuzz_runs_in_batches_with_bounded_live_images(fake_rtl, tracked, capsys):
    """7 programs in batches of 3: the RTL gets 3, 3, 1 images; at most one batch (plus none of the
    previous one) is alive while the next is generated; every watchdog is the model's count + margin."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.rtl import watchdog_for
    assert main(["fuzz", "--n", "7", "--seed", "40", "--batch", "3"]) == 0
    out = capsys.readouterr().out
    assert fake_rtl["sizes"] == [3, 3, 1]
    assert tracked["peak"] <= 3, tracked["peak"]
    assert "seeds 40..46: 7 programs identical, 0 diverged" in out and "in batches of 3" in out
    from vtasim.hw.config import load_config
    cfg = load_config()
    want = [watchdog_for(run_image(randprog.generate(cfg, s)).cycles) for s in range(40, 47)]
    assert [m for batch in fake_rtl["limits"] for m in batch] == want


def test_fuzz_goes_on_after_a_bad_seed(fake_rtl, tracked, capsys):
    """Seed 42's generator fails: it is reported in one line with a reproduce command, the other six run
    (the RTL sees 2 + 3 + 1 images), the summary counts it, exit 1."""
    tracked["fail"] = {42}
    assert main(["fuzz", "--n", "7", "--seed", "40", "--batch", "3"]) == 1
    out = capsys.readouterr().out
    assert fake_rtl["sizes"] == [2, 3, 1]
    line = next(ln for ln in out.splitlines() if ln.startswith("--- seed 42"))
    assert "ERROR ValueError: generator bug on seed 42" in line and "vtasim fuzz --n 1 --seed 42" in line
    assert "6 programs identical, 0 diverged, 1 could not be generated or modelled" in out
    assert "failing seeds 42" in out


def test_fuzz_reports_a_divergence_and_a_crashed_batch_and_goes_on(fake_rtl, tracked, monkeypatch, capsys, tmp_path):
    """Batch 2 crashes the simulator (its 2 seeds fail with the error), seed 45 diverges (saved,
    reported); the other seeds still run and match."""
    real = randprog.generate

    def generate(cfg, seed, **knobs):
        im = real(cfg, seed, **knobs)
        if seed == 45:
            fake_rtl["wrong"].add(id(im))
        return im
    monkeypatch.setattr(randprog, "generate", generate)
    fake_rtl["crash_batch"] = 2
    assert main(["fuzz", "--n", "6", "--seed", "40", "--batch", "2", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert fake_rtl["sizes"] == [2, 2, 2]
    assert "--- seed 42: MISMATCH" in out and "--- seed 43: MISMATCH" in out
    assert out.count("RTL error: verilator stopped before job 0 finished") == 2
    assert "--- seed 45: MISMATCH" in out and (tmp_path / "fuzz_seed45" / "image.json").is_file()
    assert "3 programs identical, 3 diverged" in out and "failing seeds 42, 43, 45" in out


def test_fuzz_batch_and_max_cycles_options(fake_rtl, capsys):
    assert main(["fuzz", "--n", "3", "--seed", "1", "--max-cycles", "12345"]) == 0
    assert fake_rtl["limits"] == [[12345] * 3]
    capsys.readouterr()
    assert main(["fuzz", "--n", "3", "--batch", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--batch 0" in err[0]


def test_fuzz_names_each_batchs_seed_range(fake_rtl, tracked, capsys):
    """7 programs in batches of 3: one line per batch naming its seeds (a single seed as 'seed 46'),
    then the campaign's range; the counts per batch add up to the campaign's."""
    tracked["fail"] = {44}
    assert main(["fuzz", "--n", "7", "--seed", "40", "--batch", "3"]) == 1
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("seed")]
    assert lines[:3] == ["seeds 40..42: 3 programs identical, 0 diverged",
                         "seeds 43..45: 2 programs identical, 0 diverged, 1 could not be generated or modelled",
                         "seed 46: 1 program identical, 0 diverged"]
    assert lines[3].startswith("seeds 40..46: 6 programs identical, 0 diverged, 1 could not be generated")
    assert len(lines) == 4
