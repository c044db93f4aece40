"""``vtasim tune``: search a workload's knob space with the cycle engine as the cost model.

The search is evolutionary, AutoTVM-style in spirit but small:

1. seed the population with the TopHub record (when there is one; for grouped and transposed
   convolutions the largest tiles that fit), the fallback when it is cheap
   (``seed_fallback``), and random points of the space;
2. measure every new point: compile, run on the cycle engine, record cycles (a point that does not
   compile - a tile over its SRAM, an unsupported copy pattern - is recorded with its error, as
   AutoTVM discards such schedules);
3. keep the best ``elite`` points, breed the next generation by crossover (each knob from one of
   two parents) and mutation (one knob moved to a neighbouring choice), never measuring a point twice;
4. stop after ``trials`` measurements.

Measurements run in ``jobs`` worker processes, or on a Dask cluster (``client``: ``vtasim tune
--workers N`` for a local one, ``--scheduler ADDR`` for an existing one), or in this process
(``jobs=0``, as a sweep's "tuned" point does inside its Dask worker).  Every trial is appended to the
JSON-lines log as it finishes (``vtasim.compiler.tuning.knobs`` format), so an interrupted run loses nothing and
``compile --log`` reads the best record.  The search itself sees each generation's records in the
order they were proposed, never in finishing order, so a seed gives the same trials and the same
best record whichever executor ran them.
"""

from __future__ import annotations

import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.knobs import append_log, check_knobs, check_log_target, fallback_knobs, fitting_knobs, knob_space, tophub_knobs
from vtasim.compiler.tuning.workloads import check_seed, parse_workload

__all__ = ["measure", "tune", "TuneResult", "MAX_TUNE_TRIALS", "MAX_JOBS"]

MAX_TUNE_TRIALS = 10_000    # trials of one search
MAX_JOBS = 64               # worker processes of one search



def measure(workload: str, reduce: int, cfg_dict: dict, knobs: dict) -> dict:
    """Compile ``workload`` with ``knobs`` and run it on the cycle engine (runs in a worker)."""
    from vtasim.hw.config import VTAConfig
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim.errors import SimError
    cfg = VTAConfig.from_dict(cfg_dict)
    t0 = time.perf_counter()
    rec = {"workload": workload, "reduce": reduce, "config": cfg.bitstream, "knobs": knobs,
           "cycles": None, "gemm_uops": None, "error": None}
    try:
        compiled = compile_workload(workload, cfg, knobs=knobs, reduce=reduce, with_expected=False)
        from vtasim.sim.cycle import run_image
        res = run_image(compiled.image)
        rec["cycles"] = int(res.cycles)
        rec["gemm_uops"] = int(res.counters["gemm_counter"])
        rec["insns"] = compiled.image.insn_count
    except SimError as exc:
        rec["error"] = str(exc).splitlines()[0]
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


def _key(knobs: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in knobs.items()))


def _mutate(knobs: dict, space: dict, rng: random.Random) -> dict:
    out = dict(knobs)
    k = rng.choice(list(space))
    choices = space[k]
    i = choices.index(out[k])
    j = min(max(i + rng.choice((-2, -1, 1, 2)), 0), len(choices) - 1)
    out[k] = choices[j]
    return out


def _crossover(a: dict, b: dict, rng: random.Random) -> dict:
    return {k: (a if rng.random() < 0.5 else b)[k] for k in a}


@dataclass
class TuneResult:
    workload: str
    records: list = field(default_factory=list)

    def best(self):
        ok = [r for r in self.records if r["cycles"] is not None]
        return min(ok, key=lambda r: r["cycles"]) if ok else None


def _valid(wl, cfg, knobs) -> bool:
    try:
        check_knobs(wl, cfg, knobs)
        return True
    except Exception:           # noqa: BLE001 - an invalid point is simply not bred
        return False


