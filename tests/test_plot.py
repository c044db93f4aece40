"""The timeline plot: its breakdown panel shows the breakdown table's numbers (busy without memory
wait), its legends sit outside the data, its title groups thousands; checked on the figure objects."""

import re

import numpy as np
import pytest

from vtasim.hw.config import load_config
from vtasim.sim.result import RetireRecord, RunResult
from vtasim.sim.trace import breakdown_table
from vtasim.waveforms.breakdown import BUCKETS

matplotlib = pytest.importorskip("matplotlib")
from vtasim.waveforms.plot import in_instruction_fraction, timeline_figure  # noqa: E402


def _fake_result(cycles=12_345):
    trace = [RetireRecord("load", 0, 0, 0, 10, 4_009, 0), RetireRecord("compute", 0, 1, 2, 4_010, 9_999, 0),
             RetireRecord("store", 0, 2, 1, 10_000, 12_300, 0)]
    bd = {"fetch": {"busy": 100, "mem_wait": 20, "token_wait": 0, "queue_stall": 0, "idle": cycles - 120},
          "load": {"busy": 2_500, "mem_wait": 1_500, "token_wait": 0, "queue_stall": 0, "idle": cycles - 4_000},
          "compute": {"busy": 5_990, "mem_wait": 0, "token_wait": 10, "queue_stall": 0, "idle": cycles - 6_000},
          "store": {"busy": 2_001, "mem_wait": 300, "token_wait": 5, "queue_stall": 0, "idle": cycles - 2_306}}
    return RunResult(engine="cycle", dram=None, counters={}, outputs={}, cycles=cycles, trace=trace, breakdown=bd)


def _table_percent(text: str) -> dict:
    """``{(module, bucket): percent}`` parsed from the breakdown table text."""
    lines = text.splitlines()
    buckets = lines[0].split()[1:]
    out = {}
    for line in lines[1:]:
        mod, *cells = line.split()
        for b, pct in zip(buckets, cells[1::2]):
            out[mod, b] = float(pct.rstrip("%"))
    return out


def _bars(ax) -> dict:
    """``{(module, bucket): width}`` of the breakdown panel's stacked bars."""
    mods = [t.get_text() for t in ax.get_yticklabels()]
    out = {}
    for container in ax.containers:
        for mod, patch in zip(mods, container.patches):
            out[mod, container.get_label()] = patch.get_width()
    return out


def _figure_checks(fig, result):
    import matplotlib.pyplot as plt
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        axes = fig.axes
        assert axes[0].get_title() == (f"cycle: {result.cycles:,} cycles, {len(result.trace):,} instructions")
        for ax in axes:
            assert any(t.get_text() for t in ax.get_xticklabels()), "x tick labels"
            assert any(t.get_text() for t in ax.get_yticklabels()), "y tick labels"
            leg = ax.get_legend()
            assert leg is not None
            lb, ab = leg.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert not lb.overlaps(ab), f"legend of {ax.get_ylabel()!r} overlaps its axes"
            assert fig.bbox.contains(lb.x1, lb.y1) and fig.bbox.contains(lb.x0, lb.y0), "legend cut off"
        cycle_ticks = [t.get_text() for t in axes[1].get_xticklabels() if t.get_text()]
        if result.cycles >= 10_000:                 # grouped thousands on the cycle axis
            assert any(re.fullmatch(r"\d{1,3}(,\d{3})+", t) for t in cycle_ticks), cycle_ticks
        bars = _bars(axes[2])
        table = _table_percent(breakdown_table(result.breakdown, result.cycles))
        assert set(bars) == set(table)
        for key, width in bars.items():
            assert width == pytest.approx(100 * result.breakdown[key[0]][key[1]] / result.cycles)
            assert round(width, 1) == pytest.approx(table[key])
        shown = {t.get_text() for t in axes[2].texts}
        assert f"{table['load', 'busy']:.1f}%" in shown
        return bars
    finally:
        plt.close(fig)


def test_synthetic_figure():
    r = _fake_result()
    bars = _figure_checks(timeline_figure(r), r)
    # the busy bar is busy alone; the load lane's instruction span (4000 cycles) also holds its mem wait
    assert bars["load", "busy"] == pytest.approx(100 * 2_500 / 12_345)
    assert np.mean(in_instruction_fraction(r.trace, r.cycles)["load"]) == pytest.approx(4_000 / 12_345, rel=1e-9)


def test_cycle_engine_figure():
    from vtasim.sim.cycle import run_image
    from vtasim.sim.programs.unit import build
    r = run_image(build("gemm", load_config()))
    assert r.breakdown["load"]["mem_wait"] > 0
    bars = _figure_checks(timeline_figure(r), r)
    spans = sum(x.end_cycle - x.start_cycle + 1 for x in r.trace if x.module == "load")
    assert spans == r.breakdown["load"]["busy"] + r.breakdown["load"]["mem_wait"]
    assert bars["load", "busy"] < 100 * spans / r.cycles


def test_rtl_like_result_without_breakdown_has_two_panels():
    import matplotlib.pyplot as plt
    r = _fake_result()
    r.breakdown = None
    fig = timeline_figure(r)
    try:
        assert len(fig.axes) == 2
        assert not re.search(r"busy", " ".join(t.get_text() for t in fig.axes[1].get_legend().get_texts()))
    finally:
        plt.close(fig)


def test_table_columns_are_the_buckets():
    r = _fake_result()
    assert breakdown_table(r.breakdown, r.cycles).splitlines()[0].split() == ["module", *BUCKETS]
