"""The edge networks on VTA at full size, side by side with ResNet-18: where the cycles go.

::

    python bench/edge_networks.py                                  # all five, 32 inputs for agreement
    python bench/edge_networks.py --networks mobilenet_v2 resnet18 --inputs 8
    python bench/edge_networks.py --vs-fixed          # also the cycles with --requant fixed, side by side

For each network (random He-initialised weights, quantised by onnxruntime at run time): the VTA
regions and host ops, the cycles of one inference on the cycle engine split by layer kind
(depthwise, pointwise 1x1, other convolutions, dense, transposed), each kind's GEMM utilisation
(GEMM uops per cycle), the wall time of one simulated inference against onnxruntime's, and over
``--inputs`` inputs the top-1 agreement and relative error against onnxruntime (VTA regions as their
numpy execution, which the cycle engine equals bit for bit), next to the network's noise floor:
onnxruntime against itself with noise of 1 % of the input's quantisation step added to each input
(``compare.noisy_runs``).  Where the floor's top-1 is below 1, the network is chaotic at that size (a
1-LSB rounding difference in an early layer moves its top-1), and no faithful int8 execution can be
expected to agree on every input.  ``--vs-fixed`` also compiles each
network with ``requant="fixed"`` (every requantisation the fixed-point plan, within 1 LSB) and prints
the VTA cycles of one inference of both and their ratio, with how many layers run the exact plan.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FULL = {"mobilenet_v2": dict(hw=224), "yolo_tiny": dict(hw=416, classes=80), "bert_tiny": dict(seq=128),
        "dcgan": dict(), "resnet18": dict()}


def _kind(node) -> str:
    if node.op == "qdense":
        return "dense"
    if node.op == "qconv_transpose":
        return "transposed"
    if "weight" not in node.attrs:
        return node.op                     # a residual add in a multi-op region
    o, i, kh, kw = node.attrs["weight"].shape
    if node.attrs.get("group", 1) > 1:
        return "depthwise" if i == 1 else "grouped"
    return "pointwise 1x1" if kh == 1 else f"conv {kh}x{kw}"


def _plan_paths(net, cfg, requant) -> dict:
    """{plan path: layers} over the network's VTA layers."""
    from vtasim.compiler.frontend.region import VtaRegion
    out: dict = {}
    for n in net.graph.nodes:
        if n.target == "vta" and n.op in ("qconv", "qdense", "qconv_transpose"):
            path = VtaRegion(n, cfg, path=requant).check(n.attrs["x_dtype"])[1].path
            out[path] = out.get(path, 0) + 1
    return out


def _make(name, path):
    from vtasim.compiler.frontend.models import edge
    if name == "resnet18":
        from vtasim.compiler.frontend.models.resnet18 import make_resnet18
        return make_resnet18(path, image=224)
    return edge.make(name, path, **FULL[name])


