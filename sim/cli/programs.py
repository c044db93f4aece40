"""``vtasim unit``, ``workload``, ``randprog``, ``import-tvm``: programs from :mod:`vtasim.sim.programs` as images.

    vtasim unit                                 # list the spec 7.1/7.2 unit programs
    vtasim unit gemm_smt --out img              # save one as a memory image
    vtasim workload gemm-bound --out gb         # the GEMM-bound synthetic stream
    vtasim randprog --seed 7 --out r7           # one random legal program (no expected output)
    vtasim import-tvm --insn F [--dram F@ADDR ...] [--out DIR]   TVM artefacts -> memory image
    vtasim run gb --engine cycle --check --json

ResNet-18 layers and every operator come from the compiler: ``vtasim compile resnet18.C2 --out c2``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from vtasim.hw.config import load_config
from vtasim.sim.cli.options import add_config
from vtasim.sim.errors import SimError

__all__ = ["add_commands"]


def cmd_unit(args) -> int:
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
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


def cmd_import_tvm(args) -> int:
    from vtasim.sim.programs.tvm_import import import_cli
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        image = import_cli(args)
    for w in caught:
        print(f"vtasim: warning: {w.message}", file=sys.stderr)
    image.save(args.out)
    print(f"imported {image.insn_count} instructions, {len(image.segments)} segments, "
          f"{len(image.outputs)} outputs -> {args.out}")
    return 0



def cmd_workload(args) -> int:
    from vtasim.sim.programs.synthetic import gemm_bound_image
    if args.name != "gemm-bound":
        hint = f"; ResNet-18 layers come from the compiler: vtasim compile resnet18.{args.name} --out DIR" \
            if args.name.upper().startswith("C") else ""
        raise SimError(f"unknown workload {args.name!r}: the synthetic workload is gemm-bound{hint}")
    image = gemm_bound_image(load_config(args.config))
    out = image.save(args.out or Path(args.name))
    print(f"{args.name}: {image.insn_count} instructions, DRAM {image.dram_size} bytes -> {out}")
    return 0


def cmd_randprog(args) -> int:
    from vtasim.sim.programs.randprog import check_seed, coverage_bins, generate
    check_seed(args.seed, "randprog --seed")
    image = generate(load_config(args.config), args.seed, imm_src_ne_dst=args.imm_src_ne_dst)
    out = image.save(args.out or Path(f"randprog_{args.seed}"))
    print(f"seed {args.seed}: {image.insn_count} instructions -> {out}; bins: {', '.join(sorted(coverage_bins(image)))}")
    return 0


def add_commands(sub) -> None:
    """Add ``unit``, ``workload``, ``randprog`` and ``import-tvm`` to an argparse sub-parser collection."""
    p = sub.add_parser("unit", help="list the spec 7.1/7.2 unit programs, or save one as a memory image")
    p.add_argument("name", nargs="?", help="the unit program to save (without it: list them)")
    add_config(p)
    p.add_argument("--out", type=Path, default=None, help="image directory (default: ./NAME)")
    p.set_defaults(func=cmd_unit)

    p = sub.add_parser("import-tvm", help="TVM instruction buffer / DRAM dumps / DUMP_INSN text -> memory image")
    from vtasim.sim.programs.tvm_import import add_arguments
    add_arguments(p)
    p.set_defaults(func=cmd_import_tvm)

    p = sub.add_parser("workload", help="save the GEMM-bound synthetic stream as an image (layers: vtasim compile)")
    p.add_argument("name", help="gemm-bound")
    add_config(p)
    p.add_argument("--out", type=Path, default=None, help="image directory (default: ./NAME)")
    p.set_defaults(func=cmd_workload)
    p = sub.add_parser("randprog", help="save one random legal program (vtasim.sim.programs.randprog) as an image")
    p.add_argument("--seed", type=int, default=0, help="the program's seed (vtasim fuzz uses SEED .. SEED+N-1)")
    add_config(p)
    p.add_argument("--out", type=Path, default=None, help="image directory (default: ./randprog_SEED)")
    p.add_argument("--imm-src-ne-dst", action="store_true",
                   help="also emit immediate ALU ops with src != dst (the Chisel VTA reads src, fsim dst)")
    p.set_defaults(func=cmd_randprog)
