"""What the timing conformance tests move and run: per timing key (``hw/timing.py``) a value away from
its default and a probe program whose timing depends on it; the keys grouped into a few configs that
move several at once, so the RTL is built once per group (``tests/rtl/test_timing_conformance.py``).

A new row of :data:`vtasim.hw.timing.TIMING_KEYS` needs an entry in :data:`MOVED`, :data:`PROBES` and one
group of :data:`GROUPS` (``tests/test_timing_table.py`` names the one missing).
"""

from __future__ import annotations

import re

from vtasim.hw.config import VTAConfig, load_config
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.engines import run_engine
from vtasim.sim.errors import TokenOverflowError
from vtasim.sim.programs.unit import UNIT_PROGRAMS

__all__ = ["MOVED", "PROBES", "GROUPS", "probe_image", "group_config", "moved_config", "outcome", "cycle_run",
           "token_burst"]


def token_burst(cfg: VTAConfig):
    """Two l2g pushes while compute is busy in a GEMM: fine with two token slots, a TokenOverflow at
    the second push with one (``TOKEN_QUEUE_DEPTH`` changes no cycle count, only where a push fails)."""
    b = ProgramBuilder(cfg)
    b.gemm(uop_bgn=0, uop_end=1, iter_out=10, iter_in=10)
    b.nop("load", push_next=1)
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1)
    b.nop("compute", pop_prev=1)
    b.finish()
    return b.build()


# key -> a value away from the default (inside the table's range, supported by the RTL)
MOVED = {"LOG_BUS_WIDTH": 7, "DRAM_LATENCY": 5, "BURST_BEATS": 4, "CMD_QUEUE_DEPTH": 2,
         "TOKEN_QUEUE_DEPTH": 1, "FETCH_INSNS": 2, "GEMM_PIPE_DEPTH": 7, "ALU_PIPE_DEPTH": 2}
# key -> the program whose timing depends on it (a unit program name, or a builder of cfg)
PROBES = {"LOG_BUS_WIDTH": "save_load_out", "DRAM_LATENCY": "save_load_out", "BURST_BEATS": "save_load_out",
          "FETCH_INSNS": "save_load_out", "CMD_QUEUE_DEPTH": "gemm", "GEMM_PIPE_DEPTH": "gemm",
          "ALU_PIPE_DEPTH": "relu", "TOKEN_QUEUE_DEPTH": token_burst}
# one RTL build per group; together they move every key
GROUPS = (("DRAM_LATENCY", "BURST_BEATS", "GEMM_PIPE_DEPTH"),
          ("LOG_BUS_WIDTH", "FETCH_INSNS", "ALU_PIPE_DEPTH"),
          ("CMD_QUEUE_DEPTH", "TOKEN_QUEUE_DEPTH"))


def probe_image(key: str, cfg: VTAConfig):
    probe = PROBES[key]
    return UNIT_PROGRAMS[probe](cfg) if isinstance(probe, str) else probe(cfg)


def moved_config(key: str, base: VTAConfig | None = None) -> VTAConfig:
    return (base or load_config()).replace(**{key: MOVED[key]})


def group_config(group, base: VTAConfig | None = None) -> VTAConfig:
    return (base or load_config()).replace(**{key: MOVED[key] for key in group})


def outcome(result_or_error):
    """What a run's timing came to: ``("cycles", n)``, or ``("token overflow", cycle)``."""
    if isinstance(result_or_error, TokenOverflowError):
        stop = getattr(result_or_error, "stop_cycle", None)
        if stop is None:
            stop = int(re.search(r"at cycle (\d+)", str(result_or_error)).group(1))
        return ("token overflow", int(stop))
    if isinstance(result_or_error, BaseException):
        raise result_or_error
    return ("cycles", result_or_error.cycles)


def cycle_run(image):
    """The cycle engine's result, or the TokenOverflowError it stopped with."""
    try:
        return run_engine("cycle", image)
    except TokenOverflowError as exc:
        return exc
