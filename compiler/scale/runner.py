"""Run a sweep's missing points on a Dask cluster (:func:`vtasim.sim.scale.cluster.dask_client`): a LocalCluster
of ``workers`` worker processes (one thread each) by default, or an existing scheduler
(``scheduler="tcp://HOST:8786"`` or a ``scheduler_file``), used unchanged, with TLS ``security`` passed
through.  Rows are appended to the results file as futures complete; a task whose worker dies is
rescheduled by Dask on another worker (its finished siblings are already on disk)."""

from __future__ import annotations

import re
import time

from vtasim.compiler.scale.point import evaluate_point
from vtasim.compiler.scale.results import ResultsWriter, finished_keys
from vtasim.compiler.scale.spec import Spec
from vtasim.sim.scale import cluster
from vtasim.sim.scale.cluster import MissingExtra, Progress, dask_client

__all__ = ["MissingExtra", "run_sweep", "skip_summary"]


def _describe(row: dict) -> str:
    if row["status"] != "ok":
        return f"{row['status']}: {row['reason']}"
    return (f"{row['cycles']:,} cycles, GEMM util {row['gemm_util']:.3f}, {row['macs_per_cycle']:.1f} MAC/cycle "
            f"({row['seconds']:.1f} s)")


def skip_summary(n: int, of: int, example: str, out, width: int = 150) -> str:
    """One line for the points whose config was rejected: how many, one reason (its lists of keys or
    fields shortened to their first item, then cut to ``width`` characters), and where the others are."""
    why = example.removeprefix("point: ")
    why = re.sub(r"\b([A-Za-z_]+=\S+?)(, [A-Za-z_]+=\S+?)+(?= |$)", r"\1, ...", why)
    why = re.sub(r"\(([a-z_]+)(, [a-z_]+)+\)", r"(\1, ...)", why)
    why = why if len(why) <= width else why[:width].rsplit(" ", 1)[0] + " ..."
    return f"sweep: {n} of {of} points skipped, config rejected (e.g. {why}); each reason: 'reason' column of {out}"


def run_sweep(spec: Spec, out, workers: int = 2, scheduler: str | None = None, scheduler_file=None,
              processes: bool = True, evaluate=evaluate_point, log=print, security=None,
              cluster_opts: dict | None = None) -> dict:
    """Evaluate the points of ``spec`` not yet in ``out``; returns counts {total, done_before, ok, skipped,
    error, lost}.  ``lost`` counts points whose task itself failed (e.g. its worker died more often
    than the scheduler allows); they have no row, so a rerun computes them."""
    points = spec.points()
    done = finished_keys(out)
    todo = [p for p in points if p.key not in done]
    counts = {"total": len(points), "done_before": len(points) - len(todo), "ok": 0, "skipped": 0, "error": 0,
              "lost": 0}
    log(f"sweep: {len(points)} points, {counts['done_before']} already in {out}, {len(todo)} to run")
    if not todo:
        return counts
    distributed = cluster.import_distributed("vtasim sweep")
    t0 = time.perf_counter()
    with dask_client(workers=workers, scheduler=scheduler, scheduler_file=scheduler_file, processes=processes,
                     security=security, log=log, what="sweep", **(cluster_opts or {})) as client:
        futures = client.map(evaluate, [p.as_dict() for p in todo], key=[f"vtasim-point-{p.key}" for p in todo],
                             pure=False, retries=2)
        bar = Progress(len(todo), "points")
        n, first_skip = 0, ""
        with ResultsWriter(out) as writer:
            for fut in distributed.as_completed(futures):
                n += 1
                bar.step()
                try:
                    row = fut.result()
                except Exception as exc:        # noqa: BLE001 - a lost task: no row, the rerun retries it
                    counts["lost"] += 1
                    log(f"[{n}/{len(todo)}] task failed ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}); rerun the sweep to retry it")
                    continue
                writer.append(row)
                counts[row["status"]] += 1
                if row["status"] == "skipped":      # summed up in one line below; each reason is in the file
                    first_skip = first_skip or row["reason"]
                else:
                    log(f"[{n}/{len(todo)}] {row['workload']} {row.get('bitstream') or '-'} {row['knobs']}: "
                        f"{_describe(row)}")
                fut.release()
        bar.close()
    if counts["skipped"]:
        log(skip_summary(counts["skipped"], len(todo), first_skip, out))
    log(f"sweep: {counts['ok']} ok, {counts['skipped']} skipped, {counts['error']} errors, "
        f"{counts['lost']} lost in {time.perf_counter() - t0:.1f} s -> {out}")
    return counts
