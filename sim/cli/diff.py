"""``vtasim diff`` and ``vtasim fuzz``: run the RTL and a model on the same images, report divergences.

``vtasim fuzz --workers N | --scheduler ADDR`` runs the campaign on Dask (:mod:`vtasim.sim.scale.fuzz`:
seeds split across workers, coverage merged, every divergence shrunk); without them it runs here,
batch after batch.

:func:`diff_image` runs both sides of one image (and writes the waveforms of a ``--waves`` run);
:func:`vtasim.sim.diff.compare` does the comparing.  Engines are imported when a command runs.
"""

from __future__ import annotations

import shlex
from functools import partial
from pathlib import Path

from vtasim.hw.config import load_config
from vtasim.hw.outfiles import out_dir, sub_dir
from vtasim.sim.diff import WINDOW_CYCLES, compare
from vtasim.sim.engines import run_engine
from vtasim.sim.errors import RtlStopped, SimError
from vtasim.sim.image import MemoryImage
from vtasim.sim.result import RunResult
from vtasim.sim.cli.options import add_config, add_image_dir, add_sim, add_waves
from vtasim.sim.rtl.runner import DUMP_UNIT_NS, wave_format
from vtasim.sim.scale.cluster import add_cluster_options, cluster_option, require_cluster, wants_cluster
from vtasim.sim.scale.fuzz import (CoverageSink, check_coverage_options, fuzz_batch, outcome_text, print_coverage,
                            program_bins, seed_range)

__all__ = ["add_commands", "diff_image", "cmd_diff", "cmd_fuzz"]

AGAINST = ("cycle", "functional")


