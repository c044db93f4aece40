"""The per-layer table of a network run: text, CSV, and PNG plots (cycles, utilisation, roofline)."""

from __future__ import annotations

import csv
from pathlib import Path

from vtasim.hw.outfiles import check_out, open_out
from vtasim.hw.outfiles import out_dir as make_dir
from vtasim.waveforms.plot import LEGEND_OUTSIDE

__all__ = ["edge_bytes", "layer_table", "network_summary", "write_report", "totals", "roofline_points", "roofline_figure", "REPORT_FILES",
           "check_report_dir"]

REPORT_FILES = ("layers.csv", "cycles.png", "utilisation.png", "roofline.png")

COLUMNS = ("layer", "op", "placement", "out_shape", "macs", "cycles", "gemm_util", "dram_bytes", "wall_ms")


def _row(r) -> dict:
    return {"layer": r.name, "op": r.op, "placement": r.target, "out_shape": "x".join(map(str, r.out_shape)),
            "macs": r.macs, "cycles": r.cycles if r.cycles is not None else "",
            "gemm_util": f"{r.gemm_util:.3f}" if r.gemm_util is not None else "",
            "dram_bytes": r.dram_bytes if r.dram_bytes is not None else "", "wall_ms": f"{r.wall_s * 1e3:.2f}"}


def totals(records) -> dict:
    vta = [r for r in records if r.target == "vta"]
    cyc = sum(r.cycles or 0 for r in vta)
    gemm = sum(r.gemm_ops or 0 for r in vta)
    return {"vta_layers": len(vta), "host_ops": len(records) - len(vta), "cycles": cyc,
            "gemm_util": gemm / cyc if cyc else None, "dram_bytes": sum(r.dram_bytes or 0 for r in vta),
            "vta_macs": sum(r.macs for r in vta), "host_macs": sum(r.macs for r in records if r.target == "host")}


def edge_bytes(regions: dict) -> dict:
    """Host<->VTA activation bytes per inference over the distinct regions of a network that has run:
    ``{"in": packed inputs written, "out": outputs read back, "regions": count}`` (weights, uops and
    instructions are the compiled image's, written once, and not counted)."""
    tot = {"in": 0, "out": 0, "regions": 0}
    for r in {id(r): r for r in regions.values()}.values():
        e = r.edge_bytes()
        tot["in"] += e["in"]
        tot["out"] += e["out"]
        tot["regions"] += 1
    return tot


def network_summary(records, wall_s: float) -> str:
    """The per-layer table of a run and its totals line (``vtasim onnx``, ``vtasim torch``)."""
    t = totals(records)
    return (layer_table(records) + f"\nnetwork: {t['vta_layers']} VTA layer(s), {t['cycles']:,} cycles, "
            f"{t['vta_macs']:,} MACs on VTA, {t['host_macs']:,} on the host, {t['dram_bytes']:,} DRAM bytes; "
            f"wall {wall_s:.1f} s")


def layer_table(records, only_compute: bool = True) -> str:
    rows = [r for r in records if not only_compute or r.macs or r.target == "vta"]
    head = f"{'layer':<28} {'op':<7} {'on':<4} {'out':>14} {'MACs':>12} {'cycles':>11} {'util':>6} {'DRAM B':>11}"
    lines = [head, "-" * len(head)]
    for r in rows:
        d = _row(r)
        lines.append(f"{r.name[:28]:<28} {r.op:<7} {r.target:<4} {d['out_shape']:>14} {r.macs:>12,} "
                     f"{(f'{r.cycles:,}' if r.cycles is not None else '-'):>11} {d['gemm_util'] or '-':>6} "
                     f"{(f'{r.dram_bytes:,}' if r.dram_bytes is not None else '-'):>11}")
    t = totals(records)
    lines.append("-" * len(head))
    util = f"{t['gemm_util']:.3f}" if t["gemm_util"] is not None else "-"
    lines.append(f"{'total (VTA regions)':<28} {'':<7} {'':<4} {'':>14} {t['vta_macs']:>12,} {t['cycles']:>11,} "
                 f"{util:>6} {t['dram_bytes']:>11,}")
    return "\n".join(lines)


