"""``vtasim demo``: the README's first command - compile, simulate, report.

Compiles ResNet-18's C8 layer (14x14, 256 -> 256 channels, 3x3, the fused epilogue ``>> s``,
``+ bias``, clip, int8; ``s`` and the data follow :mod:`vtasim.compiler.ops.data`) from its DSL schedule with the TopHub knobs, writes the memory image and the
IR after every pass, runs the image on the functional and the cycle engine, checks both against the
numpy reference of the tensor expressions, and reports the fsim counters, the cycles, the GEMM
utilisation against spec 7.1's ideal count, the per-module breakdown, and a retire trace, a
Perfetto trace and a timeline PNG (:func:`vtasim.sim.cli.report.run_and_report`).

On another config the TopHub record is adapted to its block sizes and, where a tile does not fit
that config's SRAMs, the output-channel and row tiles are halved until it compiles.
"""

from __future__ import annotations

import time
from pathlib import Path

from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.knobs import check_knobs, fallback_knobs, tophub_knobs
from vtasim.compiler.ops import compile_workload
from vtasim.compiler.tuning.workloads import parse_workload

__all__ = ["run_demo", "fitting_knobs"]

WORKLOAD = "resnet18.C8"


def _shrunk(knobs: dict, key: str):
    outer, inner = knobs[key]
    for d in range(inner - 1, 0, -1):
        if inner % d == 0:
            return dict(knobs, **{key: [outer * inner // d, d]})
    return None


def fitting_knobs(name: str, cfg, reduce: int = 1, dump_ir=None):
    """``(compiled, source)``: TopHub (adapted to ``cfg``), its tiles shrunk until they fit, else the
    fallback knobs."""
    wl = parse_workload(name, cfg, reduce=reduce)
    knobs = tophub_knobs(wl, cfg, any_config=True)
    source = "TopHub" if tophub_knobs(wl, cfg) == knobs and knobs else f"TopHub adapted to {cfg.bitstream}"
    last = None
    while knobs is not None:
        for thread, split in (("oc_nthread", "tile_co"), ("h_nthread", "tile_h")):
            if knobs[split][0] % knobs[thread]:
                knobs = dict(knobs, **{thread: 1})
        try:
            check_knobs(wl, cfg, knobs)
            return compile_workload(name, cfg, knobs=knobs, reduce=reduce, dump_ir=dump_ir), source
        except CompileError as exc:
            last = exc
        knobs = _shrunk(knobs, "tile_co") or _shrunk(knobs, "tile_h")
    note = f" ({last})" if last else ""
    return compile_workload(name, cfg, knobs=fallback_knobs(wl, cfg), reduce=reduce, dump_ir=dump_ir), \
        f"fallback{note}"


def run_demo(cfg, out: Path, rtl: str | None = None, workload: str = WORKLOAD, reduce: int = 1) -> int:
    from vtasim.hw.outfiles import out_dir
    from vtasim.sim.cli.report import run_and_report
    out = out_dir(out, "demo directory")
    t0 = time.perf_counter()
    compiled, source = fitting_knobs(workload, cfg, reduce=reduce, dump_ir=out / "ir")
    dt = time.perf_counter() - t0
    wl = compiled.workload
    compiled.image.save(out)
    print(f"demo: {wl.name} conv2d {wl.h}x{wl.w}, {wl.cin}->{wl.cout} channels, {wl.k}x{wl.k}, stride {wl.stride} "
          f"+ >>{compiled.shift}, +bias, clip, int8 on {cfg.model}")
    print(compiled.output_fractions())
    print(f"compiled in {dt:.2f} s with {source} knobs {compiled.knobs}")
    print(f"image: {out} ({compiled.image.insn_count} instructions, {compiled.stats.get('uop_kernels', 0)} uop "
          f"kernels, DRAM {compiled.image.dram_size} bytes); IR after every pass in {out / 'ir'}")
    ok, results = run_and_report(compiled.image, out, rtl=rtl)
    ideal = wl.ideal_gemm_uops(cfg)
    gemm = results["functional"].counters["gemm_counter"]
    util = f", GEMM utilisation {gemm / results['cycle'].cycles:.3f} (GEMM uops / cycles)" if "cycle" in results else ""
    print(f"GEMM uops: {gemm}, ideal {ideal} (spec 7.1){util}")
    if gemm != ideal:
        print("demo: the schedule computes some MAC tiles more than once")
        ok = False
    print("demo: " + ("all outputs match the numpy reference" if ok else "FAILED"))
    return 0 if ok else 1