def diff_image(image, against: str = "cycle", sim: str = "verilator", waves=False,
               reproduce: str = "", rtl_result=None, out_dir=None, rtl_dir=None, max_cycles=None):
    """Run ``against`` and the RTL on ``image``; the :class:`vtasim.sim.diff.Diff` (RTL = actual side).

    ``rtl_dir`` runs a different copy of ``hw/rtl`` (the mutation tests do).  The RTL's watchdog is
    ``max_cycles``, by default the cycle engine's count plus a margin (:func:`vtasim.sim.rtl.watchdog_for`),
    so an RTL that never finishes ends soon after it should have (a deadlock ends at once, the
    testbench detects it)."""
    from vtasim.sim.rtl import watchdog_for
    if against not in AGAINST:
        raise ValueError(f"--against {against!r} is not one of {', '.join(AGAINST)}")
    expected = run_engine(against, image)
    if max_cycles is None:
        model_cycles = expected.cycles if expected.cycles is not None else run_engine("cycle", image).cycles
        max_cycles = watchdog_for(model_cycles)
    out_dir = Path(out_dir or ".")
    fmt = wave_format(waves)      # the RTL's waveform format (the model's is always VCD)
    error = None
    if rtl_result is None:
        from vtasim.sim.engines import run_many
        try:
            rtl_result = run_many("rtl", [image], sim=sim, waves=waves, rtl_dir=rtl_dir, max_cycles=max_cycles,
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
        if rtl_result.waves and rtl_result.cycles is not None:
            from vtasim.sim.cli.waves import write_rtl_view
            d.waves["view"] = str(write_rtl_view(image, rtl_result, rtl_result.waves))
        if against == "cycle":
            from vtasim.waveforms.vcd import write_model_vcd
            # same time base as the RTL's VCD: its launch time and its clock period
            d.waves["expected"] = str(write_model_vcd(image, expected, out_dir / "model.vcd", offset_ns=t0,
                                                      clock_ns=p))
        if d.first is not None and d.waves["actual"]:
            from vtasim.waveforms.gtkw import write_gtkw
            from vtasim.waveforms.vcd import signal_widths
            lo, hi = max(0, d.first.cycle - WINDOW_CYCLES), d.first.cycle + WINDOW_CYCLES
            d.waves["gtkw"] = str(write_gtkw(out_dir / "divergence.gtkw", d.waves["actual"],
                                             window_ns=(t0 + lo * p, t0 + hi * p),
                                             widths=signal_widths(image.cfg), unit_ns=DUMP_UNIT_NS))
    return d


def _rtl_dir(path):
    """``--rtl-dir``: a directory holding the design's ``*.v`` files, else a one-line error."""
    if path is None:
        return None
    if not Path(path).is_dir() or not any(Path(path).glob("*.v")):
        raise SimError(f"--rtl-dir {path}: not a directory of Verilog files (*.v)")
    return Path(path).resolve()


def cmd_diff(args) -> int:
    from vtasim.sim.rtl import require
    require(args.sim, "vtasim diff")
    image = MemoryImage.load(args.image_dir)
    repro = (f"vtasim diff {shlex.quote(str(args.image_dir))} --against {args.against} --sim {args.sim}"
             + (f" --waves {args.waves}" if args.waves else "")
             + (f" --max-cycles {args.max_cycles}" if args.max_cycles is not None else "")
             + (f" --rtl-dir {shlex.quote(str(args.rtl_dir))}" if args.rtl_dir else ""))
    d = diff_image(image, args.against, args.sim, args.waves, reproduce=repro, max_cycles=args.max_cycles,
                   rtl_dir=_rtl_dir(args.rtl_dir))
    if args.waves:
        names = [d.waves.get(k) for k in ("actual", "view", "expected", "gtkw")]
        print("waves: " + ", ".join(str(n) for n in names if n))
    print(d.report())
    return 0 if d.ok else 1


def cmd_fuzz(args) -> int:
    """Random programs in batches of ``--batch``: each batch is generated, run on the cycle engine and
    the RTL (one simulator process), compared and dropped before the next, so memory does not grow
    with ``--n``; diverging images (the first ``--max-reports``) are saved when found."""
    from vtasim.sim.programs.randprog import check_seed
    from vtasim.sim.engines import run_many
    from vtasim.sim.rtl import require
    run_images = partial(run_many, "rtl")
    check_seed(args.seed, "fuzz --seed")
    if args.n < 1:
        raise SimError(f"fuzz --n {args.n}: the number of programs must be at least 1")
    if args.batch < 1:
        raise SimError(f"fuzz --batch {args.batch}: the batch size must be at least 1")
    if args.max_cycles is not None and not 1 <= args.max_cycles < 1 << 32:
        raise SimError(f"fuzz --max-cycles {args.max_cycles} is outside 1 .. 2^32 - 1 (the RTL's 32-bit watchdog)")
    require(args.sim, "vtasim fuzz")
    if wants_cluster(args):
        require_cluster(f"vtasim fuzz {cluster_option(args)}")
    check_coverage_options(args)
    rtl_dir = _rtl_dir(args.rtl_dir)
    cfg = load_config(args.config)
    cfg_opt = f" --config {shlex.quote(str(args.config))}" if args.config else ""
    cfg_opt += " --imm-src-ne-dst" if args.imm_src_ne_dst else ""
    if wants_cluster(args):
        from vtasim.sim.scale.fuzz import run_distributed
        print(f"vtasim fuzz: {args.n} random programs, seeds {args.seed}..{args.seed + args.n - 1}, config "
              f"{cfg.model}, cycle engine vs rtl/{args.sim}, on Dask", flush=True)
        return run_distributed(args, cfg, cfg_opt)
    if rtl_dir is not None:
        run_images = partial(run_images, rtl_dir=rtl_dir)
    rtl_opt = f" --rtl-dir {shlex.quote(str(args.rtl_dir))}" if args.rtl_dir else ""
    first, last = args.seed, args.seed + args.n - 1
    print(f"vtasim fuzz: {args.n} random programs, seeds {first}..{last}, config {cfg.model}, "
          f"cycle engine vs rtl/{args.sim}" + (f", in batches of {args.batch}" if args.n > args.batch else ""),
          flush=True)
    st = _Campaign(args, out_dir(args.out, "--out directory") if args.out else Path("."), cfg_opt, rtl_opt)
    sink = CoverageSink(args.coverage, args.until_saturated) if args.coverage is not None else None
    for lo in range(first, last + 1, args.batch):
        hi = min(lo + args.batch, last + 1)
        counts_before = (st.n_run, st.n_diverged, st.n_errors)
        cov, before, n_before = _batch_coverage(sink, st)
        batch = fuzz_batch(cfg, range(lo, hi), args.sim, args.max_cycles, args.imm_src_ne_dst,
                           run_images if cov is None else partial(run_images, coverage=cov))
        for k in range(len(batch)):
            st.take(*batch[k])
        del batch                          # this batch's images and results go before the next is built
        if args.n > args.batch:
            n_run, n_div, n_err = (now - was for now, was in zip((st.n_run, st.n_diverged, st.n_errors),
                                                                 counts_before))
            print(f"{seed_range(lo, hi)}: " + outcome_text(n_run - n_div, n_div, n_err), flush=True)
        if cov is not None:
            cov.add_bins({b: c - before.get(b, 0) for b, c in st.hit.items() if c > before.get(b, 0)},
                         st.n_run - n_before)
            if sink.add(cov):
                break                      # --until-saturated: K batches in a row added no coverage point
    print_coverage(st.hit, st.n_run)
    if sink is not None:
        sink.finish()
    more = " ..." if st.n_diverged + st.n_errors > len(st.bad_seeds) else ""
    tail = f"; failing seeds {', '.join(map(str, st.bad_seeds))}{more}" if st.bad_seeds else ""
    print(f"{seed_range(first, last + 1)}: " + outcome_text(st.n_run - st.n_diverged, st.n_diverged, st.n_errors)
          + f" ({st.matched} retire records and outputs matched){tail}")
    return 1 if st.n_diverged or st.n_errors else 0


def _batch_coverage(sink, st):
    """A fresh Coverage for the next batch (None without --coverage) and the bin counts before it."""
    if sink is None:
        return None, None, None
    from vtasim.sim.rtl.coverage import Coverage
    return Coverage(), dict(st.hit), st.n_run


class _Campaign:
    """What a fuzz campaign keeps across batches: counts, coverage, the first failing seeds (bounded)."""

    def __init__(self, args, out_root: Path, cfg_opt: str, rtl_opt: str = ""):
        self.args, self.out_root, self.cfg_opt, self.rtl_opt = args, out_root, cfg_opt + rtl_opt, rtl_opt
        self.hit, self.matched, self.reported = {}, 0, 0
        self.n_diverged, self.n_errors, self.n_run, self.bad_seeds = 0, 0, 0, []

    def _failed(self, seed):
        if len(self.bad_seeds) < 20:
            self.bad_seeds.append(seed)

    def take(self, seed, image, exp, act):
        args = self.args
        if image is None:                 # the generator or the cycle engine failed on this seed
            self.n_errors += 1
            self._failed(seed)
            print(f"--- seed {seed}: ERROR {type(act).__name__}: {str(act).splitlines()[0] if str(act) else ''}"
                  f"  (reproduce: vtasim fuzz --n 1 --seed {seed}{self.cfg_opt} --sim {args.sim})", flush=True)
            return
        self.n_run += 1
        for b in program_bins(image):
            self.hit[b] = self.hit.get(b, 0) + 1
        d, err = None, None
        if isinstance(act, BaseException):
            err = f"RTL error: {str(act).splitlines()[0] if str(act) else type(act).__name__}"
        else:
            d = compare(exp, act, image)
            self.matched += d.matched
            if d.ok:
                return
        self.n_diverged += 1
        self._failed(seed)
        if self.reported >= args.max_reports:
            return
        self.reported += 1
        where = sub_dir(self.out_root, f"fuzz_seed{seed}", "fuzz image directory")
        image.save(where)
        print(f"--- seed {seed}: MISMATCH (image saved to {where})")
        print(f"reproduce: vtasim fuzz --n 1 --seed {seed}{self.cfg_opt} --sim {args.sim}   or   "
              f"vtasim diff {where} --against cycle --sim {args.sim}{self.rtl_opt}")
        if d is not None:
            d.reproduce = f"vtasim diff {where} --against cycle --sim {args.sim}{self.rtl_opt}"
            print(d.report())
        else:
            print(err)
        print(flush=True)


def add_commands(sub) -> None:
    """Add ``diff`` and ``fuzz`` to an argparse sub-parser collection."""
    p = sub.add_parser("diff", help="run the RTL and a model on an image; report the first divergence")
    add_image_dir(p)
    p.add_argument("--against", choices=AGAINST, default="cycle",
                   help="the model the RTL is held against: cycle (data and every cycle) or functional (data)")
    add_sim(p)
    add_waves(p, "write rtl.<format> and rtl.gtkw, model.vcd and, at a divergence, divergence.gtkw in the "
                 "current directory")
    p.add_argument("--max-cycles", type=int, default=None,
                   help="RTL watchdog, 1 .. 2^32-1 (default: the cycle engine's count + 1/8 + 10,000)")
    p.add_argument("--rtl-dir", type=Path, default=None, help="another copy of hw/rtl (e.g. a modified design)")
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("fuzz", help="random legal programs: cycle engine vs RTL, with coverage")
    p.add_argument("--n", type=int, default=100, help="number of random programs (seeds SEED .. SEED+N-1)")
    p.add_argument("--seed", type=int, default=0, help="the first program's seed")
    add_config(p, "the programs are generated for")
    add_sim(p)
    p.add_argument("--out", type=Path, default=None, help="where diverging images are saved (default .)")
    p.add_argument("--max-reports", type=int, default=3, help="divergences reported in full (the rest in one line)")
    p.add_argument("--batch", type=int, default=100,
                   help="programs generated, run and dropped together (one simulator process each; default 100)")
    p.add_argument("--max-cycles", type=int, default=None,
                   help="RTL watchdog per program, 1 .. 2^32-1 (default: its cycle-engine count + 1/8 + 10,000)")
    p.add_argument("--imm-src-ne-dst", action="store_true",
                   help="also emit immediate ALU ops with src != dst (the Chisel VTA reads src, fsim dst)")
    p.add_argument("--rtl-dir", type=Path, default=None, help="another copy of hw/rtl (e.g. a modified design)")
    p.add_argument("--no-shrink", action="store_true", help="on Dask: report divergences without shrinking them")
    p.add_argument("--coverage", type=Path, default=None, metavar="DIR",
                   help="RTL code coverage (Verilator): each batch merged into DIR; reports DIR/report.txt, DIR/html")
    p.add_argument("--until-saturated", type=int, default=None, metavar="K",
                   help="with --coverage: stop once K batches in a row add no coverage point (--n is the cap)")
    add_cluster_options(p, default_workers=None)    # --workers N / --scheduler ADDR: the campaign on Dask
    p.set_defaults(func=cmd_fuzz)
    from vtasim.sim.cli.coverage import add_commands as add_coverage_commands
    add_coverage_commands(sub)
