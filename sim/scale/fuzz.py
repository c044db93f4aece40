"""Fuzz campaigns: one batch of seeds (serial ``vtasim fuzz`` runs them one after another), and the
distributed campaign of ``vtasim fuzz --workers N | --scheduler ADDR``.

Distributed: the seeds are cut into chunks (at most ``--batch``, and small enough that every worker
gets several); each chunk is one Dask task that makes sure its worker has the RTL build (from the
build cache, :func:`vtasim.sim.rtl.runner.get_build`: compiled once per cache, reused by every later task
of the process), generates the programs, runs them on the cycle engine and the RTL (one simulator
process per chunk), compares, counts the coverage bins of :func:`vtasim.sim.programs.randprog.coverage_bins`
and shrinks every divergence (:mod:`vtasim.sim.scale.shrink`) on the worker.  The client merges the bins
and counts, and prints chunk results in seed order, so the report of a campaign does not depend on
which worker finished first; every diverging seed is named, the first ``--max-reports`` with the
saved original and minimal images and the ``vtasim diff`` command that reproduces each.
"""

from __future__ import annotations

import shlex
import uuid
from pathlib import Path

from vtasim.hw.outfiles import out_dir, sub_dir
from vtasim.sim.engines import run_engine
from vtasim.sim.errors import SimulatorError, ToolError

__all__ = ["fuzz_batch", "program_bins", "print_coverage", "fuzz_chunk", "run_distributed", "chunks",
           "seed_range", "outcome_text", "CoverageSink"]


def seed_range(lo: int, hi: int) -> str:
    """``seeds 0..4`` for the seeds ``lo .. hi - 1`` (``seed 7`` for one)."""
    return f"seed {lo}" if hi - lo == 1 else f"seeds {lo}..{hi - 1}"


def outcome_text(identical: int, diverged: int, errors: int) -> str:
    """``5 programs identical, 0 diverged`` (+ the programs that could not be generated or modelled)."""
    return (f"{identical} program{'s' if identical != 1 else ''} identical, {diverged} diverged"
            + (f", {errors} could not be generated or modelled" if errors else ""))


def program_bins(image) -> set:
    from vtasim.sim.programs.randprog import coverage_bins
    return {k for k, v in coverage_bins(image).items() if v}


def fuzz_batch(cfg, seeds, sim: str, max_cycles, imm_src_ne_dst: bool, run_images) -> list:
    """Generate, model and run one batch of seeds; one ``(seed, image, expected, actual-or-error)`` per
    seed, where a seed the generator or the cycle engine failed on has image/expected None and its
    exception as the last item (reported, the campaign goes on)."""
    from vtasim.sim.programs.randprog import generate
    from vtasim.sim.rtl import watchdog_for
    out, ready = [], []
    for seed in seeds:
        try:
            image = generate(cfg, seed, imm_src_ne_dst=imm_src_ne_dst)
            expected = run_engine("cycle", image)
            limit = max_cycles if max_cycles is not None else watchdog_for(expected.cycles)
        except Exception as exc:          # noqa: BLE001 - one bad seed does not end the campaign
            out.append((seed, None, None, exc))
            continue
        ready.append(len(out))
        out.append((seed, image, expected, limit))
    if ready:
        images = [out[k][1] for k in ready]
        try:
            actual = run_images(images, sim=sim, errors="return", max_cycles=[out[k][3] for k in ready])
        except SimulatorError as exc:      # the simulator crashed on this batch: its seeds fail, go on
            actual = [exc] * len(ready)
        except ToolError:
            raise                          # no simulator or no build: every batch would fail the same way
        for k, act in zip(ready, actual):
            seed, image, expected, _ = out[k]
            out[k] = (seed, image, expected, act)
    return out


def print_coverage(hit: dict, n: int):
    """Print :func:`vtasim.sim.programs.randprog.bins_report`."""
    from vtasim.sim.programs.randprog import bins_report
    print("\n".join(bins_report(hit, n)))


