"""Timeline plot of a retire trace (cycle engine or RTL), as PNG.

Three panels: one lane per module (load, compute, store) with a bar per instruction from its start
to its end cycle, coloured by opcode; the share of each window of the run that each module spends
inside an instruction (busy and waiting for memory together: an instruction's span holds both); and,
when the run has a breakdown (the cycle engine), each module's cycles by bucket of docs/timing.md 8,
the numbers of the breakdown table (:mod:`vtasim.waveforms.breakdown`).  Legends sit outside the axes::

    >>> plot_timeline(result, "timeline.png")      # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.hw.isa import MODULE_NAMES, OPCODE_NAMES
from vtasim.hw.outfiles import open_out
from vtasim.waveforms.breakdown import BUCKETS, share_text, shares

__all__ = ["LEGEND_OUTSIDE", "in_instruction_fraction", "timeline_figure", "plot_timeline"]

_COLOURS = {0: "tab:blue", 1: "tab:green", 2: "tab:red", 3: "tab:gray", 4: "tab:orange"}
_BUCKET_COLOURS = {"busy": "tab:green", "mem_wait": "tab:orange", "token_wait": "tab:purple",
                   "queue_stall": "tab:red", "idle": "0.85"}
LEGEND_OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": 8}
"""``ax.legend(**LEGEND_OUTSIDE)``: the legend right of the axes, clear of the data (every vtasim plot)."""


def in_instruction_fraction(trace, cycles: int, bins: int = 100) -> dict:
    """``{module: array}``: per window of ``bins`` equal windows of ``[0, cycles)``, the fraction of its
    cycles the module spends inside an instruction's span (busy + mem_wait of docs/timing.md 8)."""
    cycles = max(int(cycles), 1)
    edges = np.linspace(0, cycles, bins + 1)
    out = {}
    for name in MODULE_NAMES:
        inside = np.zeros(bins)
        for r in trace:
            if r.module != name:
                continue
            s, e = r.start_cycle, r.end_cycle + 1
            inside += np.clip(np.minimum(edges[1:], e) - np.maximum(edges[:-1], s), 0, None)
        out[name] = inside / np.diff(edges)
    return out


def _lanes(ax, trace, max_bars: int) -> None:
    step = max(1, len(trace) // max_bars)        # keep huge traces drawable; the other panels are exact
    handles = {}                                 # one legend entry per opcode
    for lane, name in enumerate(MODULE_NAMES):
        recs = [r for r in trace if r.module == name][::step]
        for op in sorted({r.opcode for r in recs}):
            bars = [(r.start_cycle, r.end_cycle - r.start_cycle + 1) for r in recs if r.opcode == op]
            h = ax.broken_barh(bars, (lane - 0.4, 0.8), color=_COLOURS.get(op, "k"))
            handles.setdefault(OPCODE_NAMES.get(op, str(op)), h)
    ax.set_yticks(range(len(MODULE_NAMES)), MODULE_NAMES)
    ax.set_ylim(-0.6, len(MODULE_NAMES) - 0.4)
    if handles:
        ax.legend(handles.values(), handles.keys(), title="opcode", **LEGEND_OUTSIDE)


def _windows(ax, trace, cycles: int) -> None:
    frac = in_instruction_fraction(trace, cycles)
    edges = np.linspace(0, cycles, len(next(iter(frac.values()))) + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    for name, f in frac.items():
        ax.plot(centres, f * 100, label=name)
    ax.set_ylabel("in an instruction %\n(busy + mem wait)", fontsize=8)
    ax.set_xlabel("cycle")
    ax.set_ylim(0, 105)
    ax.legend(**LEGEND_OUTSIDE)


def _buckets(ax, breakdown: dict, cycles: int) -> None:
    rows = shares(breakdown, cycles)
    mods = list(rows)
    left = np.zeros(len(mods))
    for b in BUCKETS:
        pct = np.array([rows[m][b][1] for m in mods])
        ax.barh(range(len(mods)), pct, left=left, color=_BUCKET_COLOURS[b], label=b, height=0.7)
        for y, (x0, w) in enumerate(zip(left, pct)):
            if w >= 7:
                ax.text(x0 + w / 2, y, share_text(w), ha="center", va="center", fontsize=7)
        left += pct
    ax.set_yticks(range(len(mods)), mods)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the run's cycles (the breakdown table; busy excludes mem wait)")
    ax.legend(**LEGEND_OUTSIDE)


def timeline_figure(result, title: str | None = None, max_bars: int = 20000):
    """The matplotlib figure of :func:`plot_timeline` (the caller closes it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    trace = list(result.trace or ())
    cycles = int(result.cycles or (max((r.end_cycle for r in trace), default=0) + 1))
    breakdown = getattr(result, "breakdown", None)
    ratios = [2, 1] + ([1.2] if breakdown else [])
    fig = plt.figure(figsize=(12, 2.2 * sum(ratios)), layout="constrained")
    axes = fig.subplots(len(ratios), 1, gridspec_kw={"height_ratios": ratios})
    _lanes(axes[0], trace, max_bars)
    axes[1].sharex(axes[0])
    _windows(axes[1], trace, cycles)
    axes[0].set_xlim(0, cycles)
    axes[0].xaxis.set_major_formatter(lambda x, pos: f"{x:,.0f}")      # cycles with thousands separators
    axes[0].set_title(title or f"{result.engine}: {cycles:,} cycles, {len(trace):,} instructions")
    if breakdown:
        _buckets(axes[2], breakdown, cycles)
    return fig


def plot_timeline(result, path, title: str | None = None, max_bars: int = 20000) -> Path:
    """PNG with the module timeline, the in-instruction share per window and the cycle breakdown."""
    import matplotlib.pyplot as plt
    fig = timeline_figure(result, title, max_bars)
    path = Path(path)
    with open_out(path, "wb", "timeline plot") as f:
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)
    return path
