"""``vtasim demo``: the README's first command.

Builds a real program with the :class:`~sim.builder.ProgramBuilder` - a tiled int8 matrix multiply
(64x256 by 256x64, two virtual threads, double-buffered loads) followed by a requantization on the
ALU (``>> 10``, clip to [-127, 127]) - saves it as a memory image, runs it on the functional engine
and, when importable, on the cycle engine, and checks both against the numpy reference.
"""

from __future__ import annotations

from pathlib import Path

from hw.config import load_config
from sim.engines import EngineUnavailable, check_result, run_engine
from sim.errors import SimError
from sim.programs.unit import tiled_gemm

__all__ = ["add_commands", "build_demo", "run_demo"]

M, K, N = 64, 256, 64
REQUANT = (10, -127, 127)


def build_demo(cfg):
    """The demo image; the block size halves until the SRAM regions of two threads fit the config."""
    last = None
    for blk in (64, 32, 16, 8):
        try:
            return tiled_gemm(cfg, "demo", M, K, N, bm=blk, bk=blk, bn=max(blk // 2, cfg.block_out),
                              vt=2, requant=REQUANT)
        except ValueError as exc:
            last = exc
    raise SimError(f"demo does not fit config {cfg.model}: {last}")


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
    from sim.trace import breakdown_table, write_csv, write_perfetto
    print(breakdown_table(result.breakdown, result.cycles))
    stem = out / result.engine
    write_csv(f"{stem}_trace.csv", result.trace)
    write_perfetto(f"{stem}_perfetto.json", result)
    written = [f"{stem}_trace.csv", f"{stem}_perfetto.json"]
    try:
        from waveforms.plot import plot_timeline
        written.append(str(plot_timeline(result, f"{stem}_timeline.png")))
    except ImportError as exc:          # matplotlib missing: the rest of the report still stands
        print(f"           no timeline plot ({exc})")
    print("           wrote " + ", ".join(written))


def run_demo(cfg, out: Path, rtl: str | None = None) -> int:
    image = build_demo(cfg)
    image.save(out)
    print(f"demo: int8 GEMM {M}x{K} . {K}x{N} + requantize (>> {REQUANT[0]}, clip [{REQUANT[1]}, {REQUANT[2]}]) "
          f"on {cfg.model}")
    print(f"image: {out} ({image.insn_count} instructions, DRAM {image.dram_size} bytes)")
    func = run_engine("functional", image)
    print("counters: " + ", ".join(f"{k}={v}" for k, v in func.counters.items()))
    ok = _report("functional", image, func)
    try:
        cyc = run_engine("cycle", image)
    except EngineUnavailable as exc:
        print(f"cycle      skipped: {exc}")
    else:
        ok = _report("cycle", image, cyc) and ok
        if bytes(cyc.dram) != bytes(func.dram):
            print("cycle      final DRAM differs from the functional model")
            ok = False
        _write_reports(out, cyc)
        if rtl:
            ok = _run_rtl(image, cyc, rtl) and ok
    print(f"re-run: vtasim run {out} --engine cycle --check   (or: vtasim diff {out})")
    print("demo: " + ("all outputs match the numpy reference" if ok else "FAILED"))
    return 0 if ok else 1


def _run_rtl(image, cyc, sim: str) -> bool:
    """Run the RTL too and hold its bytes and retire records against the cycle engine."""
    rtl = run_engine("rtl", image, sim=sim)
    ok = _report(f"rtl/{sim}", image, rtl)
    same = list(rtl.trace) == list(cyc.trace) and rtl.cycles == cyc.cycles
    print(f"           retire trace {'identical to' if same else 'DIFFERS from'} the cycle engine "
          f"({len(cyc.trace)} records)")
    return ok and same


def cmd_demo(args) -> int:
    return run_demo(load_config(args.config), Path(args.out), rtl=args.rtl)


def add_commands(sub) -> None:
    """Add ``demo`` to an argparse sub-parser collection."""
    p = sub.add_parser("demo", help="build, run and check a tiled int8 GEMM with requantization")
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="where the demo image, trace and plot are saved")
    p.add_argument("--rtl", choices=("verilator", "icarus"), default=None,
                   help="also run the RTL on this simulator and compare it with the cycle engine")
    p.set_defaults(func=cmd_demo)
