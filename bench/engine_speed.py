"""Engine speed: functional vs cycle engine wall time, simulated cycles per second, and the host
limit (a float32 BLAS matmul with the same multiply-accumulate count), measured in one run.

    python bench/engine_speed.py                         # C2-C11 full size + GEMM-bound stream
    python bench/engine_speed.py --layers C2,C5 --reduce 4
    python bench/engine_speed.py --config config/presets/1x32x32.json --no-synthetic
    python bench/engine_speed.py --maximal-uops 8        # the ISA's largest nests (minutes on the cycle engine)

Columns: ``func s`` our functional engine (``sim.functional``; not TVM's fsim, which is another
program), ``cycle s`` cycle engine (JIT excluded: warmed up first), ``cyc/func`` their ratio (the
target is <= 2), ``Mcyc/s`` simulated cycles per second of the cycle engine (target >= 20 on the
GEMM-bound stream), ``Mc/cpu-s`` the same per second of process CPU time (steadier on a loaded
machine), ``blas s`` np.dot on float32 of the same MAC count, ``cyc/blas`` the cycle engine's time
over that host limit's (how many times slower than BLAS it is).  The maximal-nest table gives the
functional engine's uops per second on the ISA's largest legal nests and ``func/cyc``, its time
over the cycle engine's (the reliability issue asks for at most 10).  The machine is shared and noisy:
ratios measured in one run are what this prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hw.config import load_config  # noqa: E402
from sim import functional  # noqa: E402
from sim import cycle  # noqa: E402
from compiler.ops import compile_workload  # noqa: E402
from compiler.workloads import RESNET18, parse_workload  # noqa: E402
from sim.programs.synthetic import MAXIMAL_KINDS, gemm_bound_image, maximal_nest_image  # noqa: E402

LAYERS = [n.split(".")[1] for n in RESNET18]


def blas_seconds(macs: int, k: int, n: int) -> float:
    """Wall time of one float32 (m x k) @ (k x n) with m*k*n ~= macs (best of 2 after warm-up)."""
    m = max(1, round(macs / (k * n)))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    np.dot(a[:8], b)
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        np.dot(a, b)
        best = min(best, time.perf_counter() - t)
    return best


def both_engines(name, image):
    """``(functional result, its wall s, cycle result, its wall s)``; exits if their outputs differ."""
    t = time.perf_counter()
    ref = functional.run_image(image)
    t_fn = time.perf_counter() - t
    t = time.perf_counter()
    res = cycle.run_image(image, progress=False)
    t_cy = time.perf_counter() - t
    if dict(res.outputs) != dict(ref.outputs):
        raise SystemExit(f"{name}: the engines disagree on the output bytes")
    return ref, t_fn, res, t_cy


def measure(name, image, k, n, macs_per_uop):
    ref, t_fn, res, t_cy = both_engines(name, image)
    if image.expected and dict(res.outputs) != image.expected:
        raise SystemExit(f"{name}: output differs from the reference")
    macs = res.counters["gemm_counter"] * macs_per_uop
    t_blas = blas_seconds(macs, k, n)
    return dict(name=name, cycles=res.cycles, uops=res.counters["gemm_counter"], fn=t_fn, cy=t_cy,
                core=res.wall_s, cpu=res.cpu_s, blas=t_blas)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated, e.g. C2,C5")
    ap.add_argument("--reduce", type=int, default=1, help="divide H and W by this (quick runs)")
    ap.add_argument("--config", default=None, help="VTA config json (default: config/vta_config.json)")
    ap.add_argument("--no-synthetic", action="store_true", help="skip the GEMM-bound synthetic stream")
    ap.add_argument("--maximal-uops", type=int, default=1,
                    help="uops of the maximal-nest rows (16383 x 16383 x N; 0 skips them; 8 = the ISA's worst case)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    layers = [x for x in args.layers.split(",") if x]
    unknown = [x for x in layers if x not in LAYERS]
    if unknown:
        ap.error(f"unknown layer {unknown[0]!r}; layers: {', '.join(LAYERS)}")
    macs_per_uop = cfg.batch * cfg.block_in * cfg.block_out
    cycle.engine.warm_up()
    rows = []
    for name in layers:
        c = parse_workload(f"resnet18.{name}", cfg, reduce=args.reduce)
        image = compile_workload(f"resnet18.{name}", cfg, reduce=args.reduce).image    # TopHub knobs
        rows.append(measure(name if args.reduce == 1 else f"{name}/{args.reduce}", image,
                            c.cin * c.k * c.k, c.cout, macs_per_uop))
    if not args.no_synthetic:
        rows.append(measure("gemm-bound", gemm_bound_image(cfg), cfg.block_in * 16, cfg.block_out * 16,
                            macs_per_uop))
    head = (f"{'workload':<11}{'cycles':>12}{'GEMM uops':>11}{'func s':>9}{'cycle s':>9}{'cyc/func':>9}"
            f"{'Mcyc/s':>8}{'Mc/cpu-s':>9}{'Muop/s':>8}{'blas s':>9}{'cyc/blas':>9}")
    print(f"config {cfg.bitstream}  (cycle s = run_image wall incl. setup; Mcyc/s from the core's wall_s)")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<11}{r['cycles']:>12,}{r['uops']:>11,}{r['fn']:>9.3f}{r['cy']:>9.3f}"
              f"{r['cy'] / r['fn']:>9.2f}{r['cycles'] / r['core'] / 1e6:>8.1f}{r['cycles'] / r['cpu'] / 1e6:>9.1f}"
              f"{r['uops'] / r['core'] / 1e6:>8.1f}"
              f"{r['blas']:>9.4f}{r['cy'] / r['blas']:>9.1f}")
    tot = {k: sum(r[k] for r in rows) for k in ("cycles", "fn", "cy", "core", "cpu", "blas")}
    print("-" * len(head))
    print(f"{'total':<11}{tot['cycles']:>12,}{'':>11}{tot['fn']:>9.3f}{tot['cy']:>9.3f}{tot['cy'] / tot['fn']:>9.2f}"
          f"{tot['cycles'] / tot['core'] / 1e6:>8.1f}{tot['cycles'] / tot['cpu'] / 1e6:>9.1f}{'':>8}"
          f"{tot['blas']:>9.4f}{tot['cy'] / tot['blas']:>9.1f}")
    if args.maximal_uops:
        maximal(cfg, args.maximal_uops)
    return 0


def maximal(cfg, uops: int) -> None:
    """The largest legal nests: functional engine uops/s, and its time against the cycle engine's."""
    print()
    print(f"maximal legal nests (16383 x 16383 x {uops} uops on the same rows; bytes compared between engines)")
    head = f"{'nest':<11}{'uops':>14}{'func s':>9}{'func Muop/s':>13}{'cycle s':>9}{'func/cyc':>9}"
    print(head)
    print("-" * len(head))
    for kind in MAXIMAL_KINDS:
        ref, t_fn, res, t_cy = both_engines(f"maximal {kind}", maximal_nest_image(cfg, kind, uops=uops))
        n = ref.counters["gemm_counter"] + ref.counters["alu_counter"]
        print(f"{kind:<11}{n:>14,}{t_fn:>9.3f}{n / max(t_fn, 1e-9) / 1e6:>13,.0f}{t_cy:>9.3f}{t_fn / t_cy:>9.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
