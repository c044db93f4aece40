"""The zero-point correction of a quantised transposed conv on VTA: per phase or per output position.

::

    python bench/qconv_transpose.py                       # DCGAN's four layer shapes, default config
    python bench/qconv_transpose.py --config config/presets/1x32x32.json

Output ``(Y, X)`` of ``sum (x - za) w`` meets fewer taps near the borders, so ``za * sum w`` depends on
the position there.  The two forms of :func:`vtasim.compiler.ops.qconv_transpose.build_qconv_transpose`:

* ``phase``: the host pads the input's halo with ``za`` (more input bytes), so each phase's correction
  is constant; it is loaded as one vector per channel, row phase and column (its ALU add allows at most
  two hardware loops, so a tile holds one channel block or one phase row);
* ``position``: the DMA pads with 0 and an int32 correction of every output position is loaded into
  the accumulator in place of the bias (4 bytes per output element, the tile's space twice).

For each layer (input zero point -128, uint8 zero point 0 shifted to int8, as DCGAN's ReLU outputs
are), form and requantisation plan (``fixed``: the fixed-point plan, within 1 LSB; ``exact``: the
exact plan, what ``plan_requant``'s ``auto`` takes here, since the fixed-point plan of this
multiplier is not exact), every knob set the builder would try is compiled and run on the cycle
engine; the best is printed with its DRAM bytes (loads and stores), and the ratios side by side:
position / phase (each plan) and exact / fixed (each form).  Every run is checked against
``layer.reference`` (numpy) bit for bit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (name, H, CIN, COUT, K, STRIDE, PAD): the DCGAN generator of compiler/frontend/models/edge.py
MULTIPLIER = 0.002          # s_x * s_w / s_y: its fixed-point plan is not exact at these layers' bounds
DCGAN = [("convT1 1->4", 1, 32, 256, 4, 1, 0), ("convT2 4->8", 4, 256, 128, 4, 2, 1),
         ("convT3 8->16", 8, 128, 64, 4, 2, 1), ("convT4 16->32", 16, 64, 3, 4, 2, 1)]


def _best(cfg, shape, w, b, s, p, za, plan, correction, x):
    from vtasim.compiler.errors import CompileError
    from vtasim.compiler.ops.qconv_transpose import build_qconv_transpose, fitting_candidates, transpose_geometry
    g = transpose_geometry(cfg, shape, w.shape, s, p)
    wl = g.transpose_workload()
    best = None
    for ks in fitting_candidates(wl, cfg, plan):
        try:
            layer = build_qconv_transpose(cfg, shape, w, b, s, p, za, plan, knobs=ks, correction=correction)
        except CompileError:                    # a knob set that does not compile
            continue
        y, res = layer.run(x, engine="cycle")
        if not np.array_equal(y, layer.reference(x)):
            raise SystemExit(f"{correction}: cycle engine differs from the numpy reference")
        row = (res.cycles, layer.dram_bytes, res.counters["gemm_counter"], ks)
        if best is None or row[0] < best[0]:
            best = row
    return best


def _ratios(label, got):
    """position / phase per plan and exact / fixed per form, of cycles and DRAM bytes."""
    pp = ", ".join(f"{path} {got['position', path][0] / got['phase', path][0]:.2f}/"
                   f"{got['position', path][1] / got['phase', path][1]:.2f}" for path in ("fixed", "exact"))
    ef = ", ".join(f"{form} {got[form, 'exact'][0] / got[form, 'fixed'][0]:.3f}/"
                   f"{got[form, 'exact'][1] / got[form, 'fixed'][1]:.3f}" for form in ("phase", "position"))
    print(f"{label:<14} position/phase (cycles/bytes): {pp}; exact/fixed (cycles/bytes): {ef}")


def main(argv=None) -> int:
    from vtasim.compiler import qnn
    from vtasim.hw.config import load_config
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--za", type=int, default=-128, help="input zero point (int8)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    rng = np.random.default_rng(0)
    print(f"config {cfg.batch}x{cfg.block_in}x{cfg.block_out}, input zero point {args.za}, multiplier "
          f"{MULTIPLIER}")
    print(f"{'layer':<14} {'form':<9} {'plan':<6} {'cycles':>9} {'DRAM bytes':>11} {'GEMM uops':>10}  "
          f"tiles (co, h, w inner)")
    runs = [(form, path) for form in ("phase", "position") for path in ("fixed", "exact")]
    tot = {r: [0, 0] for r in runs}
    for name, h, c, o, k, s, p in DCGAN:
        w = rng.integers(-12, 13, (c, o, k, k)).astype(np.int8)
        b = rng.integers(-2000, 2000, o).astype(np.int32)
        bound = qnn.conv_transpose_acc_bound(w, b, args.za, s)
        plans = {path: qnn.plan_requant(MULTIPLIER, bound, 0, -128, 127, cfg, path=path) for path in ("fixed", "exact")}
        if qnn.plan_requant(MULTIPLIER, bound, 0, -128, 127, cfg).path != "exact":
            raise SystemExit(f"{name}: auto does not take the exact plan at multiplier {MULTIPLIER}")
        x = rng.integers(-128, 128, (1, c, h, h)).astype(np.int8)
        got = {}
        for form, path in runs:
            cyc, nbytes, gemm, ks = _best(cfg, (1, c, h, h), w, b, s, p, args.za, plans[path], form, x)
            got[form, path] = (cyc, nbytes)
            tot[form, path][0] += cyc
            tot[form, path][1] += nbytes
            print(f"{name:<14} {form:<9} {path:<6} {cyc:>9,} {nbytes:>11,} {gemm:>10,}  "
                  f"({ks['tile_co'][1]}, {ks['tile_h'][1]}, {ks['tile_w'][1]})")
        _ratios("", got)
    print("total")
    for form, path in runs:
        print(f"{'':<14} {form:<9} {path:<6} {tot[form, path][0]:>9,} {tot[form, path][1]:>11,}")
    _ratios("total", tot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