class CoverageSink:
    """``fuzz --coverage DIR [--until-saturated K]``: each batch's RTL coverage is merged into ``DIR`` as
    the batch finishes (what DIR held before stays and adds up), and the batches in a row that added no
    covered point are counted; :meth:`add` says when ``saturate`` of them came in a row."""

    def __init__(self, directory, saturate: int | None = None):
        from vtasim.sim.rtl.coverage import DAT_NAME, Coverage
        self.dir, self.saturate = Path(directory), saturate
        self.quiet, self.batches, self.total = 0, 0, None
        self.covered = len(Coverage.load(self.dir).covered()) if (self.dir / DAT_NAME).is_file() else 0

    def add(self, cov) -> bool:
        """Merge one batch's :class:`~vtasim.sim.rtl.coverage.Coverage`; True once saturated."""
        self.total = cov.merge_into(self.dir)
        self.batches += 1
        now = len(self.total.covered())
        self.quiet = self.quiet + 1 if now == self.covered else 0
        self.covered = now
        return self.saturate is not None and self.quiet >= self.saturate

    def finish(self, log=print):
        """Write the reports; print the per-module table and where the reports are."""
        from vtasim.sim.rtl.coverage_report import save_report, table_lines
        if self.total is None:
            log(f"RTL coverage: no batch ran on the RTL; {self.dir} unchanged")
            return
        txt, index = save_report(self.total, self.dir)
        log("\n".join(table_lines(self.total)))
        if self.saturate is not None:
            log(f"coverage {'saturated' if self.quiet >= self.saturate else 'not saturated'}: "
                f"the last {self.quiet} of {self.batches} batches added no coverage point "
                f"(--until-saturated {self.saturate})")
        log(f"RTL coverage merged into {self.dir}: {txt}, {index}")


def check_coverage_options(args):
    """``--coverage`` / ``--until-saturated`` of ``vtasim fuzz``: a one-line SimError when they cannot work."""
    from vtasim.sim.errors import SimError
    if args.until_saturated is not None:
        if args.coverage is None:
            raise SimError(f"fuzz --until-saturated {args.until_saturated} needs --coverage DIR (saturation is "
                           "of the RTL's coverage points)")
        if args.until_saturated < 1:
            raise SimError(f"fuzz --until-saturated {args.until_saturated}: the number of batches must be at least 1")
    if args.coverage is not None and args.sim != "verilator":
        raise SimError(f"fuzz --coverage needs --sim verilator (Verilator's coverage points); {args.sim} has none")


