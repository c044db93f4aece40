"""``vtasim dse RESULTS``: Pareto fronts of cycles against the area proxy, sensitivity plots, the
front table.

Groups: each workload (its points: one per config and knob source), and ``total``: per (config, knob
source, reduce), the cycles summed over the workloads, for the configs that ran every workload of the
file successfully.  A point is on the front when no other point of its group has cycles <= and
area <= with one of them strictly smaller (minimise both).
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from vtasim.hw.outfiles import open_out
from vtasim.hw.outfiles import out_dir as make_dir
from vtasim.compiler.scale.results import CONFIG_COLUMNS, read_rows
from vtasim.compiler.scale.spec import SpecError
from vtasim.waveforms.plot import LEGEND_OUTSIDE

__all__ = ["pareto_front", "groups", "pareto_figure", "sensitivity_figure", "run_dse", "TOTAL"]

TOTAL = "total"
FRONT_COLUMNS = ["group", "knobs", "reduce", "cycles", "area_proxy", "sram_bytes", "gemm_util", "macs_per_cycle",
                 "dram_bytes"] + CONFIG_COLUMNS


def pareto_front(points: list[dict], x: str = "area_proxy", y: str = "cycles") -> list[dict]:
    """The non-dominated points (minimising ``x`` and ``y``), sorted by ``x``; ties on both are kept once."""
    front, best_y = [], None
    for p in sorted(points, key=lambda p: (p[x], p[y])):
        if best_y is None or p[y] < best_y:
            front.append(p)
            best_y = p[y]
    return front


def _num(row: dict, k: str):
    v = row.get(k, "")
    if v == "":
        return None
    f = float(v)
    return int(f) if f.is_integer() else f


def groups(rows: list[dict]) -> dict[str, list[dict]]:
    """``{group: [points]}``: per workload, plus :data:`TOTAL` (see the module docstring)."""
    all_wls = sorted({r["workload"] for r in rows})
    out: dict[str, list[dict]] = {}
    per_cfg: dict[tuple, dict] = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        p = {"group": r["workload"], "knobs": r["knobs"], "reduce": int(r["reduce"]),
             **{k: _num(r, k) for k in ("cycles", "area_proxy", "sram_bytes", "gemm_util", "macs_per_cycle",
                                        "dram_bytes")},
             **{k: (int(r[k]) if r[k].lstrip("-").isdigit() else r[k]) for k in CONFIG_COLUMNS}}
        out.setdefault(r["workload"], []).append(p)
        ck = (r["knobs"], r["reduce"]) + tuple(r[k] for k in CONFIG_COLUMNS)
        per_cfg.setdefault(ck, {})[r["workload"]] = p
    totals = []
    for wl_pts in per_cfg.values():
        if sorted(wl_pts) != all_wls or len(all_wls) < 2:
            continue
        first = next(iter(wl_pts.values()))
        cyc = sum(p["cycles"] for p in wl_pts.values())
        macs = sum(p["macs_per_cycle"] * p["cycles"] for p in wl_pts.values())
        gemm = sum(p["gemm_util"] * p["cycles"] for p in wl_pts.values())
        totals.append({**first, "group": TOTAL, "cycles": cyc, "dram_bytes": sum(p["dram_bytes"] for p in wl_pts.values()),
                       "gemm_util": round(gemm / cyc, 6), "macs_per_cycle": round(macs / cyc, 6)})
    if totals:
        out[TOTAL] = totals
    return out


def _label(p: dict, varying: list[str]) -> str:
    return ",".join(f"{k.removeprefix('LOG_').removesuffix('_BUFF_SIZE')}={p[k]}" for k in varying)


LOG_SPAN = 100          # an axis whose data spans more than this ratio is drawn log-scaled
_OUTSIDE = {**LEGEND_OUTSIDE, "fontsize": 7}


def _compact(v: float, step: float) -> str:
    """A short tick label (3.65M, 92k, 1.005) with just the decimals that tell ticks ``step`` apart."""
    unit, div = next(((u, d) for u, d in (("G", 1e9), ("M", 1e6), ("k", 1e3)) if abs(v) >= d), ("", 1.0))
    rel = step / div if step > 0 else 1.0
    decimals = 0 if rel >= 1 else min(6, -math.floor(math.log10(rel) + 1e-9))
    return f"{v / div:.{decimals}f}{unit}"


def _scale_axis(ax, which: str, values) -> None:
    """Linear, or log (labels at the decades only) when the values span more than :data:`LOG_SPAN`;
    every major tick labelled with :func:`_compact`."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = min(values), max(values)
    log = lo > 0 and hi / lo > LOG_SPAN
    if log:
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        axis.set_minor_formatter(NullFormatter())

    def label(v, pos):
        locs = sorted(axis.get_majorticklocs())
        gaps = [b - a for a, b in zip(locs, locs[1:]) if b > a]
        return _compact(v, abs(v) if log or not gaps else min(gaps))
    axis.set_major_formatter(FuncFormatter(label))