def roofline_points(vta) -> list[tuple[float, float, list[str]]]:
    """``(MACs per DRAM byte, MACs per cycle, layer names)`` per point of the roofline: layers of the
    same shape land on one point, which is named once with all of them.  Layers without MACs (a
    residual add on the ALU) have no point."""
    pts: dict[tuple, list[str]] = {}
    for r in (r for r in vta if r.macs):
        pts.setdefault((r.macs / max(r.dram_bytes or 1, 1), r.macs / r.cycles), []).append(r.name)
    return [(x, y, names) for (x, y), names in pts.items()]


def roofline_figure(plt, vta, cfg, title: str):
    """MACs/cycle against MACs per DRAM byte under the config's peak and bus width, each point named by
    its layers (the name offset from the point).  Returns (fig, ax)."""
    peak = cfg.batch * cfg.block_in * cfg.block_out
    bw = cfg.bus_bytes
    pts = roofline_points(vta)
    fig, ax = plt.subplots(figsize=(7.5, 5), layout="constrained")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [peak / bw]) * 4
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax.plot(grid, [min(peak, bw * g) for g in grid], "k-", label=f"roof: {peak} MAC/cycle, {bw} B/cycle")
    ax.scatter(xs, ys, c="tab:red", s=18, zorder=3, label="VTA layers")
    for i, (x, y, names) in enumerate(sorted(pts)):
        ax.annotate(", ".join(names), (x, y), xytext=(6, 8 if i % 2 == 0 else -12), textcoords="offset points",
                    fontsize=6, arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (MACs per DRAM byte)")
    ax.set_ylabel("MACs per cycle")
    ax.set_title(f"{title}: roofline on {cfg.batch}x{cfg.block_in}x{cfg.block_out}")
    ax.legend(**LEGEND_OUTSIDE)
    return fig, ax


def check_report_dir(out_dir) -> Path:
    """The ``--report`` directory, created, and none of :data:`REPORT_FILES` a link or a non-regular file
    (checked before the run, so a refusal costs nothing; :mod:`vtasim.hw.outfiles` checks again on writing)."""
    out = make_dir(out_dir, "--report directory")
    for name in REPORT_FILES:
        check_out(out / name, "report file")
    return out


def write_report(records, out_dir, cfg, title: str = "network") -> list[Path]:
    """``layers.csv`` and, with matplotlib, ``cycles.png``, ``utilisation.png``, ``roofline.png``."""
    out = make_dir(out_dir, "--report directory")
    csv_name, cycles_png, util_png, roofline_png = REPORT_FILES
    paths = [out / csv_name]
    with open_out(paths[0], "w", "report file", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for r in records:
            w.writerow(_row(r))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return paths
    vta = [r for r in records if r.target == "vta" and r.cycles]
    if not vta:
        return paths
    names = [r.name[:18] for r in vta]
    for fname, values, ylabel in ((cycles_png, [r.cycles for r in vta], "cycles"),
                                  (util_png, [r.gemm_util for r in vta], "GEMM utilisation")):
        fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(vta)), 4))
        ax.bar(range(len(vta)), values, color="tab:blue")
        ax.set_xticks(range(len(vta)), names, rotation=70, fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: {ylabel} per VTA layer")
        fig.tight_layout()
        with open_out(out / fname, "wb", "report plot") as f:
            fig.savefig(f, format="png", dpi=110)
        plt.close(fig)
        paths.append(out / fname)
    fig, _ = roofline_figure(plt, vta, cfg, title)
    with open_out(out / roofline_png, "wb", "report plot") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    paths.append(out / roofline_png)
    return paths
