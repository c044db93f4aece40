"""Random legal programs on TVM's own fsim against vtasim's functional engine: output bytes, one run.

    python bench/fsim_fuzz.py --fsim ~/tvm/build-vtasim-fsim                 # 300 programs from seed 0
    python bench/fsim_fuzz.py --fsim DIR --n 1000 --seed 5000 --imm-src-ne-dst
    python bench/fsim_fuzz.py --fsim DIR --images runs/net/images/*     # saved memory images instead

``--fsim DIR``: a TVM build with ``libvta_fsim.so`` (``bench/build_fsim.sh``, see bench/fsim_ratio.py),
built for this run's config.  Each program is the one ``vtasim randprog --seed S`` writes; it runs on
fsim in a forked child of its own on zeroed SRAM (bench/fsim_driver.py says why) and on the
functional engine, and every output region is compared byte for byte.  ``--images DIR ...`` runs
saved memory images instead (``vtasim compile --out``, ``vtasim onnx --save-images``, ``vtasim
randprog``), each built for the fsim build's config.

A program whose outputs differ is printed with its seed.  Where it holds a vector SHR or an
immediate SHR by 32 or more it is counted apart: fsim shifts with C++ ``>>``/``<<``, undefined for a
count of 32 or more, where vtasim defines the result (README "Cases fsim leaves undefined") - the
random data of a vector SHR's second operand gives such counts.  Exit 1 if any other program
differs or an fsim run fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fsim_driver import BadFsim, add_arguments, check_config, open_fsim  # noqa: E402
from vtasim.hw.alu import ALU_SHR  # noqa: E402
from vtasim.hw.isa import OP_ALU, decode_stream  # noqa: E402


def undefined_shift(cfg, image) -> bool:
    """The program holds a SHR whose count fsim's C++ may take beyond the lane width."""
    return any(i.opcode == OP_ALU and i.alu_opcode == ALU_SHR and (not i.use_imm or abs(i.imm) >= 32)
               for i in decode_stream(cfg, image.insn_bytes()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--n", type=int, default=300, help="number of programs")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--imm-src-ne-dst", action="store_true", help="immediate ALU ops with src != dst too")
    p.add_argument("--images", type=Path, nargs="+", default=None, help="saved memory image directories to run "
                   "instead of random programs")
    args = p.parse_args(argv)
    if args.n < 1:
        p.error(f"--n {args.n}: must be at least 1")
    cfg, fsim = open_fsim(args, "fsim_fuzz")
    from vtasim.sim import functional
    from vtasim.sim.errors import SimError
    from vtasim.sim.image import MemoryImage
    from vtasim.sim.programs.randprog import check_seed, generate
    if args.images:
        def programs():
            for d in args.images:
                try:
                    image = MemoryImage.load(d)
                    check_config(args.fsim, image.cfg)
                except (SimError, BadFsim) as exc:
                    print(f"fsim_fuzz: image {d}: {exc}", file=sys.stderr)
                    raise SystemExit(2) from None
                yield str(d), image
        total, what = len(args.images), "images"
    else:
        check_seed(args.seed)
        check_seed(args.seed + args.n - 1)

        def programs():
            for seed in range(args.seed, args.seed + args.n):
                yield f"seed {seed}", generate(cfg, seed, imm_src_ne_dst=args.imm_src_ne_dst)
        total, what = args.n, f"programs from seed {args.seed}"
    equal, undefined, differ, failed = 0, [], [], []
    t0 = time.perf_counter()
    for k, (label, image) in enumerate(programs()):
        ref = functional.run_image(image)
        got = fsim.outputs_in_child(image.cfg, image)
        if isinstance(got, str):
            failed.append(label)
            print(f"--- {label}: {got}")
        elif got == [bytes(ref.outputs[o.name]) for o in image.outputs]:
            equal += 1
        else:
            names = [o.name for o, g in zip(image.outputs, got) if g != bytes(ref.outputs[o.name])]
            if undefined_shift(image.cfg, image):
                undefined.append(label)
                print(f"--- {label}: {', '.join(names)} differ; it shifts by a vector or by |imm| >= 32")
            else:
                differ.append(label)
                print(f"--- {label}: {', '.join(names)} DIFFER")
        if (k + 1) % 50 == 0 or k + 1 == total:
            print(f"{k + 1}/{total} {what.split()[0]}, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(f"{total} {what}: {equal} equal, {len(undefined)} differ only with a SHR "
          f"fsim leaves undefined, {len(differ)} differ otherwise, {len(failed)} fsim runs failed")
    if differ:
        print(f"differing: {', '.join(differ)}")
    return 1 if differ or failed else 0


if __name__ == "__main__":
    sys.exit(main())
