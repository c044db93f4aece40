"""Every unit program of the foundation issue: RTL vs cycle engine, same bytes and same retire
records on Verilator; same on Icarus.  Each simulator runs all programs in one process."""

from __future__ import annotations

import pytest

from sim.unit_programs import UNIT_PROGRAMS

pytestmark = pytest.mark.rtl
NAMES = sorted(UNIT_PROGRAMS)


@pytest.fixture(scope="module")
def images(cfg):
    return {name: UNIT_PROGRAMS[name](cfg) for name in NAMES}


@pytest.fixture(scope="module")
def cycle_runs(images):
    from sim.cycle import run_image
    return {name: run_image(im) for name, im in images.items()}


def _rtl_runs(images, sim):
    from hw.cosim import run_images
    return dict(zip(NAMES, run_images([images[n] for n in NAMES], sim=sim, errors="return")))


@pytest.fixture(scope="module")
def verilator_runs(images, verilator_build):
    return _rtl_runs(images, "verilator")


@pytest.fixture(scope="module")
def icarus_runs(images, icarus_build):
    return _rtl_runs(images, "icarus")


@pytest.mark.parametrize("name", NAMES)
def test_unit_program_verilator(name, images, cycle_runs, verilator_runs, same_run):
    same_run(images[name], cycle_runs[name], verilator_runs[name])


@pytest.mark.parametrize("name", NAMES)
def test_unit_program_icarus(name, images, cycle_runs, icarus_runs, same_run):
    same_run(images[name], cycle_runs[name], icarus_runs[name])


def test_rtl_counters_match_functional(images, verilator_runs):
    """Counters of the rtl result (from the stream) equal the functional model's (counted as it runs)."""
    from sim.functional import run_image
    for name in NAMES:
        assert verilator_runs[name].counters == run_image(images[name]).counters, name
