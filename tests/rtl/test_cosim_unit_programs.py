"""Every unit program of the foundation issue on Icarus: RTL vs cycle engine, same bytes and same
retire records, all programs in one simulator process.  Verilator runs them in the engine-equivalence
body of ``tests/test_engines.py`` (which also holds the RTL's counters to the functional model's)."""

from __future__ import annotations

import pytest

from vtasim.sim.programs.unit import UNIT_PROGRAMS

pytestmark = pytest.mark.rtl
NAMES = sorted(UNIT_PROGRAMS)
# Icarus runs ~2k cycles/s on this design: the two 256^3 blocked GEMMs (~200k cycles each, minutes)
# run on Icarus only in the slow set; on Verilator everything runs in the fast set.
ICARUS_SLOW = [n for n in NAMES if n.startswith("hw_blocked_gemm")]
ICARUS_FAST = [n for n in NAMES if n not in ICARUS_SLOW]


@pytest.fixture(scope="module")
def images(cfg):
    return {name: UNIT_PROGRAMS[name](cfg) for name in NAMES}


@pytest.fixture(scope="module")
def cycle_runs(images):
    from vtasim.sim.cycle import run_image
    return {name: run_image(im) for name, im in images.items()}


def _rtl_runs(images, sim, names):
    from vtasim.sim.rtl import run_images
    return dict(zip(names, run_images([images[n] for n in names], sim=sim, errors="return")))


def test_unit_programs_icarus(images, cycle_runs, icarus_build, same_run):
    """One test for the whole Icarus batch (a parametrized test would run the batch once per
    pytest-xdist worker); every failing program is named."""
    runs = _rtl_runs(images, "icarus", ICARUS_FAST)
    failures = []
    for name in ICARUS_FAST:
        try:
            same_run(images[name], cycle_runs[name], runs[name])
        except Exception as exc:     # noqa: BLE001 - collected (assertions included), then reported
            failures.append(f"{name}: {exc}")
    assert not failures, f"{len(failures)} of {len(ICARUS_FAST)} unit programs differ on Icarus:\n" + \
        "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("name", ICARUS_SLOW)
def test_unit_program_icarus_slow(name, images, cycle_runs, icarus_build, same_run):
    same_run(images[name], cycle_runs[name], _rtl_runs(images, "icarus", [name])[name])
