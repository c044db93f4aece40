"""``vtasim infer NET``: run a compiled network (``vtasim onnx MODEL --compile-only --out NET``) on
inputs or a data set without compiling anything; only the regions' input segments change per input.

::

    vtasim onnx compiler/frontend/models/digits_int8_qdq.onnx --compile-only --out runs/digits
    vtasim infer runs/digits --input x.npy --engine cycle --outputs y.npy
    vtasim infer runs/digits --dataset digits --workers 2 --results runs/digits.jsonl
    vtasim infer runs/net --dataset data.npz --layout nhwc --scale 0.00392 --mean 0.485,0.456,0.406 \\
        --std 0.229,0.224,0.225 --scheduler tcp://HOST:8786
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["add_commands"]


def _summary(agg: dict, engine: str) -> list[str]:
    lines = []
    if "cycles_total" in agg:
        lines.append(f"cycles per input: mean {agg['cycles_mean']:,.1f} (min {agg['cycles_min']:,}, max "
                     f"{agg['cycles_max']:,}); total {agg['cycles_total']:,} over {agg['inputs']} input(s)")
    if "rel_err" in agg:
        lines.append(f"vs onnxruntime int8 (CPU): max abs error {agg['max_abs']:.3g}, relative error "
                     f"{agg['rel_err']:.2e}, top-1 agreement {agg['top1_agreement']:.3f}, top-5 agreement "
                     f"{agg['top5_agreement']:.3f}")
    if "top1_accuracy" in agg:
        lines.append(f"accuracy on {agg['labelled']} labelled inputs: top-1 {agg['top1_accuracy']:.4f}, top-5 "
                     f"{agg['top5_accuracy']:.4f} (VTA, {engine})")
    return lines


def cmd_infer(args) -> int:
    from vtasim.compiler.frontend.dataset import Preprocess, load_dataset, parse_floats
    from vtasim.compiler.frontend.errors import FrontendError
    from vtasim.compiler.frontend.evaluate import aggregate, loaded, network_id, run_inputs
    from vtasim.compiler.frontend.report import layer_table
    from vtasim.compiler.frontend.run_options import check_limit
    from vtasim.sim.scale.cluster import wants_cluster
    t0 = time.perf_counter()
    check_limit(args.limit)
    if args.engine == "rtl":
        from vtasim.sim.rtl import require as require_rtl
        require_rtl("verilator", "vtasim infer --engine rtl")
    pre = Preprocess(args.layout, args.scale, parse_floats(args.mean, "--mean"), parse_floats(args.std, "--std"))
    pre.check()
    if args.dataset is None and not pre.identity:
        raise FrontendError("--layout/--scale/--mean/--std preprocess a --dataset (rule: give --dataset with them)")
    if args.outputs is not None:
        from vtasim.hw.outfiles import check_out
        if args.results is not None or wants_cluster(args):
            raise FrontendError("--outputs collects the outputs of one process's run (rule: not with --results, "
                                "--workers or --scheduler)")
        check_out(args.outputs, "--outputs file")
    reference = not args.no_reference
    net, ort, doc = loaded(args.network, reference)
    if args.config is not None:
        from vtasim.hw.config import load_config
        if load_config(args.config) != net.cfg:
            raise FrontendError(f"{args.network}: compiled for another config than --config {args.config} "
                                f"(rule: run a network on the config it was compiled for)")
    print(f"network {args.network}: {len(net.graph.nodes)} ops, {net.region_count} VTA region(s), config "
          f"{net.cfg.batch}x{net.cfg.block_in}x{net.cfg.block_out}; loaded in {time.perf_counter() - t0:.2f} s")
    if args.dataset is not None:
        xs, labels, source = load_dataset(net.graph, args.dataset, pre)
    else:
        import numpy as np
        from vtasim.compiler.frontend.inputs import load_feeds
        feeds, labels, source = load_feeds(net.graph, args.input, None, args.seed)
        if len(net.graph.inputs) != 1:
            raise FrontendError(f"vtasim infer feeds one input; the model has {len(net.graph.inputs)}")
        xs = np.stack([f[net.input_name] for f in feeds])
    if args.limit is not None:
        xs = xs[:args.limit]
        labels = labels[:args.limit] if labels is not None else None
    print(f"engine {args.engine}; {len(xs)} input(s) from {source}"
          + ("" if ort is not None or not reference else "; no model copy, no onnxruntime reference"))
    header = {"network": network_id(doc), "engine": args.engine, "data": source, "preprocess": pre.as_dict(),
              "inputs": len(xs), "reference": ort is not None}
    if wants_cluster(args):
        from vtasim.sim.scale.cluster import check_workers, require_cluster
        require_cluster("vtasim infer on Dask")
        if not (args.scheduler or args.scheduler_file):
            check_workers(args.workers, args.force_workers)
    first: list = []
    outputs: dict = {}
    done = run_inputs(args.network, xs, labels, args.engine, header, reference=ort is not None,
                      results=args.results, cluster_args=args if wants_cluster(args) else None, first_layers=first,
                      outputs=outputs)
    if first and len(xs) <= 4:
        print()
        print(layer_table(first))
    for line in _summary(aggregate(list(done.values())), args.engine):
        print(line)
    if args.outputs is not None:
        import numpy as np
        from vtasim.hw.outfiles import open_out
        ys = np.stack([outputs[i] for i in range(len(xs))])
        with open_out(args.outputs, "wb", "--outputs file") as f:
            np.save(f, ys, allow_pickle=False)
        print(f"outputs: {args.outputs} ({ys.shape} {ys.dtype})")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0


def add_commands(sub) -> None:
    from vtasim.compiler.frontend.dataset import LAYOUTS
    from vtasim.compiler.frontend.run_options import add_input_source, add_run_options
    from vtasim.sim.scale.cluster import add_cluster_options
    p = sub.add_parser("infer", help="run a compiled network (vtasim onnx --compile-only) on inputs or a data set, "
                                     "optionally on Dask workers")
    p.add_argument("network", type=Path, help="the compiled network directory (vtasim onnx MODEL --compile-only --out NET)")
    add_input_source(p, "a .npy array: one input or a stack of them", metavar="digits|FILE.npz",
                     help="the bundled digits test split, or an .npz with x (samples) and optional y (labels)")
    add_run_options(p)
    p.add_argument("--layout", choices=LAYOUTS, default="nchw", help="--dataset samples' layout (nhwc: transposed)")
    p.add_argument("--scale", type=float, default=1.0, help="--dataset preprocessing: x * scale")
    p.add_argument("--mean", default="0", help="--dataset preprocessing: minus mean (one value or one per channel)")
    p.add_argument("--std", default="1", help="--dataset preprocessing: divided by std (one value or per channel)")
    p.add_argument("--results", type=Path, default=None, metavar="FILE.jsonl",
                   help="append one record per input; a rerun computes only the inputs the file lacks")
    p.add_argument("--outputs", type=Path, default=None, metavar="FILE.npy", help="write the stacked outputs")
    p.add_argument("--no-reference", action="store_true", help="skip the onnxruntime comparison")
    add_cluster_options(p, default_workers=None)
    p.set_defaults(func=cmd_infer)
