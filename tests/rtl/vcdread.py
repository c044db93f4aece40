"""Read a VCD (ours or a simulator's) into per-signal change lists, to line RTL and model up.

Only what alignment needs: scalar and vector wires by full hierarchical name, times in the file's
timescale converted to nanoseconds::

    >>> waves = read_vcd("rtl.vcd", prefix="tb_top.dut.")          # doctest: +SKIP
    >>> value_at(waves["tb_top.dut.load_busy"], 1234.0)            # doctest: +SKIP
"""

from __future__ import annotations

import bisect
from pathlib import Path

__all__ = ["read_vcd", "value_at", "sample_cycles"]

_UNITS_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "fs": 1e-6}


def _timescale_ns(text: str) -> float:
    text = text.replace("$timescale", "").replace("$end", "").strip()
    num = "".join(ch for ch in text if ch.isdigit()) or "1"
    unit = "".join(ch for ch in text if ch.isalpha())
    return int(num) * _UNITS_NS[unit]


def read_vcd(path, prefix: str = "", names=None) -> dict:
    """``{hierarchical name: [(time_ns, int value or None for x/z)]}`` for signals under ``prefix``."""
    scope, ids, out = [], {}, {}
    scale = 1.0
    t = 0.0
    with open(Path(path)) as fh:
        header = True
        pending = []
        for line in fh:
            line = line.strip()
            if not line:
                continue
            if header:
                pending.append(line)
                if not line.endswith("$end"):
                    continue
                stmt = " ".join(pending)
                pending = []
                words = stmt.split()
                if words[0] == "$timescale":
                    scale = _timescale_ns(stmt)
                elif words[0] == "$scope":
                    scope.append(words[2])
                elif words[0] == "$upscope":
                    scope.pop()
                elif words[0] == "$var":
                    name = ".".join(scope + [words[4]])
                    if name.startswith(prefix) and (names is None or name in names):
                        ids.setdefault(words[3], []).append(name)
                        out.setdefault(name, [])
                elif words[0] == "$enddefinitions":
                    header = False
                continue
            c = line[0]
            if c == "#":
                t = int(line[1:]) * scale
            elif c in "bB":
                val, ident = line[1:].split()
                if ident in ids:
                    v = None if any(ch in val for ch in "xXzZ") else int(val, 2)
                    for name in ids[ident]:
                        out[name].append((t, v))
            elif c in "01xXzZ":
                ident = line[1:]
                if ident in ids:
                    v = int(c) if c in "01" else None
                    for name in ids[ident]:
                        out[name].append((t, v))
    return out


def value_at(changes, t_ns: float):
    """Value of a signal at time ``t_ns`` (the last change at or before it), or None before any."""
    times = [c[0] for c in changes]
    k = bisect.bisect_right(times, t_ns) - 1
    return changes[k][1] if k >= 0 else None


def sample_cycles(changes, offset_ns: float, clock_ns: float, cycles: int, phase: float = 0.75) -> list:
    """The value during each cycle 0..cycles-1 (sampled ``phase`` of a period into the cycle)."""
    return [value_at(changes, offset_ns + (c + phase) * clock_ns) for c in range(cycles)]
