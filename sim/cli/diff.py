"""``vtasim diff`` and ``vtasim fuzz``: run the RTL and a model on the same images, report divergences.

:func:`diff_image` runs both sides of one image (and writes the waveforms of a ``--waves`` run);
:func:`sim.diff.compare` does the comparing.  Engines are imported when a command runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from hw.config import load_config
from sim.diff import WINDOW_CYCLES, compare
from sim.engines import run_engine
from sim.errors import RtlStopped, SimError
from sim.image import MemoryImage
from sim.result import RunResult
from sim.rtl.runner import DUMP_UNIT_NS, WAVE_FORMATS, wave_format

__all__ = ["add_commands", "diff_image", "cmd_diff", "cmd_fuzz"]

AGAINST = ("cycle", "functional")


def diff_image(image, against: str = "cycle", sim: str = "verilator", waves=False,
               reproduce: str = "", rtl_result=None, out_dir=None, rtl_dir=None, max_cycles=None):
    """Run ``against`` and the RTL on ``image``; the :class:`sim.diff.Diff` (RTL = actual side).

    ``rtl_dir`` runs a different copy of ``hw/rtl`` (the mutation tests do).  The RTL's watchdog is
    ``max_cycles``, by default twice the cycle engine's count plus 10,000 (so a hung RTL ends soon
    after it should have finished)."""
    if against not in AGAINST:
        raise ValueError(f"--against {against!r} is not one of {', '.join(AGAINST)}")
    expected = run_engine(against, image)
    if max_cycles is None:
        model_cycles = expected.cycles if expected.cycles is not None else run_engine("cycle", image).cycles
        max_cycles = 2 * model_cycles + 10_000
    out_dir = Path(out_dir or ".")
    fmt = wave_format(waves)      # the RTL's waveform format (the model's is always VCD)
    error = None
    if rtl_result is None:
        from sim.rtl import run_images
        try:
            rtl_result = run_images([image], sim=sim, waves=waves, rtl_dir=rtl_dir, max_cycles=max_cycles,
                                    waves_file=(out_dir / f"rtl.{fmt}").resolve() if fmt else None)[0]
        except RtlStopped as exc:
            # The RTL stopped (error code, watchdog): diff what it retired before that.
            error = str(exc)
            rtl_result = RunResult("rtl", dram=None, counters={}, outputs={}, cycles=None,
                                   trace=exc.records, dispatch_cycle=exc.dispatch_cycle)
    d = compare(expected, rtl_result, image, reproduce=reproduce, timing=against != "functional", error=error)
    if waves:
        d.waves["actual"] = rtl_result.waves
        t0 = rtl_result.launch_ns or 0.0
        p = rtl_result.clock_ns or 10
        if against == "cycle":
            from waveforms.vcd import write_model_vcd
            # same time base as the RTL's VCD: its launch time and its clock period
            d.waves["expected"] = str(write_model_vcd(image, expected, out_dir / "model.vcd", offset_ns=t0,
                                                      clock_ns=p))
        if d.first is not None and d.waves["actual"]:
            from waveforms.gtkw import write_gtkw
            from waveforms.vcd import signal_widths
            lo, hi = max(0, d.first.cycle - WINDOW_CYCLES), d.first.cycle + WINDOW_CYCLES
            d.waves["gtkw"] = str(write_gtkw(out_dir / "divergence.gtkw", d.waves["actual"],
                                             window_ns=(t0 + lo * p, t0 + hi * p),
                                             widths=signal_widths(image.cfg), unit_ns=DUMP_UNIT_NS))
    return d


def cmd_diff(args) -> int:
    image = MemoryImage.load(args.image_dir)
    repro = (f"vtasim diff {shlex.quote(str(args.image_dir))} --against {args.against} --sim {args.sim}"
             + (f" --waves {args.waves}" if args.waves else ""))
    d = diff_image(image, args.against, args.sim, args.waves, reproduce=repro)
    print(d.report())
    return 0 if d.ok else 1


def _bins(image) -> set:
    from sim.programs.randprog import coverage_bins
    return {k for k, v in coverage_bins(image).items() if v}


def cmd_fuzz(args) -> int:
    from sim.programs.randprog import check_seed, generate
    from sim.rtl import run_images
    check_seed(args.seed, "fuzz --seed")
    if args.n < 1:
        raise SimError(f"fuzz --n {args.n}: the number of programs must be at least 1")
    cfg = load_config(args.config)
    cfg_opt = f" --config {shlex.quote(str(args.config))}" if args.config else ""
    cfg_opt += " --imm-src-ne-dst" if args.imm_src_ne_dst else ""
    seeds = [args.seed + i for i in range(args.n)]
    print(f"vtasim fuzz: {args.n} random programs, seeds {seeds[0]}..{seeds[-1]}, config {cfg.model}, "
          f"cycle engine vs rtl/{args.sim}")
    images = [generate(cfg, s, imm_src_ne_dst=args.imm_src_ne_dst) for s in seeds]
    expected = [run_engine("cycle", im) for im in images]
    # A hung RTL stops soon after the model says it should have finished.
    actual = run_images(images, sim=args.sim, errors="return",
                        max_cycles=[2 * e.cycles + 10_000 for e in expected])
    hit, failures, matched_total = {}, [], 0
    for seed, image, exp, act in zip(seeds, images, expected, actual):
        for b in _bins(image):
            hit[b] = hit.get(b, 0) + 1
        if isinstance(act, BaseException):
            failures.append((seed, image, None, f"RTL error: {act}"))
            continue
        d = compare(exp, act, image)
        matched_total += d.matched
        if not d.ok:
            failures.append((seed, image, d, None))
    _print_coverage(hit, len(images))
    out_root = Path(args.out or ".")
    for seed, image, d, err in failures[:args.max_reports]:
        where = out_root / f"fuzz_seed{seed}"
        image.save(where)
        print(f"--- seed {seed}: MISMATCH (image saved to {where})")
        print(f"reproduce: vtasim fuzz --n 1 --seed {seed}{cfg_opt} --sim {args.sim}   or   "
              f"vtasim diff {where} --against cycle --sim {args.sim}")
        if d is not None:
            d.reproduce = f"vtasim diff {where} --against cycle --sim {args.sim}"
            print(d.report())
        else:
            print(err)
    print(f"seed {args.seed}: {args.n - len(failures)} programs identical, {len(failures)} diverged "
          f"({matched_total} retire records and outputs matched)")
    return 1 if failures else 0


def _print_coverage(hit: dict, n: int):
    """Bins hit out of :data:`sim.programs.randprog.ALL_BINS`, each with the number of programs that hit it,
    grouped by the bin's first word; then the bins no program hit."""
    from sim.programs.randprog import ALL_BINS
    print(f"coverage: {len(hit)} of {len(ALL_BINS)} bins hit by {n} programs (bin: programs hitting it)")
    groups = {}
    for b in ALL_BINS:
        if b in hit:
            groups.setdefault(b.split(":")[0], []).append(f"{b} {hit[b]}")
    for g, items in groups.items():
        print(f"  {g:<6} " + ", ".join(items))
    missed = [b for b in ALL_BINS if b not in hit]
    print("  not hit: " + (", ".join(missed) if missed else "none"))


def add_commands(sub) -> None:
    """Add ``diff`` and ``fuzz`` to an argparse sub-parser collection."""
    p = sub.add_parser("diff", help="run the RTL and a model on an image; report the first divergence")
    p.add_argument("image_dir", type=Path)
    p.add_argument("--against", choices=AGAINST, default="cycle")
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("--waves", nargs="?", const=WAVE_FORMATS[0], choices=WAVE_FORMATS, default=None,
                   help="write rtl.<fst|vcd> (default fst), model.vcd and divergence.gtkw in the current directory")
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("fuzz", help="random legal programs: cycle engine vs RTL, with coverage")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("--out", type=Path, default=None, help="where diverging images are saved (default .)")
    p.add_argument("--max-reports", type=int, default=3)
    p.add_argument("--imm-src-ne-dst", action="store_true",
                   help="also emit immediate ALU ops with src != dst (the Chisel VTA reads src, fsim dst)")
    p.set_defaults(func=cmd_fuzz)
