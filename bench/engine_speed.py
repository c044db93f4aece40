"""Engine speed: functional vs cycle engine wall time, simulated cycles per second, the host limit (a
float32 BLAS matmul with the same multiply-accumulate count), where a small layer's fixed cost goes, and
one core against two - all measured in one run.

    python bench/engine_speed.py                         # C2-C11 full size + the compute-bound streams
    python bench/engine_speed.py --layers C2,C5 --reduce 4
    python bench/engine_speed.py --config config/presets/1x32x32.json --no-synthetic
    python bench/engine_speed.py --maximal-uops 8        # the ISA's largest nests (minutes on the cycle engine)
    python bench/engine_speed.py --previous c899423      # also the engine of that revision, same images

Main table (every time is the best of ``--repeat`` runs): ``func s`` our functional engine
(``vtasim.sim.functional``, its default executor; not TVM's fsim; its runs alternate with the cycle engine's), ``np s`` the same with ``executor="numpy"`` (its
own numpy code), ``cycle s`` the cycle engine's ``run_image`` end to end (JIT excluded:
warmed up first), ``Mcyc/s`` simulated cycles per second of that wall time, ``int s`` the same engine with
``gemm="int"`` (every GEMM through the integer kernel: the data path before the grouped float32 products,
with today's event loop), ``int/cyc`` how many times faster the fast path is, ``simd s``, ``vnni s`` and ``grp s``
the engine with every non-reset GEMM forced through the integer SIMD kernel on int16 pairs (``gemm="simd"``),
the one on byte quads (``gemm="vnni"``: ``vpdpbusd`` where numba targets AVX-512 VNNI, the same arithmetic
from widening multiplies elsewhere) or the float32 BLAS grouping (``gemm="blas"``), ``blas s`` np.dot on float32
of the same MAC count on one BLAS thread, ``cyc/blas`` the cycle engine's time over that host limit's, ``func/cyc`` the
functional engine's time over the cycle engine's.  Rows after the layers (``--no-synthetic`` drops them): ``gemm-bound`` (one regular
uop pattern, :func:`vtasim.sim.programs.synthetic.gemm_bound_image`), ``irregular`` (GEMMs over random uops,
:func:`vtasim.sim.programs.streams.irregular_gemm_image`), ``alu-vec``, ``alu-imm`` and ``alu-mixed`` (ALU
instructions over random uops in the two-row form, the immediate form and both,
:func:`vtasim.sim.programs.streams.alu_bound_image`; no MACs, so no BLAS column).

Fixed cost table (the small layers C4, C7, C10 when selected): a run's stages in ms (see
``vtasim.sim.cycle.profile``): ``data`` the data kernels alone, ``above`` total minus data (the target is
<= 0.3 ms), then what the rest is made of: ``decode`` (load_program from scratch; ``run_image`` pays
``cached``), ``setup`` machine arrays, ``dispatch`` one call into the compiled core, ``events`` the event
loop and per-instruction starts (core minus data minus dispatch), ``result`` result objects.

Previous-engine table (``--previous REV``): the ``run_image`` wall time of revision REV's cycle engine on the
same images (saved and loaded in a subprocess running REV's own hw/, sim/, config/), same cycles required,
and ``prev/now``.

Cores table: every workload of the main table run one after the other (``run_images(workers=1)``) and two
at a time in two threads (``workers=2``: the compiled core releases the GIL).

The machine is shared and noisy: ratios measured in one run are what this prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtasim.hw.config import load_config  # noqa: E402
from vtasim.sim import functional  # noqa: E402
from vtasim.sim import cycle  # noqa: E402
from vtasim.sim.cycle.profile import stage_times  # noqa: E402
from vtasim.sim.cycle.simd import VNNI  # noqa: E402
from vtasim.compiler.ops import compile_workload  # noqa: E402
from vtasim.compiler.tuning.workloads import RESNET18, parse_workload  # noqa: E402
from vtasim.sim.programs.synthetic import MAXIMAL_KINDS, gemm_bound_image, maximal_nest_image  # noqa: E402
from vtasim.sim.programs.streams import alu_bound_image, irregular_gemm_image  # noqa: E402

LAYERS = [n.split(".")[1] for n in RESNET18]
SMALL = ("C4", "C7", "C10")


def blas_seconds(macs: int, k: int, n: int, repeat: int = 5) -> float:
    """Wall time of one float32 (m x k) @ (k x n) with m*k*n ~= macs on one BLAS thread (best of ``repeat``
    after a warm-up; one thread, as the cycle engine's single-core figures are compared with it)."""
    m = max(1, round(macs / (k * n)))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    with one_blas_thread():
        np.dot(a, b)
        return best_of(repeat, lambda: np.dot(a, b))[1]


def one_blas_thread():
    """A context that limits BLAS to one thread (threadpoolctl when installed, else a no-op)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        import contextlib
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def best_of(repeat, fn):
    """``(result of the last call, best wall time of repeat calls)``."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def both_engines(name, image, repeat=1):
    """``(functional result, its wall s, cycle result, its wall s)``, each the best of ``repeat`` runs taken
    in turn (functional, cycle, functional, ...: a burst of load from other jobs hits both sides); exits if
    their outputs differ."""
    t_fn = t_cy = float("inf")
    for _ in range(repeat):
        ref, t = best_of(1, lambda: functional.run_image(image))
        t_fn = min(t_fn, t)
        res, t = best_of(1, lambda: cycle.run_image(image, progress=False))
        t_cy = min(t_cy, t)
    if dict(res.outputs) != dict(ref.outputs):
        raise SystemExit(f"{name}: the engines disagree on the output bytes")
    return ref, t_fn, res, t_cy


def measure(name, image, k, n, macs_per_uop, repeat):
    ref, t_fn, res, t_cy = both_engines(name, image, repeat)
    if image.expected and dict(res.outputs) != image.expected:
        raise SystemExit(f"{name}: output differs from the reference")
    ref_np, t_np = best_of(repeat, lambda: functional.run_image(image, executor="numpy"))
    if ref_np.outputs != ref.outputs or ref_np.counters != ref.counters:
        raise SystemExit(f"{name}: the functional engine's executors disagree")
    t = {}
    for path in ("int", "simd", "vnni", "blas"):
        other, t[path] = best_of(repeat, lambda p=path: cycle.run_image(image, progress=False, gemm=p))
        if other.cycles != res.cycles or list(other.trace) != list(res.trace) or other.outputs != res.outputs:
            raise SystemExit(f"{name}: gemm={path!r} changed the retire records, the cycles or the bytes")
    macs = res.counters["gemm_counter"] * macs_per_uop
    t_blas = blas_seconds(macs, k, n) if macs else float("nan")
    return dict(name=name, cycles=res.cycles, uops=res.counters["gemm_counter"], alu=res.counters["alu_counter"],
                fn=t_fn, np=t_np, cy=t_cy, int=t["int"], simd=t["simd"], vnni=t["vnni"], grp=t["blas"], blas=t_blas,
                image=image)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated, e.g. C2,C5")
    ap.add_argument("--reduce", type=int, default=1, help="divide H and W by this (quick runs)")
    ap.add_argument("--config", default=None, help="VTA config json (default: config/vta_config.json)")
    ap.add_argument("--no-synthetic", action="store_true",
                    help="skip the GEMM-bound, irregular-GEMM and ALU-bound streams")
    ap.add_argument("--repeat", type=int, default=3, help="timings per figure; the best is printed")
    ap.add_argument("--previous", metavar="REV", default=None,
                    help="also time the cycle engine of git revision REV (its hw/, sim/, config/ in a subprocess "
                         "on the same images) and print today's speed-up over it")
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
    functional.warm_up()
    # every BLAS library loaded by now (numpy's, and the one numba's compiled code calls) on one thread for the
    # whole run: worker threads a multi-threaded BLAS call leaves spinning take the second core from the runs
    # after it (measured: C3 bimodal, 2 ms or 6-10 ms per cycle-engine run, with process time above wall time)
    blas_limit = one_blas_thread()
    blas_limit.__enter__()
    rows = []
    for name in layers:
        c = parse_workload(f"resnet18.{name}", cfg, reduce=args.reduce)
        image = compile_workload(f"resnet18.{name}", cfg, reduce=args.reduce).image    # TopHub knobs
        rows.append(measure(name if args.reduce == 1 else f"{name}/{args.reduce}", image,
                            c.cin * c.k * c.k, c.cout, macs_per_uop, args.repeat))
    if not args.no_synthetic:
        wide = (cfg.block_in * 16, cfg.block_out * 16)
        rows.append(measure("gemm-bound", gemm_bound_image(cfg), *wide, macs_per_uop, args.repeat))
        rows.append(measure("irregular", irregular_gemm_image(cfg), *wide, macs_per_uop, args.repeat))
        for name, forms in (("alu-vec", ("vector",)), ("alu-imm", ("imm",)), ("alu-mixed", ("vector", "imm"))):
            rows.append(measure(name, alu_bound_image(cfg, forms=forms), *wide, macs_per_uop, args.repeat))
    head = (f"{'workload':<11}{'cycles':>11}{'GEMM uops':>10}{'ALU uops':>10}{'func s':>8}{'np s':>7}{'cycle s':>9}{'Mcyc/s':>8}"
            f"{'int s':>8}{'simd s':>8}{'vnni s':>8}{'grp s':>8}{'int/cyc':>8}{'blas s':>8}{'cyc/blas':>9}{'func/cyc':>9}")
    print(f"config {cfg.bitstream}  (best of {args.repeat}; cycle s = run_image wall incl. setup and results; "
          f"AVX-512 VNNI {'targeted' if VNNI else 'not targeted'}; "
          f"{'BLAS threads not limited (no threadpoolctl)' if blas_limit.__class__.__name__ == 'nullcontext' else 'BLAS on one thread'}; "
          f"load average {os.getloadavg()[0]:.2f})")
    print(head)
    print("-" * len(head))
    tot = {k: sum(r[k] for r in rows) for k in ("cycles", "fn", "np", "cy", "int", "simd", "vnni", "grp")}
    tot["blas"] = sum(r["blas"] for r in rows if r["uops"])
    tot["cy_gemm"] = sum(r["cy"] for r in rows if r["uops"])
    for r in rows + [dict(tot, name="total", uops=None, alu=None)]:
        if r["name"] == "total":
            print("-" * len(head))
        blas = f"{r['blas']:>8.4f}{r.get('cy_gemm', r['cy']) / r['blas']:>9.2f}" if r["blas"] == r["blas"] else (
            f"{'-':>8}{'-':>9}")
        counts = "".join(f"{r[k]:>10,}" if r[k] is not None else f"{'':>10}" for k in ("uops", "alu"))
        print(f"{r['name']:<11}{r['cycles']:>11,}{counts}{r['fn']:>8.3f}{r['np']:>7.3f}{r['cy']:>9.4f}"
              f"{r['cycles'] / r['cy'] / 1e6:>8.1f}{r['int']:>8.3f}{r['simd']:>8.3f}{r['vnni']:>8.3f}{r['grp']:>8.3f}"
              f"{r['int'] / r['cy']:>8.2f}{blas}{r['fn'] / r['cy']:>9.2f}")
    small = [r for r in rows if r["name"] in SMALL]
    overhead = fixed_costs(small, max(10, args.repeat)) if small else {}
    cores = two_cores(rows, args.repeat)
    targets(rows, tot, overhead, cores)
    if args.previous:
        previous(args.previous, rows, args.repeat)
    if args.maximal_uops:
        maximal(cfg, args.maximal_uops)
    return 0


def fixed_costs(rows, repeat) -> dict:
    """Per-stage ms of the small layers' runs; returns ``{name: ms above the data work}``."""
    print()
    print(f"fixed cost per run, ms (best of {repeat}; data = the kernels alone, above = total - data)")
    cols = ("total", "data", "above", "decode", "cached", "setup", "dispatch", "events", "result")
    print(f"{'workload':<11}" + "".join(f"{c:>9}" for c in cols))
    above = {}
    for r in rows:
        t = stage_times(r["image"], repeat)
        t["above"], t["cached"] = t["total"] - t["data"], t["decode_cached"]
        t["events"] = max(0.0, t["core"] - t["data"] - t["dispatch"])
        above[r["name"]] = t["above"] * 1e3
        print(f"{r['name']:<11}" + "".join(f"{t[c] * 1e3:>9.3f}" for c in cols))
    return above


def two_cores(rows, repeat) -> dict:
    """Wall time of every workload one after the other and two at a time; ``{workers: seconds}``."""
    images = [r["image"] for r in rows]
    cycles = sum(r["cycles"] for r in rows)
    out = {w: best_of(repeat, lambda w=w: cycle.run_images(images, workers=w, progress=False))[1] for w in (1, 2)}
    print()
    print(f"cores (all {len(images)} workloads through cycle.run_images, best of {repeat})")
    for w, t in out.items():
        print(f"  workers={w}: {t:.4f} s  {cycles / t / 1e6:.1f} M cycles/s")
    print(f"  two-core speed-up {out[1] / out[2]:.2f}x")
    return {w: cycles / t / 1e6 for w, t in out.items()}


def targets(rows, tot, overhead, cores) -> None:
    """The engine-speed targets next to what this run measured."""
    print()
    print("targets")
    by = {r["name"]: r for r in rows}
    for name in ("gemm-bound", "irregular"):
        if name in by:
            r = by[name]
            print(f"  {name} >= 100 M cycles/s: {r['cycles'] / r['cy'] / 1e6:.1f}; "
                  f"vs float32 BLAS on the same MACs (aim <= 2x): {r['cy'] / r['blas']:.2f}x; "
                  f"int-kernel path / chosen path: {r['int'] / r['cy']:.2f}x")
    for name in ("alu-vec", "alu-imm", "alu-mixed"):
        if name in by:
            print(f"  {name} >= 100 M cycles/s: {by[name]['cycles'] / by[name]['cy'] / 1e6:.1f}")
    layers = [r for r in rows if r["name"].split("/")[0] in LAYERS]
    if layers:
        worst = max(layers, key=lambda r: r["fn"] / r["cy"])
        print(f"  functional <= 1x the cycle engine on every layer: worst {worst['name']} "
              f"{worst['fn'] / worst['cy']:.2f}x; all layers {sum(r['fn'] for r in layers) / sum(r['cy'] for r in layers):.2f}x"
              f" (against TVM's fsim: bench/fsim_ratio.py)")
    for name, ms in overhead.items():
        print(f"  {name} above its data work <= 0.3 ms: {ms:.3f} ms")
    print(f"  all workloads >= 60 M cycles/s: {tot['cycles'] / tot['cy'] / 1e6:.1f} one at a time, "
          f"{cores[1]:.1f} via run_images on 1 worker, {cores[2]:.1f} on 2 workers")


PREVIOUS_SCRIPT = """
import json, sys, time
sys.path.insert(0, ".")
from vtasim.sim.cycle import run_image
from vtasim.sim.cycle.engine import warm_up
from vtasim.sim.image import MemoryImage
out = {}
for name, path in json.loads(sys.argv[1]).items():
    img = MemoryImage.load(path)
    warm_up(img.cfg)
    best = float("inf")
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        r = run_image(img, progress=False)
        best = min(best, time.perf_counter() - t)
    out[name] = [best, r.cycles]
print(json.dumps(out))
"""


def previous(rev: str, rows, repeat: int) -> None:
    """Time revision ``rev``'s cycle engine on the same images in a subprocess (its numba cache is kept
    under the system temp directory, so only its first use compiles) and print the speed-up."""
    import json
    import subprocess
    import tempfile
    repo = Path(__file__).resolve().parent.parent
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True,
                         text=True)
    if sha.returncode:
        raise SystemExit(f"--previous {rev!r}: not a git revision of {repo}")
    tree = Path(tempfile.gettempdir()) / f"vtasim-rev-{sha.stdout.strip()[:12]}"
    if not (tree / "sim").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", sha.stdout.strip(), "hw", "sim", "config"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {r["name"]: str(r["image"].save(Path(tmp) / r["name"].replace("/", "_"))) for r in rows}
        done = subprocess.run([sys.executable, "-c", PREVIOUS_SCRIPT, json.dumps(paths), str(repeat)], cwd=tree,
                              capture_output=True, text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    if done.returncode:
        raise SystemExit(f"--previous {rev}: its engine failed:\n{done.stderr[-2000:]}")
    old = json.loads(done.stdout.strip().splitlines()[-1])
    print()
    print(f"previous engine ({rev} = {sha.stdout.strip()[:12]}, run_image wall, best of {repeat})")
    print(f"{'workload':<11}{'prev s':>9}{'now s':>9}{'prev/now':>9}")
    for r in rows:
        t_old, cycles = old[r["name"]]
        if cycles != r["cycles"]:
            raise SystemExit(f"{r['name']}: revision {rev} gives {cycles} cycles, today {r['cycles']}")
        print(f"{r['name']:<11}{t_old:>9.4f}{r['cy']:>9.4f}{t_old / r['cy']:>9.2f}")
    t_old = sum(old[r["name"]][0] for r in rows)
    t_now = sum(r["cy"] for r in rows)
    print(f"{'total':<11}{t_old:>9.4f}{t_now:>9.4f}{t_old / t_now:>9.2f}")


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
