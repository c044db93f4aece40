"""What every engine (functional, cycle, rtl) returns from ``run_image``: :class:`RunResult`.

Fields every engine fills: ``engine``, ``dram``, ``counters``, ``outputs``, ``leftover_tokens``,
``wall_s``.  The timed engines (cycle, rtl) add ``cycles``, ``trace`` and ``dispatch_cycle``; the
others stay None where an engine has no such fact (the functional model has no cycles, the RTL no
breakdown), so a reader tests for None rather than for a key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["COUNTER_NAMES", "RetireRecord", "RunResult"]

# fsim's counter names (hardware spec 6), in fsim's order.
COUNTER_NAMES = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                 "out_store_nbytes", "gemm_counter", "alu_counter")


@dataclass(frozen=True)
class RetireRecord:
    """The canonical retire record of docs/timing.md section 9."""

    module: str            # "load" | "compute" | "store"
    index_in_module: int
    program_index: int
    opcode: int
    start_cycle: int
    end_cycle: int
    digest: int            # 32-bit write digest


@dataclass
class RunResult:
    """One engine's run of one memory image."""

    engine: str                       # "functional" | "cycle" | "rtl"
    dram: np.ndarray | None           # final simulated DRAM (uint8); None for a run that stopped early
    counters: dict                    # COUNTER_NAMES -> int
    outputs: Mapping                  # output name -> bytes (the cycle engine copies each when read)
    leftover_tokens: dict = field(default_factory=dict)   # "l2g"... -> int, only non-zero ones
    cycles: int | None = None
    trace: Sequence | None = None     # RetireRecords, cycle/rtl engines (the cycle engine's is lazy)
    breakdown: dict | None = None     # module -> {bucket: cycles}, cycle engine
    wall_s: float | None = None       # simulation wall time, JIT/build excluded
    cpu_s: float | None = None        # process CPU time of the same span (cycle engine; rtl: the simulator process)
    dispatch_cycle: np.ndarray | None = None   # int64 per program index: cycle dispatched to its queue, -1 never
    fetch_chunks: Sequence | None = None  # cycle engine: (first request cycle, complete cycle) per fetch chunk
    order: list | None = None         # functional engine: program indices in execution order
    launch_ns: float | None = None    # rtl: simulation time of accelerator cycle 0
    clock_ns: float | None = None     # rtl: clock period
    waves: str | None = None          # rtl: path of the waveform file written, if any

    @property
    def cycles_per_s(self) -> float | None:
        """Simulated cycles per second of ``wall_s`` (None without cycles or a measurable time)."""
        return self.cycles / self.wall_s if self.cycles is not None and self.wall_s else None
