"""``vtasim workload`` and ``vtasim randprog``: save generated programs as memory images.

    vtasim workload C2 --out c2                 # ResNet-18 C2, full size, with expected output
    vtasim workload C5 --reduce 4 --config config/presets/1x32x32.json --out c5
    vtasim workload gemm-bound --out gb
    vtasim randprog --seed 7 --out r7           # one random legal program (no expected output)
    vtasim run c2 --engine cycle --check --json

A plugin of :mod:`sim.cli` (listed in its ``PLUGINS``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["add_commands"]


def cmd_workload(args) -> int:
    from hw.config import load_config
    from sim.workloads import RESNET18, conv_image, gemm_bound_image
    cfg = load_config(args.config)
    if args.name == "gemm-bound":
        image = gemm_bound_image(cfg)
    elif args.name in RESNET18:
        image = conv_image(cfg, args.name, reduce=args.reduce, seed=args.seed)
    else:
        from sim.errors import SimError
        raise SimError(f"unknown workload {args.name!r}; workloads: {', '.join(RESNET18)}, gemm-bound")
    out = image.save(args.out or Path(args.name))
    print(f"{args.name}: {image.insn_count} instructions, DRAM {image.dram_size} bytes -> {out}")
    return 0


def cmd_randprog(args) -> int:
    from hw.config import load_config
    from sim.randprog import coverage_bins, generate
    image = generate(load_config(args.config), args.seed)
    out = image.save(args.out or Path(f"randprog_{args.seed}"))
    print(f"seed {args.seed}: {image.insn_count} instructions -> {out}; bins: {', '.join(sorted(coverage_bins(image)))}")
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("workload", help="save a ResNet-18 conv layer (C2-C11) or the GEMM-bound stream as an image")
    p.add_argument("name", help="C2 ... C11 or gemm-bound")
    p.add_argument("--reduce", type=int, default=1, help="divide H and W by this (quick runs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random activations/weights/bias")
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None, help="image directory (default: ./NAME)")
    p.set_defaults(func=cmd_workload)
    p = sub.add_parser("randprog", help="save one random legal program (sim.randprog) as an image")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None, help="image directory (default: ./randprog_SEED)")
    p.set_defaults(func=cmd_randprog)
