"""The per-module cycle breakdown of docs/timing.md 8 as shares of the run.

One definition for every reader: the text table of ``vtasim run``/``demo``
(:func:`vtasim.sim.trace.breakdown_table`) and the timeline plot (:mod:`vtasim.waveforms.plot`) both take the
engine's ``breakdown`` (module -> bucket -> cycles) through :func:`shares`, so "busy" is the same
number everywhere: cycles executing and not waiting for memory (``mem_wait`` is its own bucket)::

    >>> shares({"load": {"busy": 30, "mem_wait": 10, "token_wait": 0, "queue_stall": 0, "idle": 60}}, 100)
    {'load': {'busy': (30, 30.0), 'mem_wait': (10, 10.0), 'token_wait': (0, 0.0), 'queue_stall': (0, 0.0), 'idle': (60, 60.0)}}
"""

from __future__ import annotations

__all__ = ["BUCKETS", "shares", "share_text"]

BUCKETS = ("busy", "mem_wait", "token_wait", "queue_stall", "idle")


def shares(breakdown: dict, cycles: int) -> dict:
    """``{module: {bucket: (cycles, percent of the run)}}`` in :data:`BUCKETS` order."""
    whole = max(int(cycles), 1)
    return {mod: {b: (int(row[b]), 100 * int(row[b]) / whole) for b in BUCKETS} for mod, row in breakdown.items()}


def share_text(percent: float) -> str:
    """A share as the table prints it (one decimal)."""
    return f"{percent:.1f}%"
