"""Assertions the engine tests share: two runs of one image are the same run; a cycle run is well formed.

* :func:`same_run`: identical DRAM, outputs, counters and leftover tokens, the image's numpy
  reference outputs, and (``timing=True``) identical retire records and cycles, through
  :func:`vtasim.sim.diff.compare` and then the raw facts it summarises.
* :func:`cycle_invariants`: the run invariants of the cycle engine.

``tests/conftest.py`` exposes :func:`same_run` as the ``same_run`` fixture for every test directory.
"""

from __future__ import annotations

import numpy as np

from vtasim.hw.isa import OP_GEMM
from vtasim.sim.program import load_program

__all__ = ["same_run", "cycle_invariants", "gemm_uops"]


def same_run(image, expected, actual, timing=True):
    """Assert identical bytes (and, with ``timing``, identical retire records and cycles)."""
    from vtasim.sim.diff import compare
    if isinstance(actual, BaseException):
        raise actual
    d = compare(expected, actual, image, timing=timing)
    assert d.ok, "\n" + d.report()
    # Belt and braces next to the diff: the raw facts the diff summarises.
    assert np.array_equal(np.asarray(expected.dram), np.asarray(actual.dram)), \
        f"DRAM differs at bytes {np.flatnonzero(np.asarray(expected.dram) != np.asarray(actual.dram))[:8].tolist()}"
    assert actual.outputs == expected.outputs
    for name, data in image.expected.items():
        assert actual.outputs[name] == data, f"output {name!r} differs from the numpy reference"
    if timing:
        assert list(actual.trace) == list(expected.trace)
        assert actual.cycles == expected.cycles
    # The rtl result derives these from the stream; the models count them as they run.
    assert actual.counters == expected.counters
    assert actual.leftover_tokens == expected.leftover_tokens
    return d


def gemm_uops(image, result) -> int:
    """GEMM uops executed (reset ones included), from the decoded stream of retired instructions."""
    f = load_program(image).fields
    g = f["opcode"] == OP_GEMM
    n = f["iter_out"] * f["iter_in"] * np.maximum(0, f["uop_end"] - f["uop_bgn"])
    return int(n[g].sum())


def cycle_invariants(image, result):
    """What every cycle-engine run satisfies (docs/timing.md): cycles >= GEMM uops, the breakdown of each
    module sums to the cycles, one record per instruction in end order, a second run is identical."""
    from vtasim.sim.cycle import run_image
    assert result.cycles >= gemm_uops(image, result)
    for module, buckets in result.breakdown.items():
        assert sum(buckets.values()) == result.cycles, module
    assert len(result.trace) == image.insn_count
    ends = [(r.end_cycle, ("load", "compute", "store").index(r.module)) for r in result.trace]
    assert ends == sorted(ends) and len(set(ends)) == len(ends)
    assert result.trace[-1].end_cycle == result.cycles - 1
    for r in result.trace:
        assert r.start_cycle < r.end_cycle
        assert r.start_cycle > result.dispatch_cycle[r.program_index]
    again = run_image(image)
    assert again.trace == result.trace and again.breakdown == result.breakdown
