"""RTL harness speed: simulated M cycles/s per ResNet-18 layer, old harness vs. new, one run.

    python bench/rtl_speed.py                         # C2-C11: old harness, base, new, cycle engine
    python bench/rtl_speed.py --base main~3           # the base RTL from another git revision
    python bench/rtl_speed.py --layers C2,C5 --sweep  # also each harness change alone (one build each)

The harnesses are Verilator builds (each cached like any build):

* ``old``: cocotb's Clock drives ``clk`` through VPI, C++ at -O1 (the harness before the testbench
  made its own clock), on this checkout's RTL;
* ``base``: the RTL and testbench of the git revision ``--base`` (default ``main``) in the default
  build (same options and main loop as ``new``), so its ratio to ``new`` is the gain of the RTL
  changes since that revision (``--base ''`` leaves it out);
* ``hdl clock``: this checkout's RTL in the default build's options, but clocked by the testbench
  (``always #5``, Verilator ``--timing``) and cocotb's main loop, as before vtasim had its own;
* ``new``: the default build (:data:`vtasim.sim.rtl.runner.VERILATOR_ARGS`, vtasim's main loop
  ``hw/rtl/tb/verilator_main.cpp`` makes the clock and does no VPI work while a job runs).

``--sweep`` adds one build per change, each applied alone to ``old``: the clock in the HDL, the C++
optimisation level, ``--threads 2`` (on two shared cores it had not finished C2-C11 after 13
minutes: pick others with ``--only``), and the removal of Verilator's ``-O3`` and ``--x-assign fast``;
and ``new + -fno-dfg``, Verilator's data-flow optimiser off on the default build.
Every variant runs all layers in one simulator process; a layer's rate is its cycles over the
simulator's time from launch to ``done`` (build, start-up and file exchange excluded), both the
wall time and the simulator process's CPU time (the CPU rate is the steadier one on a loaded
machine).  Every RTL run is diffed against the cycle engine (``vtasim.sim.diff.compare``: retire records,
cycles, output bytes); a row that differs is flagged, a rate of a wrong run means nothing.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vtasim.hw.config import load_config  # noqa: E402
from vtasim.sim.rtl.runner import VERILATOR_ARGS, default_clock  # noqa: E402

# The Verilator options of the harness before the testbench made its own clock.
OLD_ARGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal", "-CFLAGS", "-O1")
REPO = Path(__file__).resolve().parents[1]


def _swap(args, old, new):
    """``args`` with the option sequence ``old`` replaced by ``new`` (must be present)."""
    args, old = list(args), list(old)
    for k in range(len(args) - len(old) + 1):
        if args[k:k + len(old)] == old:
            return tuple(args[:k] + list(new) + args[k + len(old):])
    raise ValueError(f"{old} not in {args}")


def variants(sweep: bool, base_rtl: Path | None = None) -> dict:
    """name -> (clock, verilator args, RTL directory or None for this checkout's)."""
    out = {"old": ("cocotb", OLD_ARGS, None)}
    if base_rtl is not None:
        out["base"] = ("hdl", VERILATOR_ARGS, base_rtl)
    out["hdl clock"] = ("hdl", VERILATOR_ARGS, None)
    out["new"] = (default_clock("verilator"), VERILATOR_ARGS, None)
    if sweep:
        out.update({
            "old + hdl clock": ("hdl", OLD_ARGS, None),
            "old + C++ -O2": ("cocotb", _swap(OLD_ARGS, ["-CFLAGS", "-O1"], ["-CFLAGS", "-O2"]), None),
            "old + C++ -O3": ("cocotb", _swap(OLD_ARGS, ["-CFLAGS", "-O1"], ["-CFLAGS", "-O3"]), None),
            "old + --threads 2": ("cocotb", OLD_ARGS + ("--threads", "2"), None),
            "old - Verilator -O3": ("cocotb", _swap(OLD_ARGS, ["-O3"], []), None),
            "old - --x-assign fast": ("cocotb", _swap(OLD_ARGS, ["--x-assign", "fast"], []), None),
            "new + -fno-dfg": (default_clock("verilator"), VERILATOR_ARGS + ("-fno-dfg",), None),
        })
    return out


def export_rtl(rev: str, into: Path) -> Path:
    """The RTL directory (``hw/rtl``, testbench included) of git revision ``rev``, extracted into ``into``."""
    try:
        tar = subprocess.run(["git", "-C", str(REPO), "archive", rev, "hw/rtl"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        raise SystemExit(f"--base {rev!r}: not a git revision of {REPO} with hw/rtl "
                         f"({err.decode(errors='replace').strip() or exc})") from None
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(into, filter="data")
    return into / "hw" / "rtl"


def _run_variant(cfg, images, clock, args, rtl_dir=None):
    """Build (or reuse) the variant and run every image in one simulator process."""
    from vtasim.sim.rtl import watchdog_for
    from vtasim.sim.rtl.results import to_run_result
    from vtasim.sim.rtl.runner import Job, get_build, run_jobs
    t = time.perf_counter()
    build = get_build(cfg, "verilator", clock=clock, verilator_args=args,
                      rtl_dir=rtl_dir, tb_file=(rtl_dir / "tb" / "tb_top.v") if rtl_dir else None,
                      dram_bytes=max(im.dram_size for im, _ in images))
    build_s = time.perf_counter() - t
    jobs = [Job(im.dram(), im.insn_addr, im.insn_count, watchdog_for(m.cycles)) for im, m in images]
    t = time.perf_counter()
    outcomes = run_jobs(build, jobs)
    batch_s = time.perf_counter() - t
    return build_s, batch_s, [to_run_result(im, o, j.max_cycles) for (im, _), o, j in zip(images, outcomes, jobs)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", default="C2,C3,C4,C5,C6,C7,C8,C9,C10,C11")
    p.add_argument("--reduce", type=int, default=1, help="spatial reduction of the layers (1 = full)")
    p.add_argument("--sweep", action="store_true", help="also each harness change alone")
    p.add_argument("--only", default=None, help="comma-separated variant names to run (old always runs)")
    p.add_argument("--base", default="main", help="git revision of the base variant's RTL ('' = none)")
    p.add_argument("--config", type=Path, default=None)
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    tmp = tempfile.TemporaryDirectory(prefix="vtasim-base-rtl-")
    try:
        base_rtl = export_rtl(args.base, Path(tmp.name)) if args.base else None
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.diff import compare

    names = args.layers.split(",")
    imgs = [compile_workload(f"resnet18.{n}", cfg, reduce=args.reduce).image for n in names]
    cycle_run(imgs[0])                                   # JIT warm-up, not timed
    model = [cycle_run(im) for im in imgs]
    runs = {}
    chosen = variants(args.sweep, base_rtl)
    if args.only:
        keep = {"old"} | set(args.only.split(","))
        unknown = keep - set(chosen)
        if unknown:
            p.error(f"--only: no variant {', '.join(sorted(unknown))} (variants: {', '.join(chosen)})")
        chosen = {n: v for n, v in chosen.items() if n in keep}
    for name, (clock, vargs, rtl_dir) in chosen.items():
        build_s, batch_s, rtl = _run_variant(cfg, list(zip(imgs, model)), clock, vargs, rtl_dir)
        runs[name] = rtl
        src = f"RTL of {args.base}" if rtl_dir else "this RTL"
        print(f"{name:<24} {src}, clock {clock:<6} {' '.join(vargs)}: build {build_s:.0f} s (0 = cached), "
              f"{len(imgs)} layers in one simulator process {batch_s:.1f} s")
    tmp.cleanup()
    head = f"{'layer':<8}{'cycles':>10}" + "".join(f"{n[:22]:>24}" for n in runs) + f"{'cycle engine':>14}"
    print("\nM simulated cycles/s, wall (CPU) from launch to done")
    print(head)
    print("-" * len(head))
    tot_cycles = 0
    tot = {n: [0.0, 0.0] for n in runs}
    for k, (name, m) in enumerate(zip(names, model)):
        row = f"{name:<8}{m.cycles:>10}"
        tot_cycles += m.cycles
        bad = []
        for n, rtl in runs.items():
            r = rtl[k]
            if not compare(m, r, imgs[k]).ok:
                bad.append(n)
            tot[n][0] += r.wall_s
            tot[n][1] += r.cpu_s
            row += f"{m.cycles / r.wall_s / 1e6:>15.2f} ({m.cycles / r.cpu_s / 1e6:5.2f})"
        row += f"{m.cycles / m.wall_s / 1e6:>14.1f}"
        print(row + (f"  DIFFERS FROM THE CYCLE ENGINE: {', '.join(bad)}" if bad else ""))
    print("-" * len(head))
    print(f"{'all':<8}{tot_cycles:>10}" + "".join(f"{tot_cycles / w / 1e6:>15.2f} ({tot_cycles / c / 1e6:5.2f})"
                                                 for w, c in tot.values()))
    print()
    for ref in ("old", "base", "hdl clock"):
        if ref in tot:
            b = tot[ref]
            print(f"speed-up over {ref}, wall (CPU): " + ", ".join(
                f"{n} {b[0] / w:.2f}x ({b[1] / c:.2f}x)" for n, (w, c) in tot.items() if n not in ("old", "base", ref)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