def chunks(first: int, n: int, batch: int, workers: int) -> list:
    """Seed ranges ``(lo, hi)`` (hi exclusive) covering ``first .. first + n - 1``: at most ``batch``
    seeds each and about four chunks per worker, so a slow chunk does not leave the others idle."""
    size = max(1, min(batch, -(-n // (4 * max(1, workers)))))
    return [(lo, min(lo + size, first + n)) for lo in range(first, first + n, size)]


def fuzz_chunk(cfg_dict: dict, lo: int, hi: int, opts: dict) -> dict:
    """One chunk of seeds on a Dask worker (plain data in, plain data and images out)."""
    from functools import partial

    from vtasim.hw.config import VTAConfig
    from vtasim.sim.diff import compare
    from vtasim.sim.engines import run_many
    from vtasim.sim.rtl.runner import get_build
    from vtasim.sim.scale.shrink import rtl_still_fails, shrink, signature
    cfg = VTAConfig.from_dict(cfg_dict)
    sim, rtl_dir = opts["sim"], opts.get("rtl_dir")
    cov = None
    if opts.get("coverage"):
        from vtasim.sim.rtl.coverage import Coverage
        cov = Coverage()
    get_build(cfg, sim, rtl_dir=rtl_dir, coverage=cov is not None)   # built once per cache; memoised here
    batch = fuzz_batch(cfg, range(lo, hi), sim, opts.get("max_cycles"), opts.get("imm_src_ne_dst", False),
                       partial(run_many, "rtl", rtl_dir=rtl_dir, coverage=cov))
    res = {"lo": lo, "hi": hi, "n_run": 0, "matched": 0, "hit": {}, "errors": [], "divergences": []}
    for seed, image, exp, act in batch:
        if image is None:
            res["errors"].append((seed, f"{type(act).__name__}: {str(act).splitlines()[0] if str(act) else ''}"))
            continue
        res["n_run"] += 1
        for b in program_bins(image):
            res["hit"][b] = res["hit"].get(b, 0) + 1
        if isinstance(act, BaseException):
            report = f"RTL error: {str(act).splitlines()[0] if str(act) else type(act).__name__}"
        else:
            d = compare(exp, act, image)
            res["matched"] += d.matched
            if d.ok:
                continue
            report = d.report()
        sig = signature(image, exp, act)
        div = {"seed": seed, "signature": sig, "image": image, "report": report, "minimal": None}
        if opts.get("shrink", True):
            s = shrink(image, rtl_still_fails(sig, sim=sim, rtl_dir=rtl_dir))
            div["minimal"] = s.image
            div["shrink"] = (s.insns_before, s.insns_after, s.uops_before, s.uops_after, s.tried, s.calls)
        res["divergences"].append(div)
    if cov is not None:
        cov.add_bins(res["hit"], res["n_run"])
        res["coverage"] = cov.to_dict()
    return res


def run_distributed(args, cfg, cfg_opt: str) -> int:
    """``vtasim fuzz`` on Dask (``args`` of the fuzz command); the exit status (1 when a seed diverged or
    failed)."""
    from vtasim.sim.scale.cluster import Progress, client_from_args, import_distributed
    distributed = import_distributed("vtasim fuzz")
    out_root = out_dir(args.out, "--out directory") if args.out else Path(".")
    rtl_opt = f" --rtl-dir {shlex.quote(str(args.rtl_dir))}" if args.rtl_dir else ""
    opts = {"sim": args.sim, "rtl_dir": str(Path(args.rtl_dir).resolve()) if args.rtl_dir else None,
            "max_cycles": args.max_cycles, "imm_src_ne_dst": args.imm_src_ne_dst, "shrink": not args.no_shrink,
            "coverage": args.coverage is not None}
    sink = CoverageSink(args.coverage, args.until_saturated) if args.coverage is not None else None
    saturated = False
    hit, n_run, matched, errors, diverged, reported = {}, 0, 0, [], [], 0
    with client_from_args(args, log=lambda s: print(s, flush=True), what="fuzz") as client:
        nworkers = max(1, len(client.scheduler_info()["workers"]))
        parts = chunks(args.seed, args.n, args.batch, nworkers)
        run = uuid.uuid4().hex[:12]      # keys unique per campaign: another campaign's chunk is another task
        futs = [client.submit(fuzz_chunk, cfg.to_dict(), lo, hi, opts, key=f"vtasim-fuzz-{run}-{lo}-{hi}",
                              pure=False, retries=2) for lo, hi in parts]
        index = {f.key: k for k, f in enumerate(futs)}
        ready, nxt = {}, 0
        bar = Progress(args.n, "programs")
        for fut in distributed.as_completed(futs):
            ready[index[fut.key]] = fut.result()
            fut.release()
            while nxt in ready and not saturated:     # in seed order, whatever finished first
                r = ready.pop(nxt)
                nxt += 1
                bar.step(r["hi"] - r["lo"])
                if len(parts) > 1:
                    n_div = len(r["divergences"])
                    print(f"{seed_range(r['lo'], r['hi'])}: " + outcome_text(r["n_run"] - n_div, n_div, len(r["errors"])),
                          flush=True)
                n_run += r["n_run"]
                matched += r["matched"]
                for b, c in r["hit"].items():
                    hit[b] = hit.get(b, 0) + c
                for seed, msg in r["errors"]:
                    errors.append(seed)
                    print(f"--- seed {seed}: ERROR {msg}  (reproduce: vtasim fuzz --n 1 --seed {seed}{cfg_opt} "
                          f"--sim {args.sim}{rtl_opt})", flush=True)
                for div in r["divergences"]:
                    diverged.append(div["seed"])
                    reported += _report(div, out_root, args, cfg_opt + rtl_opt, full=reported < args.max_reports)
                if sink is not None:
                    from vtasim.sim.rtl.coverage import Coverage
                    saturated = sink.add(Coverage.from_dict(r["coverage"]))
            if saturated:
                break
        if saturated:
            client.cancel([f for f in futs if not f.done()])     # the chunks past saturation are not needed
        bar.close()
    print_coverage(hit, n_run)
    if sink is not None:
        sink.finish()
    bad = sorted(diverged + errors)
    more = " ..." if len(bad) > 20 else ""
    tail = f"; failing seeds {', '.join(map(str, bad[:20]))}{more}" if bad else ""
    print(f"{seed_range(args.seed, args.seed + args.n)}: " + outcome_text(n_run - len(diverged), len(diverged), len(errors))
          + f" ({matched} retire records and outputs matched) on {nworkers} Dask workers{tail}")
    return 1 if diverged or errors else 0


def _report(div: dict, out_root: Path, args, opts: str, full: bool) -> int:
    """Print one divergence (saving its images when ``full``); 1 when it was reported in full."""
    seed = div["seed"]
    size = ""
    if div["minimal"] is not None:
        ib, ia, ub, ua, tried, calls = div["shrink"]
        size = (f"; shrunk from {ib} instructions ({ub} uops) to {ia} ({ua} uops), {tried} candidates in "
                f"{calls} RTL runs")
    if not full:
        print(f"--- seed {seed}: MISMATCH ({_sig_text(div['signature'])}){size}  (reproduce: vtasim fuzz --n 1 --seed {seed} "
              f"--workers 1 --sim {args.sim}{opts})", flush=True)
        return 0
    where = sub_dir(out_root, f"fuzz_seed{seed}", "fuzz image directory")
    div["image"].save(where)
    print(f"--- seed {seed}: MISMATCH (image saved to {where}){size}")
    print(div["report"])
    if div["minimal"] is not None:
        small = sub_dir(out_root, f"fuzz_seed{seed}_min", "fuzz image directory")
        div["minimal"].save(small)
        from vtasim.hw.disasm import one_line
        from vtasim.hw.isa import decode_stream
        insns = decode_stream(div["minimal"].cfg, div["minimal"].insn_bytes())
        print(f"minimal program ({len(insns)} instructions):")
        for k, insn in enumerate(insns):
            print(f"  {k:3d}  {one_line(insn)}")
        print(f"minimal program saved to {small}; reproduce: vtasim diff {small} --against cycle "
              f"--sim {args.sim}{_rtl_only(opts)}")
    else:
        print(f"reproduce: vtasim diff {where} --against cycle --sim {args.sim}{_rtl_only(opts)}")
    print(flush=True)
    return 1


def _rtl_only(opts: str) -> str:
    """The ``--rtl-dir`` part of the fuzz options (``vtasim diff`` reads the config from the image)."""
    words = shlex.split(opts)
    return f" --rtl-dir {shlex.quote(words[words.index('--rtl-dir') + 1])}" if "--rtl-dir" in words else ""


def _sig_text(sig) -> str:
    """A divergence signature (:func:`vtasim.sim.scale.shrink.signature`) in words."""
    from vtasim.hw.isa import OPCODE_NAMES
    if sig[0] == "error":
        return f"the RTL stopped: {sig[1]}"
    what = "/".join(sig[1])
    return f"{what} of an {OPCODE_NAMES.get(sig[2], '?')} instruction" if sig[2] is not None else f"{what} differs"
