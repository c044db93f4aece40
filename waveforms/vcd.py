"""Model VCD: the cycle engine's run as waveforms with the RTL's hierarchical signal names.

The signals are the ones ``hw/rtl/vta_top.v`` carries (see :data:`SIGNALS`, paths below
``tb_top.u_vta``): per module the busy register and the count of retired instructions, per command
queue its occupancy, and the four dependency token counters packed as the RTL's ``tokens`` bus
(16 bits each, l2g lowest).  Values follow docs/timing.md and the RTL's registers:

* ``<module>_busy``: the RTL's busy register, 1 in cycles ``s + 1 .. e`` of each instruction (the
  start cycle s is the cycle the instruction leaves its queue and the register is set);
* ``<module>_q_count``: occupancy at t = dispatched before t - started before t;
* ``tokens``: a counter at t = pushes at end cycles < t - pops at start cycles < t;
* ``u_<module>.u_ctrl.ret_midx``: instructions the module retired before t.

So the model VCD and the RTL's VCD open side by side in GTKWave (:mod:`vtasim.waveforms.gtkw` writes the
save file that groups them), and ``tests/rtl/test_waveforms.py`` checks them equal cycle by cycle.

Time: one cycle is ``clock_ns`` nanoseconds and cycle 0 starts at ``offset_ns``; pass the RTL run's
``launch_ns`` as the offset to line the two files up exactly::

    >>> write_model_vcd(image, cycle_result, "model.vcd", offset_ns=rtl.launch_ns)  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.hw.isa import MODULE_NAMES, TOKEN_POPS, TOKEN_PUSHES, decode_fields, module_array
from vtasim.hw.outfiles import write_text

__all__ = ["SCOPE", "SIGNALS", "TOKEN_ORDER", "model_changes", "signal_widths", "write_vcd", "write_model_vcd"]

SCOPE = ("tb_top", "u_vta")          # the instance path of vta_top inside hdl/tb_top.v
TOKEN_ORDER = ("l2g", "g2l", "s2g", "g2s")   # 16-bit lanes of the RTL's tokens bus, low first
# path below SCOPE -> (width, meaning); width None = from the config (command-queue counters)
SIGNALS = {
    "load_busy": (1, "load module busy register"),
    "compute_busy": (1, "compute module busy register"),
    "store_busy": (1, "store module busy register"),
    "load_q_count": (None, "load command queue occupancy"),
    "compute_q_count": (None, "compute command queue occupancy"),
    "store_q_count": (None, "store command queue occupancy"),
    "tokens": (64, "token counters l2g, g2l, s2g, g2s (16 bits each, l2g lowest)"),
    "u_load.u_ctrl.ret_midx": (32, "instructions retired by the load module"),
    "u_compute.u_ctrl.ret_midx": (32, "instructions retired by the compute module"),
    "u_store.u_ctrl.ret_midx": (32, "instructions retired by the store module"),
}


def signal_widths(cfg) -> dict:
    """Widths of :data:`SIGNALS` for a config (queue counters are LOG_CMD_QUEUE_DEPTH + 1 bits)."""
    qbits = (cfg.CMD_QUEUE_DEPTH.bit_length() - 1) + 1
    return {name: (w if w is not None else qbits) for name, (w, _) in SIGNALS.items()}




def _steps(times, deltas, horizon):
    """Value changes of a counter built from (+delta at time) events: [(t, value)] from t = 0."""
    if len(times) == 0:
        return [(0, 0)]
    t = np.asarray(times, dtype=np.int64)
    d = np.asarray(deltas, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    uniq, first = np.unique(t, return_index=True)
    sums = np.add.reduceat(d, first)
    vals = np.cumsum(sums)
    out = [(0, 0)] if uniq[0] > 0 else []
    out += [(int(a), int(b)) for a, b in zip(uniq, vals) if a <= horizon]
    return out


def model_changes(fields: dict, result) -> dict:
    """``{signal: [(cycle, value), ...]}`` for the signals of :data:`SIGNALS` from a cycle run.

    ``fields``: the decoded instruction fields (:func:`vtasim.hw.isa.decode_fields`) of the run's image."""
    trace = sorted(result.trace or (), key=lambda r: r.end_cycle)
    horizon = int(result.cycles or (trace[-1].end_cycle + 1 if trace else 0))
    f, mod = fields, module_array(fields)
    changes = {}
    dispatch = result.dispatch_cycle
    for m, name in enumerate(MODULE_NAMES):
        recs = [r for r in trace if r.module == name]
        # busy register: set at the edge ending cycle s, cleared at the edge ending cycle e
        times = [r.start_cycle + 1 for r in recs] + [r.end_cycle + 1 for r in recs]
        deltas = [1] * len(recs) + [-1] * len(recs)
        changes[f"{name}_busy"] = _steps(times, deltas, horizon)
        changes[f"u_{name}.u_ctrl.ret_midx"] = _steps([r.end_cycle + 1 for r in recs], [1] * len(recs), horizon)
        if dispatch is not None:
            d = np.asarray(dispatch)[np.asarray(mod) == m]
            times = list(d[d >= 0] + 1) + [r.start_cycle + 1 for r in recs]
            deltas = [1] * int((d >= 0).sum()) + [-1] * len(recs)
            changes[f"{name}_q_count"] = _steps(times, deltas, horizon)
    times, deltas = [], []
    for r in trace:
        m = MODULE_NAMES.index(r.module)
        for flag, tok in TOKEN_POPS[m]:
            if f[flag][r.program_index]:
                times.append(r.start_cycle + 1)
                deltas.append(-(1 << (16 * TOKEN_ORDER.index(tok))))
        for flag, tok in TOKEN_PUSHES[m]:
            if f[flag][r.program_index]:
                times.append(r.end_cycle + 1)
                deltas.append(1 << (16 * TOKEN_ORDER.index(tok)))
    changes["tokens"] = _steps(times, deltas, horizon)
    return changes


