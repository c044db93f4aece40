"""GTKWave save file (.gtkw) that opens a waveform with the co-verification signals grouped.

Groups: busy flags, command-queue occupancies, dependency tokens, retired counts - the same
:data:`waveforms.vcd.SIGNALS` the model VCD writes and the RTL exposes, so one save file serves the
RTL FST and the model VCD alike::

    >>> write_gtkw("view.gtkw", "rtl.fst")          # doctest: +SKIP
    $ gtkwave view.gtkw
"""

from __future__ import annotations

from pathlib import Path

from waveforms.vcd import SCOPE, SIGNALS

__all__ = ["GROUPS", "write_gtkw"]

GROUPS = (
    ("busy", ("load_busy", "compute_busy", "store_busy")),
    ("command queues", ("load_q_count", "compute_q_count", "store_q_count")),
    ("tokens", ("tok_l2g", "tok_g2l", "tok_s2g", "tok_g2s")),
    ("retired", ("load_retired", "compute_retired", "store_retired")),
)
# GTKWave trace flags: 0x22 = hex + right-justified, 0x28 = binary; 0xc00200 = group begin etc.
_FLAG_HEX, _FLAG_DEC, _FLAG_BIN = 0x22, 0x24, 0x28
_GROUP_BEGIN, _GROUP_END = 0xc00200, 0x1401200


def write_gtkw(path, dumpfile, scope=SCOPE, window_ns: tuple | None = None, signals=SIGNALS) -> Path:
    """Write a save file for ``dumpfile``; ``window_ns=(lo, hi)`` zooms to a diff window."""
    path = Path(path)
    prefix = ".".join(scope)
    lines = [f'[dumpfile] "{Path(dumpfile).resolve()}"', f"[savefile] \"{path.resolve()}\"",
             "[timestart] " + str(int(window_ns[0]) if window_ns else 0)]
    if window_ns:
        lo, hi = window_ns
        # GTKWave's zoom line: "*<zoom> <primary marker> <26 named markers>"; zoom is log2-based.
        lines.append(f"*{-float(max(1, hi - lo).bit_length() - 10):.6f} {int((lo + hi) / 2)} "
                     + " ".join(["-1"] * 26))
    lines.append(f"[treeopen] {scope[0]}.")
    for group, names in GROUPS:
        lines += [f"@{_GROUP_BEGIN:x}", f"-{group}"]
        for name in names:
            width = signals.get(name, (32, ""))[0]
            flag = _FLAG_BIN if width == 1 else _FLAG_DEC
            sig = f"{prefix}.{name}" + (f"[{width - 1}:0]" if width > 1 else "")
            lines += [f"@{flag:x}", sig]
        lines += [f"@{_GROUP_END:x}", f"-{group}"]
    path.write_text("\n".join(lines) + "\n")
    return path
