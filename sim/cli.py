"""``vtasim`` command line.

::

    vtasim config [--config PATH] [--json]          every key and derived quantity of a config
    vtasim disasm IMAGE_DIR [--uops]                DUMP_INSN-shaped listing (reassemblable)
    vtasim run IMAGE_DIR [--engine functional|cycle|rtl] [--out DIR] [--check] [--json]
    vtasim demo [--config PATH] [--out DIR]         build, run and check a tiled GEMM + requantize
    vtasim unit [NAME] [--config PATH] [--out DIR]  list / export the spec 7.1-7.2 unit programs
    vtasim import-tvm --insn F [--dram F@ADDR ...] [--out DIR]   TVM artefacts -> memory image

Other modules add commands through an ``add_commands(subparsers)`` function listed in
:data:`PLUGINS` (e.g. ``vtasim diff``/``fuzz`` from ``sim.diff_cli``).  Engines are imported only
when a command needs them.

Exit codes: 0 success, 1 ``--check`` mismatch, 2 any error (printed as one line on stderr).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from hw.config import ConfigError, load_config
from hw.isa import IsaError
from sim.errors import SimError
from sim.image import MemoryImage, check_output_name
from sim.result import COUNTER_NAMES

__all__ = ["main", "run_engine", "check_result", "ENGINES", "PLUGINS"]

ENGINES = {"functional": "sim.functional", "cycle": "sim.cycle", "rtl": "hw.cosim"}
PLUGINS = ("sim.diff_cli", "sim.replay_cli", "compiler.cli", "waveforms.cli", "sim.workloads_cli")
USER_ERRORS = (SimError, ConfigError, IsaError, OSError)


class EngineUnavailable(SimError):
    """The requested engine's module is not importable in this installation."""


def run_engine(name: str, image, **opts):
    """``<engine module>.run_image(image, **opts)``, importing the engine only now."""
    if name not in ENGINES:
        raise SimError(f"engine {name!r} is not one of {', '.join(ENGINES)}")
    try:
        mod = importlib.import_module(ENGINES[name])
    except ImportError as exc:
        raise EngineUnavailable(f"engine {name!r} is not available ({ENGINES[name]}: {exc})") from None
    return mod.run_image(image, **opts)


def check_result(image, result) -> list:
    """Mismatches against the image's expected outputs and counters, as one-line strings."""
    problems = []
    for name, want in image.expected.items():
        got = result.outputs[name]
        if got != want:
            a, b = np.frombuffer(want, np.uint8), np.frombuffer(got, np.uint8)
            k = int(np.argmax(a != b))
            ndiff = int(np.count_nonzero(a != b))
            problems.append(f"output {name!r}: byte {k} (element {k // image.cfg.out_elem_bytes}, lane "
                            f"{k % image.cfg.out_elem_bytes}) expected {a[k].astype(np.int8)} (0x{a[k]:02x}), "
                            f"got {b[k].astype(np.int8)} (0x{b[k]:02x}); {ndiff} of {len(a)} bytes differ")
    for key, want in (image.expected_counters or {}).items():
        got = result.counters.get(key)
        if got != want:
            problems.append(f"counter {key}: expected {want}, got {got}")
    return problems


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- commands ---------------------------------------------------------------------------------
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
    from hw.config import MEM_UOP
    from hw.disasm import dump
    from hw.isa import decode_stream, decode_uops
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
    opts = {k: v for k, v in (("trace", args.trace), ("perfetto", args.perfetto), ("sim", args.sim),
                              ("waves", args.waves or None)) if v is not None}
    result = run_engine(args.engine, image, **opts)
    files = {}
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in result.outputs.items():
            p = out / f"{check_output_name(name)}.bin"
            p.write_bytes(data)
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
        print(json.dumps(doc, indent=1))
    else:
        print(f"engine {result.engine}: {image.insn_count} instructions"
              + (f", {result.cycles} cycles" if result.cycles is not None else ""))
        if result.breakdown:
            from sim.trace import breakdown_table
            print(breakdown_table(result.breakdown, result.cycles))
        for k in COUNTER_NAMES:
            print(f"  {k:18s} {result.counters[k]}")
        if result.leftover_tokens:
            print("  leftover tokens: " + ", ".join(f"{k}={v}" for k, v in result.leftover_tokens.items()))
        for n, d in result.outputs.items():
            print(f"  output {n}: {len(d)} bytes sha256 {_sha256(d)[:16]}" + (f" -> {files[n]}" if n in files else ""))
        if args.check:
            print("check: OK" if not problems else "check: MISMATCH")
    if problems:
        for p in problems:
            print(f"vtasim: mismatch: {p}", file=sys.stderr)
        return 1
    return 0