def _ident(k: int) -> str:
    chars = [chr(c) for c in range(33, 127)]
    out = ""
    k += 1
    while k:
        k, r = divmod(k - 1, len(chars))
        out = chars[r] + out
    return out


def write_vcd(path, changes: dict, widths: dict, scope=SCOPE, clock_ns: int = 10, offset_ns: float = 0,
              end_cycle: int | None = None) -> Path:
    """Write ``changes`` ({name: [(cycle, value)]}) as a VCD with 1 ns resolution."""
    path = Path(path)
    ids = {name: _ident(k) for k, name in enumerate(changes)}
    lines = ["$date vtasim model $end", "$version vtasim vtasim.waveforms.vcd $end", "$timescale 1ns $end"]
    lines += [f"$scope module {s} $end" for s in scope]
    # Dotted names are sub-scopes (u_load.u_ctrl.ret_midx): one nested $scope per distinct path.
    by_scope = {}
    for name in changes:
        *sub, leaf = name.split(".")
        by_scope.setdefault(tuple(sub), []).append((name, leaf))
    for sub in sorted(by_scope):
        lines += [f"$scope module {s} $end" for s in sub]
        for name, leaf in by_scope[sub]:
            w = widths.get(name, 32)
            lines.append(f"$var wire {w} {ids[name]} {leaf}{f' [{w - 1}:0]' if w > 1 else ''} $end")
        lines += ["$upscope $end"] * len(sub)
    lines += ["$upscope $end"] * len(scope) + ["$enddefinitions $end"]
    events = {}
    for name, seq in changes.items():
        for cyc, val in seq:
            events.setdefault(cyc, []).append((name, val))
    last = {}
    for cyc in sorted(events):
        body = []
        for name, val in events[cyc]:
            if last.get(name) == val:
                continue
            last[name] = val
            w = widths.get(name, 32)
            body.append(f"{val & 1}{ids[name]}" if w == 1 else f"b{val & ((1 << w) - 1):b} {ids[name]}")
        if body:
            lines.append(f"#{int(round(offset_ns + cyc * clock_ns))}")
            lines += body
    if end_cycle is not None:
        lines.append(f"#{int(round(offset_ns + end_cycle * clock_ns))}")
    write_text(path, "\n".join(lines) + "\n", "VCD file")
    return path


def write_model_vcd(image, result, path, clock_ns: int = 10, offset_ns: float = 0) -> Path:
    """VCD of a cycle-engine RunResult with the RTL's signal names under ``tb_top.u_vta``."""
    changes = model_changes(decode_fields(image.cfg, image.insn_bytes()), result)
    widths = signal_widths(image.cfg)
    return write_vcd(path, changes, widths, clock_ns=clock_ns, offset_ns=offset_ns, end_cycle=result.cycles)
