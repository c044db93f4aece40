"""Wall time of a ResNet-18-shaped int8 network simulated cycle-accurately, next to onnxruntime on the CPU.

::

    python bench/network.py                    # 224x224, cycle engine, default config
    python bench/network.py --image 64 --engine functional
    python bench/network.py --regions both     # multi-op regions next to one region per layer

Prints, from one run: the per-layer cycle table and network total (compared with the published
ResNet-18 figure of tvm-vta #30: 7,729,601 cycles per inference on the pipelined Chisel design), the
time to import/compile, the time of one simulated inference (VTA regions on the engine + host ops
in numpy) and of onnxruntime's inference of the same model, and their ratio (the issue aims at < 10x).

``--regions both`` also runs the network with one region per convolution and the adds on the host
(``single``) and prints, side by side, the total VTA cycles and the activation bytes moved between the
host and VTA per inference of both partitionings (the outputs of both must be equal: the VTA add is
the host's add, bit for bit).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PUBLISHED_RESNET18 = 7_729_601   # tvm-vta #30, pipelined TensorGemm, tsim, per inference (unverified division)


def main(argv=None) -> int:
    from vtasim.compiler.frontend.compare import OrtReference, agreement, output_lsb
    from vtasim.compiler.frontend.models.resnet18 import make_resnet18
    from vtasim.compiler.frontend.network import Network
    from vtasim.compiler.frontend.report import layer_table, totals
    from vtasim.hw.config import load_config

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--engine", default="cycle", choices=("cycle", "functional"))
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats of both sides (median)")
    ap.add_argument("--model", type=Path, default=None, help="an existing int8 model instead of generating one")
    ap.add_argument("--regions", choices=("multi", "single", "both"), default="multi",
                    help="multi-op regions, one region per convolution, or both side by side")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    tmp = tempfile.TemporaryDirectory()
    t0 = time.perf_counter()
    path = args.model or make_resnet18(Path(tmp.name) / f"resnet18_{args.image}.onnx", image=args.image)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    net = Network.from_onnx(path, cfg, region_mode="single" if args.regions == "single" else "multi")
    t_import = time.perf_counter() - t0
    shape, _ = net.graph.inputs[net.input_name]
    x = np.random.default_rng(0).random(shape, np.float32)
    t0 = time.perf_counter()
    net.run(x, engine=args.engine)                       # compiles every region, JIT warm-up
    t_first = time.perf_counter() - t0
    sims = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        y, records = net.run(x, engine=args.engine)
        sims.append((time.perf_counter() - t0, sum(r.wall_s for r in records if r.target == "vta"),
                     sum(r.wall_s for r in records if r.target == "host")))
    t_sim, vta_s, host_s = sorted(sims)[len(sims) // 2]
    ort = OrtReference(path)
    ort.run(x)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        y_ort = ort.run(x)
        times.append(time.perf_counter() - t0)
    t_ort = float(np.median(times))
    print(layer_table(records))
    t = totals(records)
    print(f"\nResNet-18-shaped int8 network, {args.image}x{args.image}, config {cfg.batch}x{cfg.block_in}x"
          f"{cfg.block_out}, engine {args.engine}")
    print(f"  VTA layers {t['vta_layers']}, total {t['cycles']:,} cycles (published ResNet-18, tvm-vta #30: "
          f"{PUBLISHED_RESNET18:,}; ratio {t['cycles'] / PUBLISHED_RESNET18:.2f})")
    print(f"  model generation {t_gen:.1f} s, import+passes {t_import:.2f} s, first run (compile + JIT) {t_first:.1f} s")
    print(f"  one simulated inference {t_sim:.2f} s, median of {args.repeat} (VTA regions {vta_s:.2f} s, host ops "
          f"{host_s:.2f} s); "
          f"onnxruntime {t_ort * 1e3:.1f} ms (median of {args.repeat}, 1 thread)")
    print(f"  simulated / onnxruntime = {t_sim / t_ort:.1f}x (aim < 10x); "
          f"VTA regions alone / onnxruntime = {vta_s / t_ort:.1f}x")
    m = agreement(y, y_ort, output_lsb(net.graph))
    print(f"  vs onnxruntime: max error {m['max_lsb']} output LSB, relative error {m['rel_err']:.2e}, "
          f"top-1 agree {m.get('top1')}, top-5 agree {m.get('top5')}")
    if args.regions == "both":
        _side_by_side(net, records, path, cfg, x, y, args.engine)
    tmp.cleanup()
    return 0


def _side_by_side(net, records, path, cfg, x, y, engine):
    """The multi-op run (``net``, ``records``) next to the single-op partitioning of the same model."""
    from vtasim.compiler.frontend.network import Network
    from vtasim.compiler.frontend.report import edge_bytes, totals
    single = Network.from_onnx(path, cfg, region_mode="single")
    y_s, rec_s = single.run(x, engine=engine)
    t_m, t_s = totals(records), totals(rec_s)
    e_m, e_s = edge_bytes(net.regions), edge_bytes(single.regions)
    adds = [r for r in records if r.op == "qadd" and r.target == "vta"]
    own = [r for r in adds if r.cycles]                   # a fused add's row has 0 cycles (its conv has them)
    add_cyc = sum(r.cycles for r in own)
    print("\nregions            launches  VTA ops        cycles  vs published   host->VTA B   VTA->host B")
    for name, t, e in (("single (per layer)", t_s, e_s), ("multi-op", t_m, e_m)):
        print(f"{name:<18} {e['regions']:>9} {t['vta_layers']:>8} {t['cycles']:>13,} {t['cycles'] / PUBLISHED_RESNET18:>12.2f}"
              f" {e['in']:>13,} {e['out']:>13,}")
    print(f"  multi-op / single: cycles {t_m['cycles'] / t_s['cycles']:.3f} ({len(adds)} residual adds on VTA: "
          f"{len(adds) - len(own)} fused into their convolution, {len(own)} kernels of their own taking "
          f"{add_cyc:,} cycles), host<->VTA bytes {(e_m['in'] + e_m['out']) / (e_s['in'] + e_s['out']):.3f}")
    print(f"  outputs equal: {bool(np.array_equal(y, y_s))}")


if __name__ == "__main__":
    sys.exit(main())