def cmd_unit(args) -> int:
    from sim.unit_programs import UNIT_PROGRAMS
    if not args.name:
        print("\n".join(UNIT_PROGRAMS))
        return 0
    if args.name not in UNIT_PROGRAMS:
        raise SimError(f"unknown unit program {args.name!r} (vtasim unit lists them)")
    cfg = load_config(args.config)
    out = Path(args.out or args.name)
    UNIT_PROGRAMS[args.name](cfg).save(out)
    print(f"unit program {args.name} ({cfg.model}) saved to {out}")
    return 0


def cmd_demo(args) -> int:
    from sim.demo import run_demo
    return run_demo(load_config(args.config), Path(args.out), rtl=args.rtl)


def cmd_import_tvm(args) -> int:
    from sim.tvm_import import import_cli
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        image = import_cli(args)
    for w in caught:
        print(f"vtasim: warning: {w.message}", file=sys.stderr)
    image.save(args.out)
    print(f"imported {image.insn_count} instructions, {len(image.segments)} segments, "
          f"{len(image.outputs)} outputs -> {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vtasim", description="VTA simulator: functional, cycle-accurate, RTL")
    parser.add_argument("-v", "--verbose", action="store_true", help="multi-line reports after an error line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("config", help="show a config with every derived quantity")
    p.add_argument("--config", type=Path, default=None, help="vta_config.json (default: config/vta_config.json)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("disasm", help="disassemble the instructions of a memory image")
    p.add_argument("image_dir", type=Path)
    p.add_argument("--uops", action="store_true", help="list the uops each LOAD UOP brings in")
    p.set_defaults(func=cmd_disasm)

    p = sub.add_parser("run", help="run a memory image on an engine")
    p.add_argument("image_dir", type=Path)
    p.add_argument("--engine", choices=tuple(ENGINES), default="functional")
    p.add_argument("--out", type=Path, default=None, help="write each output region to OUT/<name>.bin")
    p.add_argument("--check", action="store_true", help="compare with the image's expected outputs (exit 1 if not)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", type=Path, default=None, help="retire trace file (cycle/rtl engines)")
    p.add_argument("--perfetto", type=Path, default=None, help="Perfetto/Chrome trace JSON (cycle engine)")
    p.add_argument("--sim", choices=("verilator", "icarus"), default=None, help="HDL simulator (rtl engine)")
    p.add_argument("--waves", action="store_true", help="dump waveforms (rtl engine)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="build, run and check a tiled int8 GEMM with requantization")
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="where the demo image, trace and plot are saved")
    p.add_argument("--rtl", choices=("verilator", "icarus"), default=None,
                   help="also run the RTL on this simulator and compare it with the cycle engine")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("unit", help="list the spec 7.1/7.2 unit programs, or save one as a memory image")
    p.add_argument("name", nargs="?")
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None, help="image directory (default: ./NAME)")
    p.set_defaults(func=cmd_unit)

    p = sub.add_parser("import-tvm", help="TVM instruction buffer / DRAM dumps / DUMP_INSN text -> memory image")
    from sim.tvm_import import add_arguments
    add_arguments(p)
    p.set_defaults(func=cmd_import_tvm)

    for name in PLUGINS:
        if _module_exists(name):
            importlib.import_module(name).add_commands(sub)
    return parser


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"vtasim: error: {msg}", file=sys.stderr)
        report = getattr(exc, "report", "")
        if report and args.verbose:
            print(report, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
