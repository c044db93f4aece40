"""GTKWave save file (.gtkw) that opens a waveform with the co-verification signals grouped.

Groups: busy flags, command-queue occupancies, dependency tokens, retired counts - the same
:data:`vtasim.waveforms.vcd.SIGNALS` the model VCD writes and the RTL exposes, so one save file serves the
RTL's waveform (VCD or FST) and the model VCD alike.  The file is written with pyvcd's
:class:`vcd.gtkw.GTKWSave` (GTKWave's trace flags and group markers are its business, not ours);
the groups open expanded and the view is zoomed to the whole run, or to ``window_ns``::

    >>> write_gtkw("view.gtkw", "rtl.vcd", end_ns=52_000)          # doctest: +SKIP
    $ gtkwave view.gtkw

The save file names the waveform by its path relative to the save file's own directory (and itself by
its bare name in ``[savefile]``, which GTKWave uses to re-anchor a relative dump path on the save
file's location), so a folder of waves and save files can be moved or copied as a whole.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from vtasim.hw.outfiles import open_out

from vcd.gtkw import GTKWSave

from vtasim.waveforms.vcd import SCOPE, SIGNALS

__all__ = ["GROUPS", "WINDOW_PX", "WAVE_PX", "zoom_for", "relative_dumpfile", "write_gtkw"]

GROUPS = (
    ("busy", ("load_busy", "compute_busy", "store_busy")),
    ("command queues", ("load_q_count", "compute_q_count", "store_q_count")),
    ("tokens l2g g2l s2g g2s (16 bits each, l2g lowest)", ("tokens",)),
    ("retired", ("u_load.u_ctrl.ret_midx", "u_compute.u_ctrl.ret_midx", "u_store.u_ctrl.ret_midx")),
)
WINDOW_PX = (1400, 700)        # the window the save file asks for
SIGNALS_PX = 360               # width of the signal-name pane inside it
WAVE_PX = WINDOW_PX[0] - SIGNALS_PX - 150    # left for the waves (measured: the panes' borders take ~150 px)
# GTKWave's zoom z shows 2**-z time units per frame of 200 pixels (its pixelsperframe); measured
# on GTKWave 3.3.118: z = -16 put 100 us of a 1 ns-timescale VCD into 303 pixels.
_PIXELS_PER_FRAME = 200
_MARGIN = 1.03                 # a little room after the last change


def zoom_for(span: float, pixels: int = WAVE_PX) -> float:
    """GTKWave's zoom level that fits ``span`` time units (of the dump's timescale) into ``pixels``."""
    return -math.log2(_PIXELS_PER_FRAME * max(span, 1) * _MARGIN / pixels)


def relative_dumpfile(path, dumpfile) -> str:
    """``dumpfile`` as a path relative to the directory of the save file ``path``."""
    return os.path.relpath(Path(dumpfile).resolve(), Path(path).resolve().parent)


def write_gtkw(path, dumpfile, scope=SCOPE, window_ns: tuple | None = None, widths: dict | None = None,
               end_ns: float | None = None, unit_ns: float = 1.0) -> Path:
    """Write a save file for ``dumpfile``.

    ``window_ns=(lo, hi)`` zooms to a diff window; otherwise ``end_ns`` (the run's last time stamp)
    zooms to the whole run.  ``unit_ns``: the dump's time unit (1 for the model VCD; the RTL's dumps
    are in its time precision, 1 ps = 0.001).  ``widths``: signal widths for the config
    (:func:`vtasim.waveforms.vcd.signal_widths`)."""
    path = Path(path)
    prefix = ".".join(scope)
    lo, hi = window_ns if window_ns else (0, end_ns)
    lo, hi = lo / unit_ns, (hi / unit_ns if hi is not None else None)      # GTKWave counts dump units
    with open_out(path, "w", "GTKWave save file") as fh:
        save = GTKWSave(fh)
        save.comment("vtasim co-verification signals (waveforms/gtkw.py)")
        save.dumpfile(relative_dumpfile(path, dumpfile), abspath=False)
        save.savefile(path.name, abspath=False)
        save.size(*WINDOW_PX)
        save.signals_width(SIGNALS_PX)
        save.sst_expanded(False)          # the hierarchy tree would take the waves' room
        save.timestart(int(lo))
        if hi is not None:
            save.zoom_markers(zoom_for(hi - lo), marker=int((lo + hi) / 2) if window_ns else -1)
        save.treeopen(scope[0])
        save.treeopen(prefix)
        for group, names in GROUPS:
            with save.group(group, closed=False):
                for name in names:
                    width = (widths or {}).get(name) or SIGNALS[name][0] or 10
                    fmt = "bin" if width == 1 else ("hex" if name == "tokens" else "dec")
                    # the three retired counters share a leaf name: the alias keeps the module visible
                    alias = name.replace(".u_ctrl.", " ").removeprefix("u_") if "." in name else None
                    save.trace(f"{prefix}.{name}" + (f"[{width - 1}:0]" if width > 1 else ""), alias=alias,
                               datafmt=fmt)
    return path
