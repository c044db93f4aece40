"""RTL (cocotb + Verilator or Icarus) vs cycle engine: wall time on the same streams, one run.

    python bench/rtl_vs_model.py                     # unit programs + full ResNet-18 C2-C11 + GEMM-bound
    python bench/rtl_vs_model.py --sim icarus --streams unit
    python bench/rtl_vs_model.py --layers C2,C5 --reduce 4

RTL wall time is measured inside the simulator process from launch to ``done`` (the build and the
simulator start-up are excluded and printed separately); the cycle engine's is its ``wall_s`` (JIT
excluded: it is warmed up first).  Both runs must agree on cycles - a row whose cycles differ is
flagged, since a speed ratio between runs that disagree means nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vtasim.hw.config import load_config  # noqa: E402


def _streams(cfg, which, layers, reduce):
    out = []
    if which in ("all", "unit"):
        from vtasim.sim.programs.unit import UNIT_PROGRAMS
        for name in ("gemm", "hw_gemm_u", "hw_blocked_gemm_vt1", "hw_blocked_gemm_vt2", "relu", "hw_alu_add_vec_u"):
            if name in UNIT_PROGRAMS:
                out.append((name, UNIT_PROGRAMS[name](cfg)))
    if which in ("all", "resnet"):
        from vtasim.compiler.ops import compile_workload
        from vtasim.sim.programs.synthetic import gemm_bound_image
        for layer in layers:
            image = compile_workload(f"resnet18.{layer}", cfg, reduce=reduce).image      # TopHub knobs
            out.append((layer + (f"/r{reduce}" if reduce > 1 else ""), image))
        out.append(("gemm_bound", gemm_bound_image(cfg)))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("--streams", choices=("all", "unit", "resnet"), default="all")
    p.add_argument("--layers", default="C2,C3,C4,C5,C6,C7,C8,C9,C10,C11")
    p.add_argument("--reduce", type=int, default=1, help="spatial reduction of the ResNet layers (1 = full)")
    p.add_argument("--config", type=Path, default=None)
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    from vtasim.sim.rtl import run_images
    from vtasim.sim.rtl.runner import get_build
    from vtasim.sim.cycle import run_image as cycle_run

    streams = _streams(cfg, args.streams, args.layers.split(","), args.reduce)
    t = time.perf_counter()
    get_build(cfg, args.sim)
    build_s = time.perf_counter() - t
    cycle_run(streams[0][1])                       # JIT warm-up, not timed
    model = [cycle_run(im) for _, im in streams]
    t = time.perf_counter()
    rtl = run_images([im for _, im in streams], sim=args.sim)
    batch_s = time.perf_counter() - t
    print(f"RTL on {args.sim} ({cfg.model}); build {build_s:.1f} s (cached when ~0); one simulator process "
          f"for {len(streams)} streams: {batch_s:.1f} s including start-up and file exchange")
    head = f"{'stream':<22}{'cycles':>10}{'rtl s':>10}{'rtl cyc/s':>12}{'model s':>10}{'model cyc/s':>13}{'rtl/model':>11}"
    print(head)
    print("-" * len(head))
    tot_r = tot_m = 0.0
    for (name, _), m, r in zip(streams, model, rtl):
        flag = "" if m.cycles == r.cycles else f"  CYCLES DIFFER (rtl {r.cycles})"
        tot_r += r.wall_s
        tot_m += m.wall_s
        print(f"{name:<22}{m.cycles:>10}{r.wall_s:>10.3f}{m.cycles / r.wall_s:>12.3g}{m.wall_s:>10.4f}"
              f"{m.cycles / m.wall_s:>13.3g}{r.wall_s / m.wall_s:>11.0f}{flag}")
    print("-" * len(head))
    print(f"{'total':<22}{'':>10}{tot_r:>10.3f}{'':>12}{tot_m:>10.4f}{'':>13}{tot_r / tot_m:>11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
