"""Depthwise conv2d on VTA two ways, measured on the cycle engine in one run: the block-diagonal GEMM
(``dw_alu = 0``) against the ALU multiply-accumulate over the taps (``dw_alu = 1``).

    python bench/depthwise.py                              # MobileNet-like layers, default config
    python bench/depthwise.py --layers depthwise_conv2d.14.14.256.3.1.1 --config config/presets/1x8x8.json

For each layer and form it tries the form's largest fitting tiles and the same with ``oc_nthread = 2``
and with ``h_nthread = 2`` (where they apply and compile), and prints the best: cycles, GEMM and ALU
uops (fsim counters), the compute module's busy share, and the bytes loaded into the accumulator.
The ALU form needs stride 1 (a stride-2 window is no 2-D DMA), so stride-2 layers show the GEMM form
only.  Every image is checked bit for bit against the numpy evaluation of its tensor expressions.
It asserts nothing else; cycles are exact.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hw.config import load_config  # noqa: E402
from compiler.errors import CompileError  # noqa: E402
from compiler.knobs import check_knobs, fitting_knobs  # noqa: E402
from compiler.ops import compile_workload  # noqa: E402
from compiler.ops.depthwise_alu import alu_fitting_knobs  # noqa: E402
from compiler.workloads import parse_workload  # noqa: E402
from sim import cycle  # noqa: E402
from sim.engines import check_result  # noqa: E402

LAYERS = ["depthwise_conv2d.56.56.64.3.1.1", "depthwise_conv2d.56.56.64.3.1.2",
          "depthwise_conv2d.14.14.256.3.1.1", "depthwise_conv2d.14.14.256.3.1.2"]


def _variants(wl, cfg, base):
    out = [base]
    for extra in ({"oc_nthread": 2}, {"h_nthread": 2}):
        try:
            out.append(check_knobs(wl, cfg, {**base, **extra}))
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
    try:
        base = alu_fitting_knobs(wl, cfg) if form == "alu" else fitting_knobs(wl, cfg)
        if form == "alu" and "dw_alu" not in check_knobs(wl, cfg, {}):
            return None
    except CompileError:
        return None
    rows = []
    for knobs in _variants(wl, cfg, base):
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