def _measured(executor, client, workload: str, reduce: int, cfg_dict: dict, batch: list):
    """Yield ``(k, record)`` for the knobs of ``batch`` as their measurements finish: on the Dask
    ``client``, on the process pool ``executor``, or here, one after the other (both None)."""
    if client is not None:
        from distributed import as_completed as dask_completed
        futs = client.map(measure, [workload] * len(batch), [reduce] * len(batch), [cfg_dict] * len(batch), batch,
                          pure=False, retries=2)
        slot = {f.key: k for k, f in enumerate(futs)}
        for fut in dask_completed(futs):
            yield slot[fut.key], fut.result()
    elif executor is not None:
        futs = {executor.submit(measure, workload, reduce, cfg_dict, k): i for i, k in enumerate(batch)}
        for fut in as_completed(futs):
            yield futs[fut], fut.result()
    else:
        for i, k in enumerate(batch):
            yield i, measure(workload, reduce, cfg_dict, k)


def tune(workload: str, cfg, trials: int = 32, jobs: int = 2, log=None, seed: int = 0, reduce: int = 1,
         population: int = 8, elite: int = 4, seed_fallback: bool = False, progress=sys.stderr,
         client=None) -> TuneResult:
    """Search the knob space of ``workload``; returns every measured record (best via ``.best()``).

    Trials run on the Dask ``client`` when given, else in ``jobs`` processes (``jobs=0``: in this one)."""
    wl = parse_workload(workload, cfg, reduce=reduce)
    space = knob_space(wl, cfg)
    if not space:
        raise CompileError(f"{workload} has no knobs to tune")
    for what, value, lo, hi in (("trials", trials, 1, MAX_TUNE_TRIALS), ("jobs", jobs, 0, MAX_JOBS)):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise CompileError(f"tune: {what} = {value!r} must be an integer in [{lo}, {hi}]")
    check_seed(seed, "tune: seed")
    if log is not None:
        check_log_target(log)
    rng = random.Random(seed)
    result = TuneResult(workload)
    seen: set = set()
    queue: list[dict] = []

    def offer(k):
        if k is not None and _key(k) not in seen and _valid(wl, cfg, k):
            seen.add(_key(k))
            queue.append(k)

    offer(tophub_knobs(wl, cfg))
    if hasattr(wl, "tile_fits"):            # grouped / transposed: no TopHub, the largest fitting tiles
        offer(fitting_knobs(wl, cfg))
    if seed_fallback:
        offer(fallback_knobs(wl, cfg))
    for _ in range(population * 20):
        if len(queue) >= population:
            break
        offer({k: rng.choice(v) for k, v in space.items()})

    cfg_dict = cfg.to_dict()
    started = time.perf_counter()
    pool = ProcessPoolExecutor(max_workers=jobs) if client is None and jobs > 0 else None
    try:
        while queue and len(result.records) < trials:
            batch = queue[: trials - len(result.records)]
            del queue[: len(batch)]
            done: list = [None] * len(batch)
            for k, rec in _measured(pool, client, workload, reduce, cfg_dict, batch):
                done[k] = rec
                if log is not None:
                    append_log(log, rec)
                if progress is not None:
                    ok = [r["cycles"] for r in result.records + done if r is not None and r["cycles"] is not None]
                    print(f"\r[tune {workload}] {len(result.records) + sum(r is not None for r in done)}/{trials} "
                          f"trials, best {min(ok) if ok else '-'} cycles, {time.perf_counter() - started:.1f} s",
                          end="", file=progress, flush=True)
            result.records.extend(done)         # proposal order: the search does not depend on timing
            ranked = sorted((r for r in result.records if r["cycles"] is not None), key=lambda r: r["cycles"])
            parents = [r["knobs"] for r in ranked[:elite]] or [fallback_knobs(wl, cfg)]
            for _ in range(population * 20):
                if len(queue) >= population:
                    break
                if len(parents) > 1 and rng.random() < 0.5:
                    child = _crossover(*rng.sample(parents, 2), rng)
                else:
                    child = rng.choice(parents)
                offer(_mutate(child, space, rng))
            if not queue:               # the neighbourhood is exhausted: fresh random points
                for _ in range(population * 20):
                    if len(queue) >= population:
                        break
                    offer({k: rng.choice(v) for k, v in space.items()})
    finally:
        if pool is not None:
            pool.shutdown()
    if progress is not None:
        print(file=progress)
    return result
