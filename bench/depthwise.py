"""Depthwise conv2d on VTA two ways, measured on the cycle engine in one run: the block-diagonal GEMM
(``dw_alu = 0``) against the ALU multiply-accumulate over the taps (``dw_alu = 1``).

    python bench/depthwise.py                              # MobileNet-like layers, default config
    python bench/depthwise.py --layers depthwise_conv2d.14.14.256.3.1.1 --config config/presets/1x8x8.json

For each layer and form it tries the three largest tiles that fit with no virtual threads, with
``oc_nthread = 2`` and with ``h_nthread = 2`` (the scratchpads shared by the threads; up to nine
points, those that compile), and prints the best: cycles, GEMM and ALU
uops (fsim counters), the compute module's busy share, and the bytes loaded into the accumulator.
The ALU form needs stride 1 (a stride-2 window is no 2-D DMA), so stride-2 layers show the GEMM form
only.  Every image is checked bit for bit against the numpy evaluation of its tensor expressions.
It asserts nothing else; cycles are exact.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtasim.hw.config import load_config  # noqa: E402
from vtasim.compiler.errors import CompileError  # noqa: E402
from vtasim.compiler.tuning.knobs import check_knobs, knob_space, split_extents  # noqa: E402
from vtasim.compiler.ops import compile_workload  # noqa: E402
from vtasim.compiler.tuning.workloads import parse_workload  # noqa: E402
from vtasim.sim import cycle  # noqa: E402
from vtasim.sim.engines import check_result  # noqa: E402

LAYERS = ["depthwise_conv2d.56.56.64.3.1.1", "depthwise_conv2d.56.56.64.3.1.2",
          "depthwise_conv2d.14.14.256.3.1.1", "depthwise_conv2d.14.14.256.3.1.2"]


def _candidates(wl, cfg, form, per_thread=3):
    """Per thread setting (none, oc_nthread = 2, h_nthread = 2), the ``per_thread`` largest tiles that fit
    the scratchpads divided among the threads (fewest tiles first, then the widest)."""
    ext = split_extents(wl, cfg)
    taps = wl.k * wl.k
    out = []
    for threads in ({}, {"oc_nthread": 2}, {"h_nthread": 2}):
        n = 2 if threads else 1
        small = SimpleNamespace(inp_depth=cfg.inp_depth // n, wgt_depth=cfg.wgt_depth // n,
                                acc_depth=cfg.acc_depth // n, uop_depth=cfg.uop_depth)
        tiles = []
        for h in (d for d in range(1, ext["tile_h"] + 1) if ext["tile_h"] % d == 0):
            for w in (d for d in range(2 if ext["tile_w"] > 1 else 1, ext["tile_w"] + 1) if ext["tile_w"] % d == 0):
                fits = (taps * h * w + taps + 1 <= small.acc_depth) if form == "alu" else \
                    wl.tile_fits(small, 1, h, w, 1, 1, 1)
                if fits:
                    tiles.append(((ext["tile_h"] // h) * (ext["tile_w"] // w), -w, h, w))
        for _, _, h, w in sorted(tiles)[:per_thread]:
            knobs = {"tile_h": [ext["tile_h"] // h, h], "tile_w": [ext["tile_w"] // w, w], **threads}
            if form == "alu":
                knobs["dw_alu"] = 1
            try:
                out.append(check_knobs(wl, cfg, knobs))
            except CompileError:
                pass
    return out


def _measure(name, cfg, knobs):
    c = compile_workload(name, cfg, knobs=knobs)
    res = cycle.run_image(c.image)
    bad = check_result(c.image, res)
    if bad:
        raise SystemExit(f"{name} {knobs}: output differs from numpy: {bad[0]}")
    k = res.counters
    busy = res.breakdown["compute"]["busy"] if "compute" in res.breakdown else 0
    return {"cycles": int(res.cycles), "gemm": k["gemm_counter"], "alu": k["alu_counter"],
            "acc_bytes": k["acc_load_nbytes"], "busy": busy / max(res.cycles, 1), "knobs": knobs}


def best(name, cfg, form):
    wl = parse_workload(name, cfg)
    if form == "alu" and "dw_alu" not in knob_space(wl, cfg):
        return None
    rows = []
    for knobs in _candidates(wl, cfg, form):
        try:
            rows.append(_measure(name, cfg, knobs))
        except CompileError:
            continue
    return min(rows, key=lambda r: r["cycles"]) if rows else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None)
    ap.add_argument("--layers", default=",".join(LAYERS))
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    print(f"config {cfg.bitstream}")
    head = f"{'layer':<36}{'form':<6}{'cycles':>12}{'GEMM uops':>12}{'ALU uops':>12}{'compute busy':>14}" \
           f"{'ACC load B':>12}  knobs"
    print(head)
    print("-" * len(head))
    for name in args.layers.split(","):
        rows = {form: best(name, cfg, form) for form in ("gemm", "alu")}
        for form, r in rows.items():
            if r is None:
                print(f"{name:<36}{form:<6}{'-':>12}  (not expressible: stride > 1)")
                continue
            kn = {k: v for k, v in r["knobs"].items() if k in ("tile_h", "tile_w", "oc_nthread", "h_nthread")}
            print(f"{name:<36}{form:<6}{r['cycles']:>12,}{r['gemm']:>12,}{r['alu']:>12,}{r['busy']:>13.1%}"
                  f"{r['acc_bytes']:>12,}  {kn}")
        if rows["alu"] is not None:
            print(f"{'':<36}ALU / GEMM cycles: {rows['alu']['cycles'] / rows['gemm']['cycles']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
