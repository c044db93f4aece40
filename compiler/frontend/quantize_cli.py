"""``vtasim quantize MODEL_fp32.onnx --out MODEL_int8.onnx``: TVM's quantiser for a float model.

::

    vtasim quantize compiler/frontend/models/digits_float.onnx --out runs/digits_pow2.onnx --dataset digits
    vtasim quantize model.onnx --out m8.onnx --calibrate kl --weight-scale max --calib calib/ --skip-conv-layers 0

It prints the float model's and the int8 model's top-1 (onnxruntime) on the held-out split of a
``--dataset``, VTA's top-1 on the same split, and, where every VTA requantisation is a shift, how
many of the regions' outputs differ from onnxruntime's layer by layer and how many of those are
rounding ties.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["add_quantize"]

MAX_CALIB_FILES = 10_000


def _calib_dir(path: Path, graph_inputs) -> list:
    from vtasim.compiler.frontend.inputs import as_stack, read_npy
    if not path.is_dir() or path.is_symlink():
        raise FrontendError(f"--calib {path}: not a directory of .npy files")
    files = sorted(p for p in path.iterdir() if p.suffix == ".npy")
    if not files:
        raise FrontendError(f"--calib {path}: no .npy files in it")
    if len(files) > MAX_CALIB_FILES:
        raise FrontendError(f"--calib {path}: {len(files)} files; at most {MAX_CALIB_FILES} are read")
    (shape, dtype), = graph_inputs.values()
    out = []
    for f in files:
        out += list(as_stack(read_npy(f), shape, f"--calib {f}").astype(dtype))
    return out


def cmd_quantize(args) -> int:
    import onnx

    from vtasim.compiler.frontend.onnx_import import MAX_MODEL_BYTES, load_onnx
    from vtasim.compiler.frontend.quantizer import QuantizeOptions, quantize_model
    from vtasim.hw.files import read_regular
    t0 = time.perf_counter()
    data = read_regular(args.model, "ONNX model", MAX_MODEL_BYTES, error=FrontendError)
    graph = load_onnx(args.model)                       # the checks of every model vtasim reads
    model = onnx.load_from_string(data)
    if len(graph.inputs) != 1:
        raise FrontendError(f"{args.model}: quantize takes a model with one input (it has {len(graph.inputs)})")
    in_name = next(iter(graph.inputs))
    if args.calib_limit < 1 or (args.limit is not None and args.limit < 1):
        raise FrontendError("--calib-limit and --limit must be at least 1")
    calib, test = None, None
    if args.dataset == "digits":
        from vtasim.compiler.frontend.models.digits import load_split
        xtr, _, xte, yte = load_split()
        calib = [x[None].astype(np.float32) for x in xtr[:args.calib_limit]]
        test = (xte, yte)
    elif args.calib is not None:
        calib = [x[None] for x in _calib_dir(args.calib, graph.inputs)][:args.calib_limit]
    opts = QuantizeOptions(args.calibrate, args.global_scale, args.weight_scale, tuple(args.skip_conv_layers))
    q, scales = quantize_model(model, opts, calib)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.checker.check_model(q)
    out.write_bytes(q.SerializeToString())
    for note in opts.notes:
        print(note)
    print(f"wrote {out} ({out.stat().st_size:,} bytes) in {time.perf_counter() - t0:.1f} s; activation scales "
          f"{min(scales.values()):.4g} .. {max(scales.values()):.4g}")
    if test is not None:
        _report(args, out, test, in_name)
    return 0


def _report(args, out: Path, test, in_name: str) -> None:
    from vtasim.compiler.frontend.compare import OrtReference
    from vtasim.compiler.frontend.network import Network
    from vtasim.compiler.frontend.quantizer import layerwise_ties
    from vtasim.hw.config import load_config
    xte, yte = test
    n = len(xte) if args.limit is None else args.limit
    xte, yte = xte[:n], yte[:n]
    f32 = OrtReference(args.model)
    i8 = OrtReference(out)
    top = {k: float(np.mean(np.array([r.run(x[None]).argmax() for x in xte]) == yte))
           for k, r in (("float32", f32), ("int8", i8))}
    cfg = load_config(args.config)
    # one region per layer: the layer-by-layer requantisation check below reads each layer's plan
    net = Network.from_onnx(out, cfg, skip_first_conv=False, region_mode="single")
    ours = np.array([net.run(x[None], engine=args.engine)[0].argmax() for x in xte])
    print(f"top-1 on {n} held-out digits: float32 {top['float32']:.4f}, int8 (onnxruntime) {top['int8']:.4f}, "
          f"int8 on VTA ({args.engine}) {float(np.mean(ours == yte)):.4f}")
    paths = [r.requant_plan(r.node.attrs["x_dtype"])[1].path for r in net.regions.values()]
    t = layerwise_ties(out, net, [{in_name: x[None]} for x in xte[:min(n, 60)]])
    kind = "every one a shift" if paths and all(p == "shift" for p in paths) else \
        f"{paths.count('shift')} shift, {paths.count('fixed')} fixed-point"
    print(f"requantisation: {len(paths)} VTA region(s), {kind}; layer by layer against onnxruntime on "
          f"{min(n, 60)} inputs: {t['differ']:,} of {t['outputs']:,} outputs differ, {t['off_tie']:,} of them "
          f"off a rounding tie ({t['ties']:,} ties)")


def add_quantize(sub) -> None:
    from vtasim.compiler.frontend.calibrate import CALIBRATIONS
    from vtasim.compiler.frontend.execute import ENGINES
    from vtasim.compiler.frontend.inputs import DATASETS
    from vtasim.compiler.frontend.quantizer import WEIGHT_SCALES
    p = sub.add_parser("quantize", help="quantise a float ONNX model as TVM's relay.quantize does (a QDQ model out)",
                       description="Quantise a float ONNX model with TVM's qconfig recipe (symmetric int8, "
                                   "global/minmax/kl/percentile calibration, max or power2 weight scales) into a "
                                   "QDQ model that onnxruntime and vtasim onnx run.")
    p.add_argument("model", type=Path, help="float ONNX model (one input)")
    p.add_argument("--out", type=Path, required=True, help="where to write the int8 QDQ model")
    p.add_argument("--calibrate", choices=CALIBRATIONS, default="global",
                   help="activation scales: TVM's global_scale, max |x|, KL divergence, or the 99.99th percentile")
    p.add_argument("--global-scale", type=float, default=8.0, help="the range of every activation with --calibrate "
                                                                   "global (TVM's global_scale)")
    p.add_argument("--weight-scale", choices=WEIGHT_SCALES, default="power2",
                   help="max |w| / 127, or TVM's power2 (with global: every requantisation a shift)")
    p.add_argument("--skip-conv-layers", type=int, nargs="*", default=[0], metavar="K",
                   help="convolutions (counted from 0) left in float (TVM's skip_conv_layers; default [0])")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", choices=DATASETS, default=None,
                     help="calibrate on its training split; report top-1 on its held-out split")
    src.add_argument("--calib", type=Path, default=None, help="a directory of .npy calibration inputs")
    p.add_argument("--calib-limit", type=int, default=256, help="at most this many calibration inputs")
    p.add_argument("--limit", type=int, default=None, help="only the first N held-out inputs in the report")
    p.add_argument("--engine", choices=ENGINES, default="reference",
                   help="where the report runs the VTA regions (reference = their numpy execution)")
    p.add_argument("--config", type=Path, default=None, help="VTA config for the report (default: the shipped one)")
    p.set_defaults(func=cmd_quantize)