def _finish(plt, fig, ax, xlabel: str, ylabel: str, title: str, path: Path) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    with open_out(path, "wb", "dse plot") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return path


def pareto_figure(plt, pts: list[dict], front: list[dict], varying: list[str]):
    """Cycles against area of one group, the front as a step line, each front point numbered beside
    it (not on it) and its config listed by number outside the axes.  Returns (fig, ax)."""
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    for knobs in sorted({p["knobs"] for p in pts}):
        sel = [p for p in pts if p["knobs"] == knobs]
        ax.scatter([p["area_proxy"] for p in sel], [p["cycles"] for p in sel], s=18, alpha=0.6,
                   label=f"{knobs} ({len(sel)})")
    ax.step([p["area_proxy"] for p in front], [p["cycles"] for p in front], where="post", color="k", lw=1.2,
            label=f"Pareto front ({len(front)})")
    for i, p in enumerate(front):              # a number beside each front point, its config in the key
        ax.annotate(str(i + 1), (p["area_proxy"], p["cycles"]), xytext=(5, 5), textcoords="offset points",
                    fontsize=7, fontweight="bold")
    key = "\n".join(f"{i + 1}: {_label(p, varying) or p['knobs']}" for i, p in enumerate(front))
    ax.text(1.01, 0.0, "Pareto front\n" + key, transform=ax.transAxes, va="bottom", ha="left", fontsize=6)
    _scale_axis(ax, "x", [p["area_proxy"] for p in pts])
    _scale_axis(ax, "y", [p["cycles"] for p in pts])
    ax.margins(0.12)
    ax.legend(**_OUTSIDE)
    return fig, ax


def sensitivity_figure(plt, key: str, grouped: dict):
    """Per workload: the best cycles at each value of ``key`` over the best overall.  Returns (fig, ax)."""
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    values, ratios = set(), []
    for g in sorted(g for g in grouped if g != TOTAL):
        pts = grouped[g]
        vals = sorted({p[key] for p in pts})
        best = min(p["cycles"] for p in pts)
        ys = [min(p["cycles"] for p in pts if p[key] == v) / best for v in vals]
        ax.plot(vals, ys, marker="o", label=g)
        values.update(vals)
        ratios += ys
    ax.set_xticks(sorted(values))                   # the swept values themselves, no in-between ticks
    _scale_axis(ax, "y", ratios)
    ax.legend(**_OUTSIDE)
    return fig, ax


def run_dse(results, out_dir, log=print) -> dict:
    """Write ``front.csv``, ``pareto_<group>.png`` and ``sensitivity_<KEY>.png`` into ``out_dir``;
    returns ``{group: front}``."""
    from vtasim.sim.install import require
    require(["matplotlib"], "vtasim dse (its Pareto and sensitivity plots)")
    results = Path(results)
    if not os.path.lexists(results):
        raise SpecError(f"results file {results}: no such file (run vtasim sweep SPEC --out {results})")
    rows = read_rows(results)           # strict, bounded, every row checked (vtasim.compiler.scale.results)
    grouped = groups(rows)
    if not grouped:
        raise SpecError(f"results file {results}: no successful point (statuses: "
                        f"{sorted({r['status'] for r in rows}) or 'none'})")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SpecError("vtasim dse draws with matplotlib: pip install 'vtasim[plot]'") from None
    out_dir = make_dir(out_dir, "--out directory")
    all_pts = [p for g, pts in grouped.items() if g != TOTAL for p in pts]
    varying = [k for k in CONFIG_COLUMNS if len({p[k] for p in all_pts}) > 1]
    fronts = {g: pareto_front(pts) for g, pts in grouped.items()}
    with open_out(out_dir / "front.csv", "w", "front table", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FRONT_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for g in sorted(fronts):
            w.writerows(fronts[g])
    written = [out_dir / "front.csv"]
    for g, pts in grouped.items():
        fig, ax = pareto_figure(plt, pts, fronts[g], varying)
        ylabel = "cycles" + (" (sum over workloads)" if g == TOTAL else "")
        written.append(_finish(plt, fig, ax, "area proxy (SRAM-bit equivalents)", ylabel, f"{g}: cycles vs area",
                               out_dir / f"pareto_{g.replace('/', '_')}.png"))
    for key in varying:
        fig, ax = sensitivity_figure(plt, key, grouped)
        written.append(_finish(plt, fig, ax, key, "best cycles at this value / best overall",
                               f"sensitivity to {key}", out_dir / f"sensitivity_{key}.png"))
    for g in sorted(fronts):
        log(f"{g}: {len(grouped[g])} points, front of {len(fronts[g])}: " +
            "; ".join(f"{_label(p, varying) or p['knobs']} {p['cycles']:,} cycles / area {p['area_proxy']:,}"
                      for p in fronts[g][:6]) + (" ..." if len(fronts[g]) > 6 else ""))
    log(f"dse: {len(written)} files -> {out_dir} (front.csv, {len(written) - 1} PNG)")
    return fronts
