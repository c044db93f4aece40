"""Timeline and utilisation plots of a retire trace (cycle engine or RTL), as PNG.

The timeline draws one lane per module (load, compute, store) with a bar per instruction from its
start to its end cycle, coloured by opcode; the utilisation panel shows each module's busy fraction
in windows of the run::

    >>> plot_timeline(result, "timeline.png")      # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hw.isa import MODULE_NAMES, OPCODE_NAMES
from hw.outfiles import open_out

__all__ = ["busy_fraction", "plot_timeline"]

_COLOURS = {0: "tab:blue", 1: "tab:green", 2: "tab:red", 3: "tab:gray", 4: "tab:orange"}


def busy_fraction(trace, cycles: int, bins: int = 100) -> dict:
    """``{module: array of busy fraction per window}`` over ``bins`` equal windows of ``[0, cycles)``."""
    cycles = max(int(cycles), 1)
    edges = np.linspace(0, cycles, bins + 1)
    out = {}
    for name in MODULE_NAMES:
        busy = np.zeros(bins)
        for r in trace:
            if r.module != name:
                continue
            s, e = r.start_cycle, r.end_cycle + 1
            overlap = np.clip(np.minimum(edges[1:], e) - np.maximum(edges[:-1], s), 0, None)
            busy += overlap
        out[name] = busy / np.diff(edges)
    return out


def plot_timeline(result, path, title: str | None = None, max_bars: int = 20000) -> Path:
    """PNG with the module timeline (top) and utilisation per window (bottom)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    trace = list(result.trace or ())
    cycles = int(result.cycles or (max((r.end_cycle for r in trace), default=0) + 1))
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(12, 5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    step = max(1, len(trace) // max_bars)        # keep huge traces drawable; the util panel is exact
    # One legend entry per opcode.
    handles = {}
    for lane, name in enumerate(MODULE_NAMES):
        recs = [r for r in trace if r.module == name][::step]
        for op in sorted({r.opcode for r in recs}):
            bars = [(r.start_cycle, r.end_cycle - r.start_cycle + 1) for r in recs if r.opcode == op]
            h = ax.broken_barh(bars, (lane - 0.4, 0.8), color=_COLOURS.get(op, "k"))
            handles.setdefault(OPCODE_NAMES.get(op, str(op)), h)
    ax.set_yticks(range(len(MODULE_NAMES)), MODULE_NAMES)
    ax.legend(handles.values(), handles.keys(), loc="upper right", fontsize=8)
    ax.set_title(title or f"{result.engine}: {cycles} cycles, {len(trace)} instructions")
    util = busy_fraction(trace, cycles)
    centres = np.linspace(0, cycles, len(next(iter(util.values()))) + 1)
    centres = (centres[:-1] + centres[1:]) / 2
    for name, frac in util.items():
        ax2.plot(centres, frac * 100, label=f"{name} ({100 * frac.mean():.0f}% busy)")
    ax2.set_ylabel("busy %")
    ax2.set_xlabel("cycle")
    ax2.set_ylim(0, 105)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    with open_out(path, "wb", "timeline plot") as f:
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)
    return path
