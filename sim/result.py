"""What every engine (functional, cycle, rtl) returns from ``run_image``."""

from __future__ import annotations

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
    engine: str                       # "functional" | "cycle" | "rtl"
    dram: np.ndarray                  # final simulated DRAM (uint8)
    counters: dict                    # COUNTER_NAMES -> int
    outputs: dict                     # output name -> bytes
    leftover_tokens: dict = field(default_factory=dict)   # "l2g"... -> int, only non-zero ones
    cycles: int | None = None
    trace: list | None = None         # list[RetireRecord], cycle/rtl engines
    breakdown: dict | None = None     # module -> {bucket: cycles}
    wall_s: float | None = None       # simulation wall time, JIT/build excluded
    extra: dict = field(default_factory=dict)
