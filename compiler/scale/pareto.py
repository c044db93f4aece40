"""``vtasim dse RESULTS``: Pareto fronts of cycles against the area proxy, sensitivity plots, the
front table.

Groups: each workload (its points: one per config and knob source), and ``total``: per (config, knob
source, reduce), the cycles summed over the workloads, for the configs that ran every workload of the
file successfully.  A point is on the front when no other point of its group has cycles <= and
area <= with one of them strictly smaller (minimise both).
"""

from __future__ import annotations

import csv
from pathlib import Path

from hw.outfiles import open_out
from hw.outfiles import out_dir as make_dir
from compiler.scale.results import CONFIG_COLUMNS, read_rows
from compiler.scale.spec import SpecError

__all__ = ["pareto_front", "groups", "run_dse", "TOTAL"]

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


def _finish(plt, fig, ax, xlabel: str, ylabel: str, title: str, path: Path) -> Path:
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with open_out(path, "wb", "dse plot") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return path


def run_dse(results, out_dir, log=print) -> dict:
    """Write ``front.csv``, ``pareto_<group>.png`` and ``sensitivity_<KEY>.png`` into ``out_dir``;
    returns ``{group: front}``."""
    results = Path(results)
    if not results.is_file():
        raise SpecError(f"results file {results}: not a regular file (run vtasim sweep SPEC --out {results})")
    rows = read_rows(results)
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
        fig, ax = plt.subplots(figsize=(7, 5))
        for knobs in sorted({p["knobs"] for p in pts}):
            sel = [p for p in pts if p["knobs"] == knobs]
            ax.scatter([p["area_proxy"] for p in sel], [p["cycles"] for p in sel], s=18, alpha=0.6,
                       label=f"{knobs} ({len(sel)})")
        fr = fronts[g]
        ax.step([p["area_proxy"] for p in fr], [p["cycles"] for p in fr], where="post", color="k", lw=1.2,
                label=f"Pareto front ({len(fr)})")
        for p in fr:
            ax.annotate(_label(p, varying), (p["area_proxy"], p["cycles"]), fontsize=6, alpha=0.8)
        ax.set_xscale("log")
        ylabel = "cycles" + (" (sum over workloads)" if g == TOTAL else "")
        written.append(_finish(plt, fig, ax, "area proxy (SRAM-bit equivalents)", ylabel, f"{g}: cycles vs area",
                               out_dir / f"pareto_{g.replace('/', '_')}.png"))
    for key in varying:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for g in sorted(g for g in grouped if g != TOTAL):
            pts = grouped[g]
            vals = sorted({p[key] for p in pts})
            # per value: the best (lowest) cycles over the other keys, relative to the group's best
            best = min(p["cycles"] for p in pts)
            ys = [min(p["cycles"] for p in pts if p[key] == v) / best for v in vals]
            ax.plot(vals, ys, marker="o", label=g)
        written.append(_finish(plt, fig, ax, key, "best cycles at this value / best overall",
                               f"sensitivity to {key}", out_dir / f"sensitivity_{key}.png"))
    for g in sorted(fronts):
        log(f"{g}: {len(grouped[g])} points, front of {len(fronts[g])}: " +
            "; ".join(f"{_label(p, varying) or p['knobs']} {p['cycles']:,} cycles / area {p['area_proxy']:,}"
                      for p in fronts[g][:6]) + (" ..." if len(fronts[g]) > 6 else ""))
    log(f"dse: {len(written)} files -> {out_dir} (front.csv, {len(written) - 1} PNG)")
    return fronts