def main(argv=None) -> int:
    import onnx

    from vtasim.compiler.frontend.compare import OrtReference, agreement, input_scale, noisy_runs, output_lsb
    from vtasim.compiler.frontend.models import edge
    from vtasim.compiler.frontend.network import Network
    from vtasim.hw.config import load_config
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--networks", nargs="+", default=list(FULL), choices=list(FULL))
    ap.add_argument("--inputs", type=int, default=32, help="inputs for the agreement with onnxruntime")
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--regions", choices=("multi", "single"), default="multi",
                    help="multi-op regions (the default) or one region per layer")
    ap.add_argument("--requant", choices=("auto", "fixed", "exact"), default="auto",
                    help="requantisation plans on VTA (auto: exact where the fixed-point plan is not)")
    ap.add_argument("--vs-fixed", action="store_true", help="also the VTA cycles with --requant fixed")
    args = ap.parse_args(argv)
    if args.inputs < 1:
        print(f"error: --inputs = {args.inputs} must be >= 1", file=sys.stderr)
        return 2
    cfg = load_config(args.config)
    tmp = tempfile.TemporaryDirectory()
    rows = []
    for name in args.networks:
        t0 = time.perf_counter()
        path = _make(name, Path(tmp.name) / f"{name}.onnx")
        net = Network.from_onnx(path, cfg, region_mode=args.regions, requant=args.requant)
        t_build = time.perf_counter() - t0
        model = onnx.load(path)
        if name == "resnet18":
            xs = np.random.default_rng(7).random((args.inputs, 1, 3, 224, 224)).astype(np.float32)
        else:
            xs = edge.calibration(model, n=args.inputs, seed=7)[:, None]
        ort = OrtReference(path)
        net.run(xs[0], engine="cycle")                          # compiles every region
        t0 = time.perf_counter()
        _, records = net.run(xs[0], engine="cycle")
        t_sim = time.perf_counter() - t0
        t0 = time.perf_counter()
        ort.run(xs[0])
        t_ort = time.perf_counter() - t0
        by_kind: dict[str, list] = {}
        nodes = {n.name: n for n in net.graph.nodes}
        for r in records:
            if r.target == "vta":
                k = _kind(nodes[r.name])
                c, g, n_ = by_kind.get(k, (0, 0, 0))
                by_kind[k] = (c + r.cycles, g + (r.gemm_ops or 0), n_ + 1)
        ours = np.stack([net.run(x, engine="reference")[0].reshape(-1) for x in xs])
        refs = np.stack([ort.run(x).reshape(-1) for x in xs])
        m = agreement(ours, refs, output_lsb(net.graph))
        floor = None                                    # token ids: no input noise to add
        if np.issubdtype(xs.dtype, np.floating):
            floor = agreement(noisy_runs(ort, xs, input_scale(net.graph)).reshape(len(xs), -1), refs,
                              output_lsb(net.graph))
        total = sum(c for c, _, _ in by_kind.values())
        gemm = sum(g for _, g, _ in by_kind.values())
        print(f"\n{name}: {len({id(r) for r in net.regions.values()})} VTA region(s), {sum(1 for r in records if r.target == 'host')} host "
              f"op(s); built in {t_build:.1f} s")
        print(f"  {'kind':<16} {'layers':>6} {'cycles':>13} {'share':>7} {'GEMM util':>9}")
        for k, (c, g, n_) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
            print(f"  {k:<16} {n_:>6} {c:>13,} {c / total:>7.1%} {g / c:>9.3f}")
        print(f"  {'total':<16} {len({id(r) for r in net.regions.values()}):>6} {total:>13,} {'':>7} {gemm / total if total else 0:>9.3f}")
        print(f"  one inference: simulated {t_sim:.2f} s, onnxruntime {t_ort * 1e3:.1f} ms "
              f"({t_sim / t_ort:.0f}x); over {len(xs)} inputs: top-1 agreement {m.get('top1', float('nan')):.3f}, "
              f"relative error {m['rel_err']:.3f}, max {m['max_lsb']} output LSB; noise floor (onnxruntime "
              f"against itself, 1 % of an input LSB of noise): " + (
                  f"top-1 {floor.get('top1', float('nan')):.3f}, relative error {floor['rel_err']:.3f}" if floor
                  else "none (integer inputs)"))
        if args.vs_fixed:
            fixed = Network.from_onnx(path, cfg, region_mode=args.regions, requant="fixed")
            fixed.run(xs[0], engine="cycle")
            f_total = sum(r.cycles for r in fixed.run(xs[0], engine="cycle")[1] if r.target == "vta")
            paths = _plan_paths(net, cfg, args.requant)
            print(f"  requantisation: {', '.join(f'{v} {k}' for k, v in sorted(paths.items())) or 'no'} plan(s); VTA cycles "
                  f"{total:,} against {f_total:,} with every plan fixed ({total / f_total if f_total else 1:.3f}x)")
        rows.append((name, total, gemm / total if total else 0, m.get("top1"), floor.get("top1") if floor else None))
    print("\nnetwork          VTA cycles   GEMM util   top-1 agreement   noise floor top-1")
    for name, total, util, top1, ftop1 in rows:
        print(f"{name:<16} {total:>11,} {util:>11.3f} {top1:>17.3f} {'n/a' if ftop1 is None else f'{ftop1:.3f}':>19}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
