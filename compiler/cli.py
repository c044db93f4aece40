"""``vtasim demo``, ``vtasim compile`` and ``vtasim tune`` (registered through the ``vtasim.commands`` entry point).

::

    vtasim compile resnet18.C2 --out c2                  # TopHub knobs where there is a record
    vtasim compile resnet18.C5 --reduce 4 --knobs '{"tile_h": [1, 7]}' --dump-ir ir/ --out c5
    vtasim compile dense.16x512x1008 --log tune.jsonl --out d
    vtasim tune resnet18.C8 --trials 64 --jobs 2 --log tune.jsonl
    vtasim run c2 --engine cycle --check               # the compiled image replays unchanged
    vtasim sweep sweep.toml --out runs/sweep.csv       # design-space sweep on Dask (compiler/scale)
    vtasim dse runs/sweep.csv --out runs/dse           # Pareto fronts, sensitivity plots
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from vtasim.hw.files import load_json, parse_json
from vtasim.sim.cli.options import add_config
from vtasim.sim.rtl.runner import SIMULATORS

__all__ = ["add_commands"]


def _knobs_from_args(args, wl, cfg):
    """(knobs, source) from --knobs / --log / TopHub / fallback, in that order of preference."""
    from vtasim.compiler.errors import CompileError
    from vtasim.compiler.tuning.knobs import best_from_log, fallback_knobs, tophub_knobs, tuned_sizes
    if args.knobs is not None:
        if os.path.lexists(args.knobs):         # a file: regular, bounded, strict JSON (vtasim.hw.files)
            knobs = load_json(args.knobs, "--knobs file", 1 << 20, error=CompileError)
        else:
            knobs = parse_json(args.knobs, "--knobs (neither a file nor a JSON object)", CompileError)
        if not isinstance(knobs, dict):
            raise CompileError(f"--knobs must be a JSON object, got {type(knobs).__name__}")
        return knobs, "--knobs"
    if args.log is not None:
        rec = best_from_log(args.log, args.workload, cfg, reduce=args.reduce)
        if rec is None:
            sizes = tuned_sizes(args.log, args.workload, cfg)
            if sizes:
                raise CompileError(f"tuning log {args.log} has {args.workload} on {cfg.bitstream} tuned at "
                                   f"{', '.join(_size(args.workload, cfg, r) for r in sizes)}, not at the size asked, "
                                   f"{_size(args.workload, cfg, args.reduce)}: compile with that --reduce or tune "
                                   f"this size")
            raise CompileError(f"tuning log {args.log} has no error-free record of {args.workload} on {cfg.bitstream}")
        return rec["knobs"], f"log {args.log} ({rec['cycles']} cycles)"
    if args.fallback:
        return fallback_knobs(wl, cfg), "fallback"
    top = tophub_knobs(wl, cfg)
    if top is not None:
        return top, "TopHub" if args.reduce == 1 else f"TopHub (adapted to reduce={args.reduce})"
    if hasattr(wl, "tile_fits"):              # grouped / depthwise / dilated / transposed: no TopHub
        from vtasim.compiler.tuning.knobs import fitting_knobs
        return fitting_knobs(wl, cfg), "the largest tiles that fit (no TopHub record)"
    return fallback_knobs(wl, cfg), "fallback (no TopHub record)"


def _size(workload: str, cfg, reduce: int) -> str:
    """``--reduce 4 (7x7)``: a size of the workload as the command line spells it, with its H x W."""
    from vtasim.compiler.tuning.workloads import parse_workload
    wl = parse_workload(workload, cfg, reduce=reduce)
    dims = f" ({wl.h}x{wl.w})" if hasattr(wl, "h") and hasattr(wl, "w") else ""
    return f"--reduce {reduce}{dims}"


def cmd_compile(args) -> int:
    from vtasim.hw.config import load_config
    from vtasim.compiler.ops import compile_workload
    from vtasim.compiler.tuning.workloads import check_seed, parse_workload
    check_seed(args.seed, "compile --seed")
    cfg = load_config(args.config)
    wl = parse_workload(args.workload, cfg, reduce=args.reduce)
    knobs, source = _knobs_from_args(args, wl, cfg)
    t0 = time.perf_counter()
    compiled = compile_workload(args.workload, cfg, knobs=knobs, reduce=args.reduce, seed=args.seed,
                                dump_ir=args.dump_ir)
    dt = time.perf_counter() - t0
    out = compiled.image.save(args.out)
    st = compiled.stats
    print(f"{wl.name}: knobs from {source}: {json.dumps(compiled.knobs, sort_keys=True)}")
    print(f"compiled in {dt:.2f} s: {compiled.image.insn_count} instructions, {st.get('uop_kernels', 0)} uop kernels, "
          f"{st.get('uop_loads', 0)} uop loads, DRAM {compiled.image.dram_size} bytes -> {out}")
    print(compiled.output_fractions())
    if args.dump_ir:
        print(f"IR after every pass -> {args.dump_ir}")
    print(f"replay: vtasim run {out} --engine cycle --check")
    return 0


def cmd_tune(args) -> int:
    from vtasim.hw.config import load_config
    from vtasim.compiler.tuning.knobs import check_log_target, fallback_knobs, tophub_knobs
    from vtasim.compiler.tuning.tune import measure, tune
    from vtasim.compiler.tuning.workloads import check_seed, parse_workload
    check_seed(args.seed, "tune --seed")
    if args.log is not None:
        check_log_target(args.log)          # before any trial: a FIFO would block the first append
    cfg = load_config(args.config)
    from vtasim.sim.scale.cluster import client_from_args, cluster_option, require_cluster, wants_cluster
    if wants_cluster(args):
        require_cluster(f"vtasim tune {cluster_option(args)}")
    wl = parse_workload(args.workload, cfg, reduce=args.reduce)
    if wants_cluster(args):         # --workers N / --scheduler ADDR: the trials run on Dask
        with client_from_args(args, log=lambda s: print(s, flush=True), what="tune") as client:
            result = tune(args.workload, cfg, trials=args.trials, log=args.log, seed=args.seed,
                          reduce=args.reduce, client=client)
    else:
        result = tune(args.workload, cfg, trials=args.trials, jobs=args.jobs, log=args.log, seed=args.seed,
                      reduce=args.reduce)
    best = result.best()
    rows = [("tuned", best)]
    top = tophub_knobs(wl, cfg)
    if top is not None:
        rows.append(("TopHub", measure(args.workload, args.reduce, cfg.to_dict(), top)))
    if not args.skip_fallback:
        rows.append(("fallback", measure(args.workload, args.reduce, cfg.to_dict(), fallback_knobs(wl, cfg))))
    ideal = wl.ideal_gemm_uops(cfg)
    print(f"{wl.name} on {cfg.bitstream}: {len(result.records)} trials "
          f"({sum(r['cycles'] is None for r in result.records)} did not compile); ideal GEMM uops {ideal}")
    print(f"{'knobs':9s} {'cycles':>12s} {'GEMM util':>9s}  knob values")
    for label, rec in rows:
        if rec is None or rec["cycles"] is None:
            err = rec["error"] if rec else "no trial compiled"
            print(f"{label:9s} {'-':>12s} {'-':>9s}  {err}")
            continue
        util = rec["gemm_uops"] / rec["cycles"]
        print(f"{label:9s} {rec['cycles']:12,d} {util:9.3f}  {json.dumps(rec['knobs'], sort_keys=True)}")
    if args.log:
        print(f"log: {args.log} (vtasim compile {args.workload} --log {args.log} --out DIR)")
    return 0 if best is not None else 2


def cmd_demo(args) -> int:
    from vtasim.hw.config import load_config
    from vtasim.compiler.demo import run_demo
    if args.rtl:
        from vtasim.sim.rtl import require
        require(args.rtl, "vtasim demo --rtl")
    return run_demo(load_config(args.config), Path(args.out), rtl=args.rtl, workload=args.workload,
                    reduce=args.reduce)


def add_commands(sub) -> None:
    p = sub.add_parser("demo", help="compile ResNet-18 C8, run it on the functional and cycle engines, check, report")
    add_config(p)
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="where the image, IR, traces and plot go")
    p.add_argument("--rtl", choices=SIMULATORS, default=None,
                   help="also run the RTL on this simulator and compare it with the cycle engine")
    p.add_argument("--workload", default="resnet18.C8", help="another ResNet-18 layer (resnet18.C2 ... C11)")
    p.add_argument("--reduce", type=int, default=1, help="divide H and W by this (quick runs)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("compile", help="compile a catalogue workload (ResNet-18 layer, dense, gemm, vadd) to a memory image")
    p.add_argument("workload", help="resnet18.C2..C11, conv2d.H.W.CIN.COUT.K.PAD.STRIDE, dense.BxINxOUT, gemm.MxKxN, vadd.N")
    knobs = p.add_mutually_exclusive_group()
    knobs.add_argument("--knobs", default=None, help="knob JSON object (or a file holding one)")
    knobs.add_argument("--log", type=Path, default=None,
                       help="tuning log: use its best record of this workload at this --reduce")
    knobs.add_argument("--fallback", action="store_true", help="AutoTVM's fallback knobs (slow schedules)")
    p.add_argument("--reduce", type=int, default=1, help="divide a conv layer's H and W by this (quick runs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    add_config(p)
    p.add_argument("--dump-ir", type=Path, default=None, help="write the IR after every pass into this directory")
    p.add_argument("--out", type=Path, required=True, help="memory image directory")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("tune", help="search a workload's schedule knobs with the cycle engine as cost model")
    p.add_argument("workload", help="a catalogue workload, as for vtasim compile")
    p.add_argument("--trials", type=int, default=32, help="knob settings measured")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (without Dask)")
    p.add_argument("--log", type=Path, default=None, help="append every trial to this JSON-lines log")
    p.add_argument("--reduce", type=int, default=1, help="divide a conv layer's H and W by this (the size tuned)")
    p.add_argument("--seed", type=int, default=0, help="seed of the knob search")
    add_config(p)
    p.add_argument("--skip-fallback", action="store_true", help="do not measure the (slow) fallback knobs")
    from vtasim.sim.scale.cluster import add_cluster_options
    add_cluster_options(p, default_workers=None)    # --workers N / --scheduler ADDR: trials on Dask
    p.set_defaults(func=cmd_tune)

    from vtasim.compiler.scale.cli import add_scale_commands
    add_scale_commands(sub)
