"""The timing keys: one row per knob of the timing contract (``docs/timing.md``).

Each row gives the JSON key, its default, its range, what it means, the ``docs/timing.md`` section
that says how time depends on it, and how the two timed executors receive it:

* ``slot``: the cycle engine's parameter slot ``P_<slot>`` (:mod:`vtasim.sim.cycle.layout`), filled with
  :meth:`TimingKey.engine_value`;
* ``rtl_param``: the ``vta_top`` localparam holding it (checked by :func:`vtasim.hw.rtl_report.check_top`),
  and :meth:`TimingKey.rtl_defines` the ``VTA_*`` macros of the generated header
  (:func:`vtasim.hw.rtl_params.header_defines`).

Everything reads this table: :class:`vtasim.hw.config.VTAConfig` takes its fields, defaults and checks
from it, the cycle engine its parameter vector, the RTL header and the RTL checks their timing
macros::

    >>> from vtasim.hw.timing import TIMING_KEYS, timing_key
    >>> timing_key("DRAM_LATENCY").default, timing_key("DRAM_LATENCY").section
    (16, '4.2')
    >>> [k.name for k in TIMING_KEYS][:2]
    ['LOG_BUS_WIDTH', 'DRAM_LATENCY']

A new knob is a new row here plus its use in ``sim/cycle`` and ``hw/rtl`` (``docs/extending.md``,
"A new timing knob"); ``tests/test_timing_table.py`` names whatever piece a row still lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TimingKey", "TIMING_KEYS", "TIMING_KEY_NAMES", "timing_key"]


def _log2(value: int) -> int:
    return value.bit_length() - 1


@dataclass(frozen=True)
class TimingKey:
    """One timing knob.  ``log2``: the key is a base-2 logarithm (the hardware sees ``2**value``);
    ``unit``: the cycle engine's slot counts in units of that many (the bus in bytes: 8 bits);
    ``log_macro``: a header macro holding log2 of the slot's value (the RTL sizes counters and
    address shifts with it), "" for none."""

    name: str
    default: int
    lo: int
    hi: int
    pow2: bool
    meaning: str
    section: str               # the docs/timing.md section that defines its effect
    slot: str                  # sim/cycle/layout.py P_<slot>
    rtl_param: str             # vta_top localparam = `VTA_<rtl_macro>
    rtl_macro: str
    log2: bool = False
    unit: int = 1
    log_macro: str = ""

    def hardware_value(self, value: int) -> int:
        """What the hardware is built with: ``2**value`` for a log2 key, else the value."""
        return 1 << value if self.log2 else value

    def engine_value(self, value: int) -> int:
        """The cycle engine's ``P_<slot>``: the hardware value in units of ``unit``."""
        return self.hardware_value(value) // self.unit

    def rtl_defines(self, value: int) -> dict:
        """``{macro without VTA_: int}`` of the generated RTL header."""
        out = {self.rtl_macro: self.hardware_value(value)}
        if self.log_macro:
            out[self.log_macro] = _log2(self.engine_value(value))
        return out


TIMING_KEYS = (
    TimingKey("LOG_BUS_WIDTH", 6, 6, 9, False, "log2 of memory port bits", "4.1",
              slot="BUS_BYTES", rtl_param="BUS_WIDTH", rtl_macro="BUS_BITS", log2=True,
              unit=8, log_macro="LOG_BUS_BYTES"),
    TimingKey("DRAM_LATENCY", 16, 1, 1024, False, "cycles from grant to first beat", "4.2",
              slot="LATENCY", rtl_param="DRAM_LATENCY", rtl_macro="DRAM_LATENCY"),
    TimingKey("BURST_BEATS", 16, 1, 256, True, "maximum beats per burst", "4.1",
              slot="BURST", rtl_param="BURST_BEATS", rtl_macro="BURST_BEATS",
              log_macro="LOG_BURST_BEATS"),
    TimingKey("CMD_QUEUE_DEPTH", 512, 1, 4096, True, "entries per command queue", "3",
              slot="CMDQ", rtl_param="CMD_QUEUE_DEPTH", rtl_macro="CMD_QUEUE_DEPTH",
              log_macro="LOG_CMD_QUEUE_DEPTH"),
    TimingKey("TOKEN_QUEUE_DEPTH", 255, 1, 65535, False, "capacity of each dependency token queue", "5",
              slot="TOKQ", rtl_param="TOKEN_QUEUE_DEPTH", rtl_macro="TOKEN_QUEUE_DEPTH"),
    TimingKey("FETCH_INSNS", 8, 1, 256, True, "instructions per fetch chunk", "3",
              slot="FETCH_INSNS", rtl_param="FETCH_INSNS", rtl_macro="FETCH_INSNS",
              log_macro="LOG_FETCH_INSNS"),
    TimingKey("GEMM_PIPE_DEPTH", 4, 1, 16, False, "GEMM pipeline cycles after the last uop", "6",
              slot="GEMM_PIPE", rtl_param="GEMM_PIPE_DEPTH", rtl_macro="GEMM_PIPE_DEPTH"),
    TimingKey("ALU_PIPE_DEPTH", 4, 1, 16, False, "ALU pipeline cycles after the last uop", "6",
              slot="ALU_PIPE", rtl_param="ALU_PIPE_DEPTH", rtl_macro="ALU_PIPE_DEPTH"),
)
TIMING_KEY_NAMES = tuple(k.name for k in TIMING_KEYS)
_BY_NAME = {k.name: k for k in TIMING_KEYS}


def timing_key(name: str) -> TimingKey:
    """The row of ``name``; KeyError names the known keys."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a timing key; known: {', '.join(TIMING_KEY_NAMES)}") from None
