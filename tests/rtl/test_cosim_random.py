"""Random legal programs (vtasim.sim.programs.randprog): RTL vs cycle engine, identical bytes and retire records.

CI: 100 programs on the default config in one Verilator process.  ``slow``: 1,000 per preset."""

from __future__ import annotations


import pytest

from vtasim.hw.config import PRESETS, load_preset

pytestmark = pytest.mark.rtl
N_CI = 100
N_SLOW = 1000


def _campaign(cfg, seeds, sim="verilator"):
    """(number identical, failures as (seed, report)) - every failure names its seed."""
    from vtasim.sim.rtl import run_images
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.diff import compare
    from vtasim.sim.programs.randprog import generate
    images = [generate(cfg, s) for s in seeds]
    model = [cycle_run(im) for im in images]
    rtl = run_images(images, sim=sim, errors="return", max_cycles=[2 * m.cycles + 10_000 for m in model])
    failures = []
    for seed, image, exp, act in zip(seeds, images, model, rtl):
        if isinstance(act, BaseException):
            failures.append((seed, f"RTL error: {act}"))
            continue
        d = compare(exp, act, image, reproduce=f"vtasim fuzz --n 1 --seed {seed}")
        if not d.ok:
            failures.append((seed, d.report()))
        elif (act.counters, act.leftover_tokens) != (exp.counters, exp.leftover_tokens):
            failures.append((seed, f"counters/leftover tokens differ: rtl {act.counters} {act.leftover_tokens}, "
                                   f"cycle engine {exp.counters} {exp.leftover_tokens}"))
    return len(seeds) - len(failures), failures


def _assert_clean(cfg, failures, n):
    if failures:
        seed, report = failures[0]
        seeds = ", ".join(str(s) for s, _ in failures[:20])
        pytest.fail(f"{len(failures)} of {n} random programs diverged on {cfg.model} (seeds {seeds}); "
                    f"first (seed {seed}):\n{report}")


def test_random_programs_ci(cfg, verilator_build):
    seeds = list(range(1000, 1000 + N_CI))
    _, failures = _campaign(cfg, seeds)
    _assert_clean(cfg, failures, N_CI)


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_random_programs_per_preset(name):
    cfg = load_preset(name)
    seeds = list(range(20000, 20000 + N_SLOW))
    _, failures = _campaign(cfg, seeds)
    _assert_clean(cfg, failures, N_SLOW)


def test_fuzz_command_reports_seed_and_coverage(verilator_build, capsys, tmp_path):
    from vtasim.sim.cli import main
    rc = main(["fuzz", "--n", "8", "--seed", "77", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "seeds 77..84" in out and "seeds 77..84: 8 programs identical, 0 diverged" in out
    from vtasim.sim.programs.randprog import ALL_BINS
    assert f"of {len(ALL_BINS)} bins hit by 8 programs" in out and "op:GEMM" in out and "not hit:" in out


def test_random_programs_legacy_isa_on_icarus():
    """HW_VER 0.0.1 (2-bit memory_type: a STORE's OUT reads as 0): random programs, stores included,
    give the cycle engine's bytes and retire records on the RTL (Icarus: a small build)."""
    from vtasim.hw.config import load_config
    cfg = load_config().replace(HW_VER="0.0.1")
    seeds = list(range(3000, 3012))
    _, failures = _campaign(cfg, seeds, sim="icarus")
    _assert_clean(cfg, failures, len(seeds))
