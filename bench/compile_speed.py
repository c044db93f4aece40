"""Compiler bench: per ResNet-18 layer, compile time, cycles, GEMM utilisation and DRAM bytes for
the fallback, TopHub and tuned knobs, all measured in one run.

    python bench/compile_speed.py                          # C2-C11 full size, 24 tuning trials/layer
    python bench/compile_speed.py --layers C2,C8 --trials 48 --jobs 2
    python bench/compile_speed.py --reduce 4 --no-fallback --log runs/bench_tune.jsonl

Columns: ``compile s`` wall time of compile_workload (lower + passes + codegen + runtime + image,
numpy reference included), ``insns`` instructions, ``cycles`` from the cycle engine, ``util`` GEMM
uops / cycles (1.0 = the GEMM core busy every cycle), ``DRAM MB`` bytes moved by loads and stores
(the fsim counters), ``ideal`` the GEMM uop count of spec 7.1.  ``tuned`` is the best of an
evolutionary search seeded with TopHub (``vtasim.compiler.tuning.tune``), so it is never worse than TopHub; the
sums of cycles over the layers are printed for each knob set.  The machine is shared: compile times
are wall times of this run; cycles are exact.  It asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtasim.hw.config import load_config  # noqa: E402
from vtasim.compiler.tuning.knobs import fallback_knobs, tophub_knobs  # noqa: E402
from vtasim.compiler.ops import compile_workload  # noqa: E402
from vtasim.compiler.tuning.tune import tune  # noqa: E402
from vtasim.compiler.tuning.workloads import RESNET18, parse_workload  # noqa: E402
from vtasim.sim import cycle  # noqa: E402

_BYTES = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes", "out_store_nbytes")


def measure(name, cfg, knobs, reduce):
    t = time.perf_counter()
    c = compile_workload(name, cfg, knobs=knobs, reduce=reduce, with_expected=False)
    dt = time.perf_counter() - t
    res = cycle.run_image(c.image)
    gemm = res.counters["gemm_counter"]
    return {"compile_s": dt, "insns": c.image.insn_count, "cycles": res.cycles, "util": gemm / res.cycles,
            "dram_mb": sum(res.counters[k] for k in _BYTES) / 1e6, "knobs": c.knobs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--layers", default=",".join(n.split(".")[1] for n in RESNET18))
    ap.add_argument("--reduce", type=int, default=1)
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--log", type=Path, default=None, help="append every tuning trial to this JSON-lines log")
    ap.add_argument("--no-fallback", action="store_true", help="skip the (slow, instruction-heavy) fallback knobs")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    layers = [f"resnet18.{x.strip()}" for x in args.layers.split(",") if x.strip()]
    cycle.run_image(compile_workload("vadd.256", cfg).image)          # JIT warm-up outside the timings
    kinds = (["fallback"] if not args.no_fallback else []) + ["TopHub", "tuned"]
    totals = {k: 0 for k in kinds}
    print(f"config {cfg.bitstream}, reduce {args.reduce}, {args.trials} tuning trials per layer, {args.jobs} jobs")
    print(f"{'layer':6s} {'knobs':8s} {'compile s':>9s} {'insns':>8s} {'cycles':>12s} {'util':>6s} "
          f"{'DRAM MB':>8s} {'ideal':>8s}")
    for name in layers:
        wl = parse_workload(name, cfg, reduce=args.reduce)
        rows = {}
        if "fallback" in kinds:
            rows["fallback"] = measure(name, cfg, fallback_knobs(wl, cfg), args.reduce)
        top = tophub_knobs(wl, cfg)
        rows["TopHub"] = measure(name, cfg, top, args.reduce) if top else None
        result = tune(name, cfg, trials=args.trials, jobs=args.jobs, log=args.log, reduce=args.reduce, progress=None)
        best = result.best()
        rows["tuned"] = measure(name, cfg, best["knobs"], args.reduce) if best else None
        for kind in kinds:
            r = rows[kind]
            if r is None:
                print(f"{wl.name:6s} {kind:8s} {'-':>9s}  (no record)")
                continue
            totals[kind] += r["cycles"]
            print(f"{wl.name:6s} {kind:8s} {r['compile_s']:9.3f} {r['insns']:8,d} {r['cycles']:12,d} {r['util']:6.3f} "
                  f"{r['dram_mb']:8.2f} {wl.ideal_gemm_uops(cfg):8,d}")
        if rows["tuned"]:
            print(f"{'':6s} tuned knobs {rows['tuned']['knobs']}")
        sys.stdout.flush()
    print("sum of cycles: " + ", ".join(f"{k} {v:,d}" for k, v in totals.items()))
    if "TopHub" in totals and totals["TopHub"]:
        print(f"tuned / TopHub: {totals['tuned'] / totals['TopHub']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
