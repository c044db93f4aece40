"""Run an image on the functional and cycle engines (and optionally the RTL), check it and report.

The body of ``vtasim demo`` (which lives with the compiler, since the demo compiles its program):
outputs against the image's numpy reference, the fsim counters, the cycle count, the per-module
breakdown, and a retire trace (CSV), a Perfetto trace and a timeline PNG next to the image::

    ok, results = run_and_report(image, Path("runs/demo"), rtl="verilator")
"""

from __future__ import annotations

from pathlib import Path

from vtasim.sim.engines import EngineUnavailable, check_result, run_engine

__all__ = ["run_and_report"]


def _report(name, image, result):
    problems = check_result(image, result)
    cyc = f", {result.cycles} cycles" if result.cycles is not None else ""
    wall = f", {result.wall_s:.3f} s" if result.wall_s is not None else ""
    print(f"{name:10s} outputs {'OK' if not problems else 'MISMATCH'}{cyc}{wall}")
    for p in problems:
        print(f"           {p}")
    return not problems


def _write_reports(out: Path, result) -> None:
    """Trace CSV, Perfetto JSON and a timeline PNG of a timed run, next to the image."""
    from vtasim.sim.trace import breakdown_table, write_csv, write_perfetto
    print(breakdown_table(result.breakdown, result.cycles))
    stem = out / result.engine
    write_csv(f"{stem}_trace.csv", result.trace)
    write_perfetto(f"{stem}_perfetto.json", result)
    written = [f"{stem}_trace.csv", f"{stem}_perfetto.json"]
    try:
        from vtasim.waveforms.plot import plot_timeline
        written.append(str(plot_timeline(result, f"{stem}_timeline.png")))
    except ImportError as exc:          # matplotlib missing: the rest of the report still stands
        print(f"           no timeline plot ({exc})")
    print("           wrote " + ", ".join(written))


def run_and_report(image, out: Path, rtl: str | None = None) -> tuple:
    """Functional and cycle runs (plus the RTL with ``rtl``) of a saved image, checked and reported.

    Returns ``(ok, results)``: whether every engine matched, and the RunResult of each engine run."""
    func = run_engine("functional", image, executor="numpy")     # independent of the cycle engine's kernels
    results = {"functional": func}
    print("counters: " + ", ".join(f"{k}={v}" for k, v in func.counters.items()))
    ok = _report("functional", image, func)
    try:
        cyc = run_engine("cycle", image)
    except EngineUnavailable as exc:
        print(f"cycle      skipped: {exc}")
    else:
        results["cycle"] = cyc
        ok = _report("cycle", image, cyc) and ok
        if bytes(cyc.dram) != bytes(func.dram):
            print("cycle      final DRAM differs from the functional model")
            ok = False
        _write_reports(out, cyc)
        if rtl:
            ok = _run_rtl(image, cyc, rtl) and ok
    print(f"re-run: vtasim run {out} --engine cycle --check   (or: vtasim diff {out})")
    return ok, results


def _run_rtl(image, cyc, sim: str) -> bool:
    """Run the RTL too and hold its bytes and retire records against the cycle engine."""
    rtl = run_engine("rtl", image, sim=sim)
    ok = _report(f"rtl/{sim}", image, rtl)
    same = list(rtl.trace) == list(cyc.trace) and rtl.cycles == cyc.cycles
    print(f"           retire trace {'identical to' if same else 'DIFFERS from'} the cycle engine "
          f"({len(cyc.trace)} records)")
    return ok and same
