"""Every timing key moved from its default changes the RTL exactly as it changes the cycle engine.

For each key of ``hw/timing.py`` its probe program (``tests/timing_conformance.py``) runs on a config
with the key moved: the cycle engine's timing differs from the default config's
(``tests/test_timing_table.py`` asserts that without a simulator), and the RTL built with that config
gives the same retire records, cycles and bytes (:func:`vtasim.sim.diff.compare`, the machinery of
``vtasim diff``) -- or, for ``TOKEN_QUEUE_DEPTH``, stops with a token overflow at the same cycle.

The keys run in :data:`~timing_conformance.GROUPS`, configs that move several at once: one Verilator
build per group, all of a group's probes in one simulator process, once per session.  The full
per-key set (each key alone: one build per key) is marked ``slow``.
"""

from __future__ import annotations

import pytest

from vtasim.hw.config import load_config
from vtasim.hw.timing import TIMING_KEY_NAMES
from vtasim.sim.engines import run_many
from vtasim.sim.errors import RtlTokenOverflow
from timing_conformance import GROUPS, cycle_run, group_config, moved_config, outcome, probe_image

pytestmark = pytest.mark.rtl
SIM = "verilator"

_runs: dict = {}


def rtl_runs(cfg, keys) -> dict:
    """``{key: (image, cycle result or error, RTL result or error)}`` of the probes of ``keys`` on
    ``cfg``: one run_many batch per config, once per session."""
    if cfg not in _runs:
        images = {k: probe_image(k, cfg) for k in keys}
        acts = run_many("rtl", list(images.values()), sim=SIM, errors="return")
        _runs[cfg] = {k: (img, cycle_run(img), act) for (k, img), act in zip(images.items(), acts)}
    return _runs[cfg]


def check_key(key, cfg, keys, same_run):
    image, exp, act = rtl_runs(cfg, keys)[key]
    default = outcome(cycle_run(probe_image(key, load_config())))
    assert outcome(exp) != default, f"{key}: the cycle engine's timing of the probe did not move"
    if isinstance(exp, BaseException):                    # TOKEN_QUEUE_DEPTH: where the push overflows
        assert isinstance(act, RtlTokenOverflow), f"{key}: the cycle engine stopped with {exp}; the RTL: {act!r}"
        assert outcome(act) == outcome(exp)
        return
    same_run(image, exp, act, timing=True)                # records, cycles, DRAM, outputs, counters


@pytest.mark.parametrize("group", [pytest.param(g, id="+".join(g)) for g in GROUPS])
def test_grouped_keys_move_the_rtl_as_the_cycle_engine(group, same_run):
    cfg = group_config(group)
    for key in group:
        check_key(key, cfg, group, same_run)


@pytest.mark.slow
@pytest.mark.parametrize("key", TIMING_KEY_NAMES)
def test_each_key_alone_moves_the_rtl_as_the_cycle_engine(key, same_run):
    check_key(key, moved_config(key), (key,), same_run)
