"""One test body, every engine (PyMTL3's "one test, every level"): the unit programs of spec 7.1/7.2.

For each engine and config, every unit program must give
* the numpy reference outputs and fsim counters the program carries, and no leftover tokens;
* the functional model's final DRAM, counters and leftover tokens (the data oracle);
* for the timed engines, the cycle engine's retire records and cycle count (the RTL is held to the
  cycle engine record for record), and for the cycle engine its run invariants.

The functional and cycle engines run on every shipped preset; the RTL (marked ``rtl``) on the
default config under Verilator, all programs in one simulator process.  Icarus runs the same body
in ``tests/rtl/test_cosim_unit_programs.py`` as one batch test.
"""

from __future__ import annotations

import pytest

from engine_checks import cycle_invariants, same_run
from vtasim.hw.config import PRESETS, load_preset
from vtasim.sim.engines import run_many
from vtasim.sim.programs.unit import UNIT_PROGRAMS

NAMES = sorted(UNIT_PROGRAMS)
CASES = ([pytest.param(("functional", p), id=f"functional-{p}") for p in PRESETS]
         + [pytest.param(("cycle", p), id=f"cycle-{p}") for p in PRESETS]
         + [pytest.param(("rtl", "1x16x16"), id="rtl-verilator-1x16x16", marks=pytest.mark.rtl)])

_images: dict = {}
_runs: dict = {}


def images_of(preset: str) -> dict:
    if preset not in _images:
        cfg = load_preset(preset)
        _images[preset] = {name: UNIT_PROGRAMS[name](cfg) for name in NAMES}
    return _images[preset]


def runs_of(engine: str, preset: str) -> dict:
    """Every unit program's run on ``engine`` through :func:`vtasim.sim.engines.run_many` (the RTL as one batch,
    in one simulator process), once per process."""
    if (engine, preset) not in _runs:
        images = images_of(preset)
        opts = {"sim": "verilator", "errors": "return"} if engine == "rtl" else {}
        _runs[engine, preset] = dict(zip(NAMES, run_many(engine, [images[n] for n in NAMES], **opts)))
    return _runs[engine, preset]


@pytest.fixture(scope="module", params=CASES)
def case(request):
    return request.param


@pytest.mark.parametrize("name", NAMES)
def test_unit_program_on_every_engine(case, name):
    engine, preset = case
    image = images_of(preset)[name]
    result = runs_of(engine, preset)[name]
    if isinstance(result, BaseException):
        raise result
    assert image.expected and image.expected_counters
    for out, want in image.expected.items():
        assert result.outputs[out] == want, f"{engine}: output {out!r} differs from the numpy reference"
    assert result.counters == image.expected_counters
    assert result.leftover_tokens == {}
    same_run(image, runs_of("functional", preset)[name], result, timing=False)
    if engine == "cycle":
        cycle_invariants(image, result)
    if result.trace is not None and engine != "cycle":
        same_run(image, runs_of("cycle", preset)[name], result, timing=True)
