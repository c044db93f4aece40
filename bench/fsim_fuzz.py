"""Random legal programs on TVM's own fsim against vtasim's functional engine: output bytes, one run.

    python bench/fsim_fuzz.py --fsim ~/tvm/build-vtasim-fsim                 # 300 programs from seed 0
    python bench/fsim_fuzz.py --fsim DIR --n 1000 --seed 5000 --imm-src-ne-dst

``--fsim DIR``: a TVM build with ``libvta_fsim.so`` (``bench/build_fsim.sh``, see bench/fsim_ratio.py),
built for this run's config.  Each program is the one ``vtasim randprog --seed S`` writes; it runs on
fsim in a forked child of its own on zeroed SRAM (bench/fsim_driver.py says why) and on the
functional engine, and every output region is compared byte for byte.

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

from fsim_driver import add_arguments, open_fsim  # noqa: E402
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
    args = p.parse_args(argv)
    if args.n < 1:
        p.error(f"--n {args.n}: must be at least 1")
    cfg, fsim = open_fsim(args, "fsim_fuzz")
    from vtasim.sim import functional
    from vtasim.sim.programs.randprog import check_seed, generate
    check_seed(args.seed)
    check_seed(args.seed + args.n - 1)
    equal, undefined, differ, failed = 0, [], [], []
    t0 = time.perf_counter()
    for k, seed in enumerate(range(args.seed, args.seed + args.n)):
        image = generate(cfg, seed, imm_src_ne_dst=args.imm_src_ne_dst)
        ref = functional.run_image(image)
        got = fsim.outputs_in_child(cfg, image)
        if isinstance(got, str):
            failed.append(seed)
            print(f"--- seed {seed}: {got}")
        elif got == [bytes(ref.outputs[o.name]) for o in image.outputs]:
            equal += 1
        else:
            names = [o.name for o, g in zip(image.outputs, got) if g != bytes(ref.outputs[o.name])]
            if undefined_shift(cfg, image):
                undefined.append(seed)
                print(f"--- seed {seed}: {', '.join(names)} differ; it shifts by a vector or by |imm| >= 32")
            else:
                differ.append(seed)
                print(f"--- seed {seed}: {', '.join(names)} DIFFER")
        if (k + 1) % 50 == 0 or k + 1 == args.n:
            print(f"{k + 1}/{args.n} programs, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(f"{args.n} programs from seed {args.seed}: {equal} equal, {len(undefined)} differ only with a SHR "
          f"fsim leaves undefined, {len(differ)} differ otherwise, {len(failed)} fsim runs failed")
    if differ:
        print(f"differing seeds: {' '.join(map(str, differ))}")
    return 1 if differ or failed else 0


if __name__ == "__main__":
    sys.exit(main())
