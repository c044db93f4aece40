"""FastMath on the host, measured side by side in one run: each approximation
(:mod:`vtasim.compiler.frontend.fastmath`) against the exact float op as the host runs it (numpy / scipy),
on the same float32 array, best of ``--repeat`` timings each.

    python bench/fastmath.py                    # 1,000,000 elements
    python bench/fastmath.py --size 100000 --repeat 20

Prints, per op, the exact and the approximate time, their ratio, and the worst relative error on
that array (against float64, for Softmax against the exact float32 op; where the value is >= 1e-30).  It asserts nothing; the bounds are tested in tests/frontend/test_passes_fastmath.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtasim.compiler.frontend.fastmath import fast_erf, fast_exp, fast_tanh  # noqa: E402
from vtasim.compiler.frontend.host_ops import softmax  # noqa: E402


def _best(fn, x, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    from scipy import special
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.size < 1 or args.repeat < 1:
        print(f"bench/fastmath.py: --size {args.size} and --repeat {args.repeat} must be at least 1",
              file=sys.stderr)
        return 2
    x = (np.random.default_rng(args.seed).standard_normal(args.size) * 4).astype(np.float32)
    rows = 1000 if args.size % 1000 == 0 else 1
    cases = [("Exp", lambda v: np.exp(v), fast_exp, np.exp),
             ("Tanh", lambda v: np.tanh(v), fast_tanh, np.tanh),
             ("Erf", lambda v: special.erf(v).astype(np.float32), fast_erf, special.erf),
             ("Softmax", lambda v: softmax(v.reshape(rows, -1), -1), lambda v: softmax(v.reshape(rows, -1), -1,
                                                                                        exp=fast_exp), None)]
    print(f"{args.size:,} float32 elements, best of {args.repeat}")
    print(f"{'op':8} {'exact ms':>9} {'fast ms':>9} {'fast/exact':>10} {'max rel err':>12}")
    for name, exact, fast, ref in cases:
        te, tf = _best(exact, x, args.repeat), _best(fast, x, args.repeat)
        want = ref(x.astype(np.float64)) if ref is not None else exact(x).astype(np.float64)   # softmax: the f32 op
        got = np.asarray(fast(x), np.float64).reshape(want.shape)
        big = np.abs(want) >= 1e-30
        rel = np.max(np.abs(got - want)[big] / np.abs(want[big]))
        print(f"{name:8} {te * 1e3:9.2f} {tf * 1e3:9.2f} {tf / te:10.2f} {rel:12.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
