"""Options several commands share, spelled and explained once.

::

    add_config(p)              --config PATH
    add_image_dir(p)           IMAGE_DIR
    add_json(p)                --json
    add_sim(p)                 --sim verilator|icarus
    add_waves(p, what)         --waves [fst|vcd]   (run, diff, waves: one spelling)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vtasim.sim.rtl.runner import SIMULATORS, WAVE_FORMATS

__all__ = ["add_config", "add_image_dir", "add_json", "add_sim", "add_waves"]


def add_config(p, what: str = "") -> None:
    p.add_argument("--config", type=Path, default=None,
                   help=f"a vta_config.json{' ' + what if what else ''} (default: the shipped config/vta_config.json)")


def add_image_dir(p) -> None:
    p.add_argument("image_dir", type=Path, help="a memory image directory (holding image.json)")


def add_json(p) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def add_sim(p, default: str | None = "verilator", what: str = "HDL simulator") -> None:
    p.add_argument("--sim", choices=SIMULATORS, default=default,
                   help=what + ("" if default else f" (default: {SIMULATORS[0]})"))


def add_waves(p, what: str, old_spelling: str | None = None) -> None:
    """``--waves [fst|vcd]``: waveforms of the RTL run in that format (FST when no format is given).
    ``old_spelling`` keeps a former option name working, hidden from the help, in its own ``dest``."""
    p.add_argument("--waves", nargs="?", const=WAVE_FORMATS[0], choices=WAVE_FORMATS, default=None,
                   help=f"{what}; as {' or '.join(WAVE_FORMATS)} (without a value: {WAVE_FORMATS[0]})")
    if old_spelling:
        p.add_argument(old_spelling, choices=WAVE_FORMATS, default=None, help=argparse.SUPPRESS)
