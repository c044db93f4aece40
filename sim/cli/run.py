"""``vtasim config``, ``vtasim disasm`` and ``vtasim run``: look at a config or an image, run an image.

::

    vtasim config [--config PATH] [--json]          every key and derived quantity of a config
    vtasim disasm IMAGE_DIR [--uops]                DUMP_INSN-shaped listing (reassemblable)
    vtasim run IMAGE_DIR [--engine functional|cycle|rtl] [--out DIR] [--check] [--json] [--max-cycles N]
    vtasim run IMAGE_DIR --engine rtl --waves [fst|vcd]     ./vtasim_rtl.fst + ./vtasim_rtl.gtkw

``run`` exits 1 when ``--check`` finds a mismatch (each printed on stderr).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from vtasim.hw.config import load_config
from vtasim.hw.outfiles import out_dir, write_bytes
from vtasim.sim.engines import ENGINES, check_result, run_engine
from vtasim.sim.errors import SimError
from vtasim.sim.image import MemoryImage, check_output_name
from vtasim.sim.cli.options import add_config, add_image_dir, add_json, add_sim, add_waves
from vtasim.sim.result import COUNTER_NAMES

RUN_WAVES = "vtasim_rtl"        # the stem of run --waves' files in the current directory

__all__ = ["add_commands", "cmd_config", "cmd_disasm", "cmd_run"]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cmd_config(args) -> int:
    cfg = load_config(args.config)
    if args.json:
        print(json.dumps({"config": cfg.to_dict(), "derived": cfg.derived()}, indent=1))
        return 0
    print(f"config {args.config or 'default'}: {cfg.model}")
    for k, v in cfg.to_dict().items():
        print(f"  {k:20s} {v}")
    print("derived:")
    for k, v in cfg.derived().items():
        print(f"  {k:20s} {v}")
    return 0


def cmd_disasm(args) -> int:
    from vtasim.hw.config import MEM_UOP
    from vtasim.hw.disasm import dump
    from vtasim.hw.isa import decode_stream, decode_uops
    image = MemoryImage.load(args.image_dir)
    insns = decode_stream(image.cfg, image.insn_bytes())
    uops = None
    if args.uops:
        dram = image.dram()

        def uops(insn):
            base = insn.dram_base * image.cfg.dram_elem_bytes(MEM_UOP)
            words = dram[base:base + 4 * insn.x_size].view("<u4")
            return list(zip(*(a.tolist() for a in decode_uops(image.cfg, words))))
    sys.stdout.write(dump(insns, uops))
    return 0


def cmd_run(args) -> int:
    image = MemoryImage.load(args.image_dir)
    if args.check and not image.expected and not image.expected_counters:
        raise SimError(f"{args.image_dir}: --check given but the image has no expected outputs or counters")
    if args.max_cycles is not None and args.engine != "rtl":
        raise SimError(f"--max-cycles {args.max_cycles} is the RTL's watchdog: it needs --engine rtl "
                       f"(the {args.engine} engine detects deadlocks and needs no watchdog)")
    if args.coverage is not None and args.engine != "rtl":
        raise SimError(f"--coverage {args.coverage} is the RTL's code coverage: it needs --engine rtl")
    if args.engine == "rtl":
        from vtasim.sim.rtl import require
        require(args.sim or "verilator", "vtasim run --engine rtl")
    elif args.waves:
        raise SimError(f"--waves {args.waves}: the {args.engine} engine writes no waveforms (vtasim waves IMAGE_DIR "
                       f"writes the model's); --waves needs --engine rtl")
    waves_file = Path(f"{RUN_WAVES}.{args.waves}").resolve() if args.waves else None
    opts = {k: v for k, v in (("trace", args.trace), ("perfetto", args.perfetto), ("sim", args.sim),
                              ("waves", args.waves or None), ("waves_file", waves_file),
                              ("max_cycles", args.max_cycles), ("coverage", args.coverage)) if v is not None}
    result = run_engine(args.engine, image, **opts)
    views = {}
    if waves_file is not None:
        from vtasim.sim.cli.waves import write_rtl_view
        views = {"file": str(waves_file), "gtkw": str(write_rtl_view(image, result, waves_file))}
    files = {}
    if args.out is not None:
        out = out_dir(args.out, "--out directory")
        for name, data in result.outputs.items():
            p = write_bytes(out / f"{check_output_name(name)}.bin", data, "output region file")
            files[name] = str(p)
    problems = check_result(image, result) if args.check else []
    if args.json:
        doc = {"engine": result.engine,
               "counters": {k: result.counters[k] for k in COUNTER_NAMES},
               "outputs": {n: {"file": files.get(n), "nbytes": len(d), "sha256": _sha256(d)}
                           for n, d in result.outputs.items()},
               "cycles": result.cycles, "leftover_tokens": result.leftover_tokens,
               "wall_s": result.wall_s}
        if result.breakdown is not None:
            doc["breakdown"] = result.breakdown
            doc["cycles_per_s"] = result.cycles / result.wall_s if result.wall_s else None
        if args.check:
            doc["check"] = {"ok": not problems, "mismatches": problems}
        if views:
            doc["waves"] = views
        print(json.dumps(doc, indent=1))
    else:
        print(f"engine {result.engine}: {image.insn_count} instructions"
              + (f", {result.cycles} cycles" if result.cycles is not None else ""))
        if result.breakdown:
            from vtasim.sim.trace import breakdown_table
            print(breakdown_table(result.breakdown, result.cycles))
        for k in COUNTER_NAMES:
            print(f"  {k:18s} {result.counters[k]}")
        if result.leftover_tokens:
            print("  leftover tokens: " + ", ".join(f"{k}={v}" for k, v in result.leftover_tokens.items()))
        for n, d in result.outputs.items():
            print(f"  output {n}: {len(d)} bytes sha256 {_sha256(d)[:16]}" + (f" -> {files[n]}" if n in files else ""))
        if views:
            print(f"waves: {views['file']} (gtkwave {views['gtkw']})")
        if args.check:
            print("check: OK" if not problems else "check: MISMATCH")
    if args.coverage is not None:
        from vtasim.sim.rtl.coverage_report import coverage_note
        print(coverage_note(args.coverage), file=sys.stderr if args.json else sys.stdout)
    if problems:
        for p in problems:
            print(f"vtasim: mismatch: {p}", file=sys.stderr)
        return 1
    return 0



def add_commands(sub) -> None:
    """Add ``config``, ``disasm`` and ``run`` to an argparse sub-parser collection."""
    p = sub.add_parser("config", help="show a config with every derived quantity")
    add_config(p)
    add_json(p)
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("disasm", help="disassemble the instructions of a memory image")
    add_image_dir(p)
    p.add_argument("--uops", action="store_true", help="list the uops each LOAD UOP brings in")
    p.set_defaults(func=cmd_disasm)

    p = sub.add_parser("run", help="run a memory image on an engine")
    add_image_dir(p)
    p.add_argument("--engine", choices=tuple(ENGINES), default="functional",
                   help="functional: fsim's semantics, no cycles; cycle: the cycle-accurate model; rtl: the Verilog")
    p.add_argument("--out", type=Path, default=None, help="write each output region to OUT/<name>.bin")
    p.add_argument("--check", action="store_true", help="compare with the image's expected outputs (exit 1 if not)")
    add_json(p)
    p.add_argument("--trace", type=Path, default=None, help="retire trace file (cycle/rtl engines)")
    p.add_argument("--perfetto", type=Path, default=None, help="Perfetto/Chrome trace JSON (cycle/rtl engines)")
    add_sim(p, default=None, what="HDL simulator of the rtl engine")
    add_waves(p, f"rtl engine: write the waveforms to ./{RUN_WAVES}.<format> and a GTKWave save file beside them")
    p.add_argument("--max-cycles", type=int, default=None,
                   help="RTL watchdog, 1 .. 2^32-1 (rtl engine; default 2^32-1: deadlocks are detected, not timed out)")
    p.add_argument("--coverage", type=Path, default=None, metavar="DIR",
                   help="RTL code coverage (rtl engine, Verilator): merged into DIR, reports in DIR/report.txt, DIR/html")
    p.set_defaults(func=cmd_run)
