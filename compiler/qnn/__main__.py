"""``python -m vtasim.compiler.qnn M [M ...] --acc-bound B``: the VTA requantisation plan of a multiplier
(several numbers: one per output channel), its ALU steps and its proved error.

::

    $ python -m vtasim.compiler.qnn 0.00123 --acc-bound 1048576
    path fixed, 8 ALU steps, max_error_lsb 1 (E = 0.00398, proved)
      add 2 | shr 2 | mul 5159 | shr 5 | add 16384 | shr 15 | min 127 | max -128
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from vtasim.compiler.qnn.errors import QnnError
from vtasim.compiler.qnn.vta_requant import REQUANT_PATHS, plan_requant


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vtasim.compiler.qnn", description=__doc__.split("\n\n")[0])
    ap.add_argument("multiplier", nargs="+", type=float, help="in_scale * w_scale / out_scale (one per channel)")
    ap.add_argument("--acc-bound", type=int, required=True, help="largest |int32 accumulator| incl. bias")
    ap.add_argument("--zp", type=int, default=0, help="output zero point")
    ap.add_argument("--lo", type=int, default=-128)
    ap.add_argument("--hi", type=int, default=127)
    ap.add_argument("--relu", action="store_true")
    ap.add_argument("--path", choices=REQUANT_PATHS, default="auto")
    ap.add_argument("--config", help="VTA config json (default: the shipped one)")
    args = ap.parse_args(argv)
    from vtasim.hw.config import load_config
    try:
        cfg = load_config(args.config)
        m = args.multiplier[0] if len(args.multiplier) == 1 else np.array(args.multiplier)
        plan = plan_requant(m, args.acc_bound, args.zp, args.lo, args.hi, cfg, path=args.path, relu=args.relu)
    except (QnnError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    how = "enumerated" if plan.enumerated else "proved"
    print(f"path {plan.path}, {len(plan.steps)} ALU steps, max_error_lsb {plan.max_error_lsb} "
          f"(E = {plan.error_bound:.3g}, {how})")
    print("  " + " | ".join(f"{k} {v}" for k, v in plan.steps))
    for name, vec in plan.vectors.items():
        print(f"  {name} = {vec.tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
