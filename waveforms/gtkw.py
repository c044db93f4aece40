"""GTKWave save file (.gtkw) that opens a waveform with the co-verification signals grouped.

Groups: busy flags, command-queue occupancies, dependency tokens, retired counts - the same
:data:`waveforms.vcd.SIGNALS` the model VCD writes and the RTL exposes, so one save file serves the
RTL FST and the model VCD alike::

    >>> write_gtkw("view.gtkw", "rtl.vcd")          # doctest: +SKIP
    $ gtkwave view.gtkw
"""

from __future__ import annotations

from pathlib import Path

from waveforms.vcd import SCOPE, SIGNALS

__all__ = ["GROUPS", "write_gtkw"]

GROUPS = (
    ("busy", ("load_busy", "compute_busy", "store_busy")),
    ("command queues", ("load_q_count", "compute_q_count", "store_q_count")),
    ("tokens l2g g2l s2g g2s (16 bits each, l2g lowest)", ("tokens",)),
    ("retired", ("u_load.u_ctrl.ret_midx", "u_compute.u_ctrl.ret_midx", "u_store.u_ctrl.ret_midx")),
)
# GTKWave trace flags: 0x22 = hex + right-justified, 0x28 = binary; 0xc00200 = group begin etc.
_FLAG_HEX, _FLAG_DEC, _FLAG_BIN = 0x22, 0x24, 0x28
_GROUP_BEGIN, _GROUP_END = 0xc00200, 0x1401200


def write_gtkw(path, dumpfile, scope=SCOPE, window_ns: tuple | None = None, widths: dict | None = None) -> Path:
    """Write a save file for ``dumpfile``; ``window_ns=(lo, hi)`` zooms to a diff window."""
    path = Path(path)
    prefix = ".".join(scope)
    lines = [f'[dumpfile] "{Path(dumpfile).resolve()}"', f"[savefile] \"{path.resolve()}\"",
             "[timestart] " + str(int(window_ns[0]) if window_ns else 0)]
    if window_ns:
        lo, hi = window_ns
        # GTKWave's zoom line: "*<zoom> <primary marker> <26 named markers>"; zoom is log2-based.
        lines.append(f"*{-float(int(max(1, hi - lo)).bit_length() - 10):.6f} {int((lo + hi) / 2)} "
                     + " ".join(["-1"] * 26))
    lines.append(f"[treeopen] {scope[0]}.")
    for group, names in GROUPS:
        lines += [f"@{_GROUP_BEGIN:x}", f"-{group}"]
        for name in names:
            width = (widths or {}).get(name) or SIGNALS[name][0] or 10
            flag = _FLAG_BIN if width == 1 else (_FLAG_HEX if name == "tokens" else _FLAG_DEC)
            sig = f"{prefix}.{name}" + (f"[{width - 1}:0]" if width > 1 else "")
            lines += [f"@{flag:x}", sig]
        lines += [f"@{_GROUP_END:x}", f"-{group}"]
    path.write_text("\n".join(lines) + "\n")
    return path
