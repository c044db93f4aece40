"""``vtasim onnx MODEL.onnx``: run a quantised network - VTA regions on an engine, the rest in numpy -
print the per-layer table and the comparison with onnxruntime, optionally write a report and the
regions' memory images.

::

    vtasim onnx compiler/frontend/models/digits_int8_qdq.onnx --dataset digits --limit 100
    vtasim onnx model.onnx --input x.npy --engine cycle --report runs/net --save-images runs/net/images
    vtasim onnx model.onnx --engine rtl --limit 2        # every VTA region on the RTL
    vtasim onnx model.onnx --compile-only --out runs/net # compile once; run with vtasim infer runs/net

A second run of the same model, config and options loads the compiled network from the cache
(:mod:`vtasim.compiler.frontend.netcache`) instead of compiling it again.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["add_commands"]



class _Progress:
    """One line on stderr, rewritten in place on a terminal, every ~10 % otherwise."""

    def __init__(self, total: int, what: str):
        self.total, self.what, self.tty, self.last = total, what, sys.stderr.isatty(), -1
        self.t0 = time.perf_counter()

    def __call__(self, k: int, detail: str = "") -> None:
        if self.total <= 0:
            return
        step = max(1, self.total // 10)
        if not self.tty and k != self.total and k // step == self.last:
            return
        self.last = k // step
        el = time.perf_counter() - self.t0
        msg = f"{self.what} {k}/{self.total} ({el:.1f} s) {detail}"
        if self.tty:
            sys.stderr.write("\r" + msg[:100].ljust(100) + ("\n" if k == self.total else ""))
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()


def cmd_onnx(args) -> int:
    from vtasim.sim.install import require
    require(("onnx", "onnxruntime") + (("sklearn",) if args.dataset == "digits" else ()),
            "vtasim onnx" + (f" --dataset {args.dataset}" if args.dataset else ""))
    if args.engine == "rtl":
        from vtasim.sim.rtl import require as require_rtl
        require_rtl("verilator", "vtasim onnx --engine rtl")
    from vtasim.compiler.frontend.compare import OrtReference, agreement, fused_level_note, output_lsb
    from vtasim.compiler.frontend.report import check_report_dir, network_summary, write_report
    from vtasim.compiler.frontend.run_options import check_limit
    from vtasim.hw.config import load_config
    from vtasim.compiler.frontend.errors import FrontendError
    check_limit(args.limit)
    cfg = load_config(args.config)
    t0 = time.perf_counter()
    if args.report is not None:
        check_report_dir(args.report)           # output rules before any work (vtasim.hw.outfiles)
    options = dict(mode=args.partition, skip_first_conv=not args.all_convs, threshold=args.threshold,
                   requant=args.requant, strict=args.strict, region_mode=args.regions,
                   combine_parallel=args.combine_parallel, fast_math=args.fast_math)
    if args.compile_only:
        return _compile_only(args, cfg, options, t0)
    if args.out is not None:
        raise FrontendError("--out is the directory of --compile-only (rule: give --compile-only with it)")
    from vtasim.compiler.frontend.netcache import compiled_network
    # --save-images wants the images' expected outputs, which only a freshly compiled network has
    net, where = compiled_network(args.model, cfg, options, cache_dir=args.cache_dir,
                                  use_cache=not args.no_cache and args.save_images is None)
    print(f"network: {where} ({time.perf_counter() - t0:.2f} s)")
    from vtasim.compiler.frontend.inputs import load_feeds
    xs, labels, source = load_feeds(net.graph, args.input, args.dataset, args.seed)
    if args.limit is not None:
        xs = xs[:args.limit]
        labels = labels[:args.limit] if labels is not None else None
    print(f"model {args.model}: {len(net.graph.nodes)} ops after the passes, "
          f"{net.region_count} VTA region(s) ({args.regions}-op); config {cfg.batch}x{cfg.block_in}x{cfg.block_out}; "
          f"engine {args.engine}; {len(xs)} input(s) from {source}")
    for note in net.notes:
        print(f"  {note}")
    ort = OrtReference(args.model, args.ort_level)
    note = fused_level_note(args.ort_level)
    if note:
        print(note)
    if args.save_images is not None:
        from vtasim.compiler.frontend.execute import image_dirs
        from vtasim.hw.outfiles import sub_dir
        for name in image_dirs(net.graph, net.regions):
            sub_dir(args.save_images, name, "--save-images directory")
    ours, refs, first = [], [], None
    prog = _Progress(len(xs), "inputs")
    for k, x in enumerate(xs):
        layer_prog = _Progress(len(net.graph.nodes), "  layers") if len(xs) == 1 and sys.stderr.isatty() else None
        y, records = net.run(x, engine=args.engine,
                             on_node=(lambda i, t, n, lp=layer_prog: lp(i, n.name if n else "")) if layer_prog else None,
                             save_images=args.save_images if k == 0 else None)
        ours.append(y)
        refs.append(ort.run(x))
        first = first or records
        prog(k + 1)
    sim_s = time.perf_counter() - t0
    ours, refs = np.concatenate(ours), np.concatenate(refs)
    print()
    print(network_summary(first, sim_s))
    m = agreement(ours, refs, output_lsb(net.graph))
    lsb = f"{m['max_lsb']:g} output LSB" if m["max_lsb"] is not None else f"{m['max_abs']:.3g} (float output)"
    line = f"vs onnxruntime int8 (CPU): max abs error {lsb}, relative error {m['rel_err']:.2e}"
    if "top1" in m:
        line += f", top-1 agreement {m['top1']:.3f}"
    if "top5" in m:
        line += f", top-5 agreement {m['top5']:.3f}"
    print(line)
    if labels is not None:
        acc_ours = float(np.mean(ours.argmax(1) == labels))
        acc_ort = float(np.mean(refs.argmax(1) == labels))
        line = (f"top-1 accuracy on {len(labels)} labelled inputs: VTA ({args.engine}) {acc_ours:.4f}, "
                f"onnxruntime int8 {acc_ort:.4f}")
        if args.dataset == "digits":          # the float model the int8 files were quantised from
            from vtasim.compiler.frontend.models import DIGITS_FLOAT
            from vtasim.compiler.frontend.models.digits import held_out_top1
            line += f", float32 {DIGITS_FLOAT.name} (onnxruntime) {held_out_top1(DIGITS_FLOAT, len(labels)):.4f}"
        print(line)
    if args.report is not None:
        from vtasim.sim.install import missing_note
        paths = write_report(first, args.report, cfg, title=Path(args.model).stem)
        note = missing_note(["matplotlib"], "the report's PNG plots")
        print(f"report: {', '.join(str(p) for p in paths)}" + (f"; no PNG plots ({note})" if note else ""))
    if args.save_images is not None:
        print(f"memory images of the VTA regions (first input): {args.save_images} "
              f"(replay: vtasim run DIR --engine cycle --check; vtasim diff DIR)")
    return 0


def _compile_only(args, cfg, options, t0) -> int:
    """``--compile-only --out NET``: import, partition, compile every region and save the network."""
    from vtasim.compiler.frontend.errors import FrontendError
    from vtasim.compiler.frontend.netcache import compile_key, compile_network
    from vtasim.compiler.frontend.onnx_import import MAX_MODEL_BYTES
    from vtasim.compiler.frontend.errors import ModelFileError
    from vtasim.hw.files import read_regular
    from vtasim.hw.outfiles import out_dir
    if args.out is None:
        raise FrontendError("--compile-only needs --out NET (rule: the directory the compiled network goes to)")
    given = [o for o, v in (("--input", args.input), ("--dataset", args.dataset), ("--report", args.report),
                            ("--save-images", args.save_images), ("--limit", args.limit)) if v is not None]
    if given:
        raise FrontendError(f"--compile-only runs no input: {', '.join(given)} belong to a run "
                            f"(rule: vtasim infer NET takes them)")
    out_dir(args.out, "--out network directory")
    data = read_regular(args.model, "ONNX model", MAX_MODEL_BYTES, error=ModelFileError)
    _, meta = compile_key(data, cfg, options)
    net = compile_network(args.model, data, cfg, options, meta, args.out)
    print(f"model {args.model}: {len(net.graph.nodes)} ops after the passes, {net.region_count} VTA region(s) "
          f"compiled in {time.perf_counter() - t0:.1f} s -> {args.out} (run: vtasim infer {args.out} --input X.npy)")
    return 0


def add_commands(sub) -> None:
    from vtasim.compiler.frontend.compare import ORT_LEVELS
    from vtasim.compiler.frontend.inputs import DATASETS
    from vtasim.compiler.frontend.run_options import add_input_source, add_run_options
    from vtasim.compiler.frontend.partition import PARTITION_MODES, REGION_MODES
    p = sub.add_parser("onnx", help="run an int8 ONNX model: VTA regions on an engine, the rest on the host; "
                                    "compare with onnxruntime")
    p.add_argument("model", type=Path, help="ONNX model (QDQ or QOperator int8)")
    add_input_source(p, "a .npy array: one input or a stack of them; NAME=FILE.npy feeds the model input NAME "
                        "(repeat for each input of a multi-input model)",
                     choices=DATASETS, help="a bundled data set (labels give accuracy)")
    add_run_options(p)
    p.add_argument("--partition", choices=PARTITION_MODES, default="pattern",
                   help="pattern: every convertible layer; cost: only where VTA beats the host estimate")
    p.add_argument("--regions", choices=REGION_MODES, default="multi",
                   help="multi: convolutions and residual adds in multi-op regions, activations kept in DRAM; "
                        "single: one region per convolution, adds on the host")
    p.add_argument("--threshold", type=float, default=1.0, help="cost partitioning: offload when host/VTA time >= this")
    p.add_argument("--requant", choices=("auto", "shift", "fixed"), default="auto",
                   help="requantisation on VTA: power-of-two shift or fixed-point multiply")
    p.add_argument("--all-convs", action="store_true", help="offload the first convolution too")
    p.add_argument("--strict", action="store_true",
                   help="fail (one error listing each) if any conv/dense layer cannot run on VTA")
    p.add_argument("--ort-level", choices=tuple(ORT_LEVELS), default="basic",
                   help="the onnxruntime reference: basic = each node per the ONNX spec (exact int8 "
                        "semantics); all = onnxruntime's fused integer kernels as deployed")
    p.add_argument("--fast-math", action="store_true",
                   help="approximate the host's float Exp/Tanh/Erf/Softmax (FastMath; bounds in docs/quantisation.md)")
    p.add_argument("--combine-parallel", action="store_true",
                   help="combine sibling conv/dense layers over one input into one VTA region where the cycle "
                        "engine counts fewer cycles (CombineParallelConv2D/Dense; outputs bit-identical)")
    p.add_argument("--report", type=Path, default=None, help="write layers.csv and PNG plots here")
    p.add_argument("--save-images", type=Path, default=None, help="write each VTA region's memory image here "
                   "(compiles afresh: the images carry expected outputs)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile the network and save it to --out NET (run it with vtasim infer NET)")
    p.add_argument("--out", type=Path, default=None, help="the compiled network's directory (--compile-only)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="compiled-network cache (default $VTASIM_NETWORK_CACHE, else $XDG_CACHE_HOME/vtasim/networks "
                        "or ~/.cache/vtasim/networks)")
    p.add_argument("--no-cache", action="store_true", help="compile afresh and store nothing")
    p.set_defaults(func=cmd_onnx)
    from vtasim.compiler.frontend.quantize_cli import add_quantize
    add_quantize(sub)
