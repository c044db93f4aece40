"""``vtasim torch MODEL``: a PyTorch model quantised in eager mode or with FX, on VTA - VTA regions on an
engine, the rest in numpy - judged against PyTorch's own quantised CPU run (fbgemm / qnnpack).

::

    vtasim torch resnet18 --quantize fx --limit 32            # bundled: torchvision's quantizable model,
    vtasim torch mobilenet_v2 --quantize eager --image 64     #   conditioned on a synthetic task, quantised here
    vtasim torch mypkg.net:quantised --input-shape 1,3,224,224 --input x.npy    # your code builds it
    vtasim torch resnet18 --quantize fx --state-dict sd.pt    # weights from torch.save(model.state_dict())

No whole pickled module is loaded (that runs code from the file): the architecture comes from code, the
weights from a state dict read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

__all__ = ["add_commands"]


def _shape(text: str) -> tuple:
    from vtasim.compiler.frontend.errors import FrontendError
    try:
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise FrontendError(f"--input-shape {text!r}: comma-separated integers expected, e.g. 1,3,224,224") from None
    if len(shape) < 2 or any(d < 1 for d in shape):
        raise FrontendError(f"--input-shape {text!r}: at least two dimensions, each at least 1")
    return shape


def _model(args):
    """(quantised module, input shape, description)."""
    from vtasim.compiler.frontend.errors import FrontendError
    from vtasim.compiler.frontend.models.torchvision_quant import TORCH_MODELS, build
    from vtasim.compiler.frontend.torch_import import apply_state_dict, load_factory, load_state_dict
    if args.model in TORCH_MODELS:
        if args.input_shape is not None:
            raise FrontendError(f"--input-shape is for a model given as module:function; the bundled {args.model} "
                                f"takes --image")
        module, shape = build(args.model, args.quantize, args.image, args.classes, args.seed, args.calibration,
                              args.qengine, args.train_steps)
        trained = (f"trained {args.train_steps} SGD steps on a synthetic {args.classes}-class task, batch-norm "
                   f"statistics recomputed, classifier refitted" if args.train_steps
                   else "untrained, batch-norm statistics recomputed")
        what = (f"torchvision {args.model} ({args.classes} classes; {trained}), quantised {args.quantize} for "
                f"{args.qengine} on {args.calibration} task inputs")
    elif ":" in args.model:
        if args.input_shape is None:
            raise FrontendError(f"model {args.model}: give --input-shape N,C,H,W (a module declares no shape)")
        module, shape, what = load_factory(args.model), _shape(args.input_shape), args.model
    else:
        raise FrontendError(f"model {args.model!r}: a bundled model ({', '.join(TORCH_MODELS)}) or "
                            f"package.module:function returning the quantised module (saved whole modules are "
                            f"not loaded: a pickle runs code; save a state dict and give --state-dict)")
    if args.state_dict is not None:
        apply_state_dict(module, load_state_dict(args.state_dict), str(args.state_dict))
        what += f", weights from {args.state_dict}"
    elif args.model in TORCH_MODELS:
        what += f", random initialisation seed {args.seed}"
    return module, shape, what


def _line(what: str, m: dict) -> str:
    lsb = f"{m['max_lsb']:g} output LSB" if m["max_lsb"] is not None else f"{m['max_abs']:.3g} (float output)"
    line = f"{what}: max abs error {lsb}, relative error {m['rel_err']:.2e}"
    for k in ("top1", "top5"):
        if k in m:
            line += f", top-{k[3]} agreement {m[k]:.3f}"
    return line


def cmd_torch(args) -> int:
    from vtasim.sim.install import require
    from vtasim.compiler.frontend.models.torchvision_quant import TORCH_MODELS
    require(("torch",) + (("torchvision",) if args.model in TORCH_MODELS else ()), "vtasim torch")
    if args.engine == "rtl":
        from vtasim.sim.rtl import require as require_rtl
        require_rtl("verilator", "vtasim torch --engine rtl")
    from vtasim.compiler.frontend.compare import agreement, output_lsb
    from vtasim.compiler.frontend.errors import FrontendError
    from vtasim.compiler.frontend.inputs import load_feeds
    from vtasim.compiler.frontend.network import Network
    from vtasim.compiler.frontend.report import check_report_dir, network_summary, write_report
    from vtasim.compiler.frontend.run_options import check_limit
    from vtasim.compiler.frontend.torch_reference import TorchReference, input_scale, layer_lsb, noisy_runs
    from vtasim.hw.config import load_config
    check_limit(args.limit)
    for opt in ("image", "classes", "calibration"):
        if getattr(args, opt) < 1:
            raise FrontendError(f"--{opt} {getattr(args, opt)} must be at least 1")
    if args.train_steps < 0:
        raise FrontendError(f"--train-steps {args.train_steps} must be at least 0")
    cfg = load_config(args.config)
    if args.report is not None:
        check_report_dir(args.report)
    t0 = time.perf_counter()
    module, shape, what = _model(args)
    net = Network.from_torch(module, shape, cfg, source=str(args.model), mode=args.partition,
                             skip_first_conv=not args.all_convs, requant=args.requant, strict=args.strict)
    labels = None
    if args.input:
        feeds, _, source = load_feeds(net.graph, args.input)
        xs = [f[net.input_name] for f in feeds]
    elif args.model in TORCH_MODELS:
        from vtasim.compiler.frontend.models.torchvision_quant import task_inputs
        x, labels = task_inputs(args.limit or 8, args.image, (args.seed, 5), args.classes, args.seed)
        xs, source = list(x[:, None]), f"the synthetic task (seed {args.seed})"
    else:
        n = args.limit or 8
        xs = list(np.random.default_rng(args.seed + 2).standard_normal((n,) + shape).astype(np.float32))
        source = f"standard-normal random inputs (seed {args.seed})"
    xs = xs[:args.limit] if args.limit is not None else xs
    print(f"model {what}: {len(net.graph.nodes)} ops after the passes, {net.region_count} VTA region(s); "
          f"config {cfg.batch}x{cfg.block_in}x{cfg.block_out}; engine {args.engine}; {len(xs)} input(s) from {source}")
    for note in net.notes:
        print(f"  {note}")
    ref = TorchReference(module, args.qengine)
    ours, refs, first = [], [], None
    for x in xs:
        y, records = net.run(x, engine=args.engine)
        ours.append(y)
        refs.append(ref.run(x))
        first = first or records
    wall = time.perf_counter() - t0
    ours, refs = np.concatenate(ours), np.concatenate(refs)
    print()
    print(network_summary(first, wall))
    steps = layer_lsb(net, module, xs[0], engine=args.engine)
    worst = max(steps.items(), key=lambda kv: kv[1]) if steps else ("-", 0)
    print(f"each op fed PyTorch's own input integers (first input): worst step {worst[1]} LSB ({worst[0]}) over "
          f"{len(steps)} op(s)")
    lsb = output_lsb(net.graph)
    print(_line(f"vs PyTorch int8 ({args.qengine}, CPU)", agreement(ours, refs, lsb)))
    floor = agreement(noisy_runs(ref, xs, input_scale(net.graph), seed=args.seed), refs, lsb)
    print(_line("noise floor: PyTorch vs itself with input noise of 1% of an input LSB", floor))
    if labels is not None and ours.ndim == 2:
        print(f"the task's classes: top-1 accuracy {np.mean(ours.argmax(1) == labels[:len(ours)]):.3f} on VTA, "
              f"{np.mean(refs.argmax(1) == labels[:len(refs)]):.3f} on PyTorch")
    if args.report is not None:
        from vtasim.sim.install import missing_note
        paths = write_report(first, args.report, cfg, title=args.model.replace(":", "_").rsplit(".", 1)[-1])
        note = missing_note(["matplotlib"], "the report's PNG plots")
        print(f"report: {', '.join(str(p) for p in paths)}" + (f"; no PNG plots ({note})" if note else ""))
    return 0


def add_commands(sub) -> None:
    from vtasim.compiler.frontend.models.torchvision_quant import QUANT_MODES, TORCH_MODELS, TRAIN_STEPS
    from vtasim.compiler.frontend.partition import PARTITION_MODES
    from vtasim.compiler.frontend.torch_reference import ENGINES as QENGINES
    from vtasim.compiler.frontend.run_options import add_run_options
    p = sub.add_parser("torch", help="run a PyTorch model quantised in eager mode or with FX: VTA regions on an "
                                     "engine, the rest on the host; compare with PyTorch's quantised CPU run")
    p.add_argument("model", help=f"a bundled model ({', '.join(TORCH_MODELS)}: torchvision's quantizable version, "
                                 f"conditioned on a synthetic task from its random initialisation, quantised here) or package.module:function returning your "
                                 f"quantised module")
    p.add_argument("--state-dict", type=Path, default=None, metavar="FILE.pt",
                   help="weights: torch.save(quantised_model.state_dict()), read with weights_only=True (no code runs)")
    p.add_argument("--input-shape", default=None, metavar="N,C,H,W", help="the input shape (module:function models)")
    p.add_argument("--quantize", choices=QUANT_MODES, default="eager", help="bundled models: how to quantise")
    p.add_argument("--image", type=int, default=32, help="bundled models: input height and width")
    p.add_argument("--classes", type=int, default=10, help="bundled models: classifier outputs")
    p.add_argument("--calibration", type=int, default=32, help="bundled models: calibration inputs (of the synthetic task)")
    p.add_argument("--train-steps", type=int, default=TRAIN_STEPS,
                   help="bundled models: SGD steps on the synthetic task that condition the random network "
                        "(0: untrained, chaotic; docs/pytorch.md)")
    p.add_argument("--qengine", choices=QENGINES, default="fbgemm",
                   help="PyTorch's quantised CPU engine (the reference; bundled models are quantised for it)")
    p.add_argument("--input", action="append", default=None, metavar="FILE.npy",
                   help="a .npy array: one input or a stack of them (default: --limit inputs of the bundled model's synthetic task, or random ones)")
    add_run_options(p, limit_help="only the first N inputs (generated inputs: N, default 8)",
                    seed_help="seed of the weights, the synthetic task, calibration and generated inputs")
    p.add_argument("--partition", choices=PARTITION_MODES, default="pattern",
                   help="pattern: every convertible layer; cost: only where VTA beats the host estimate")
    p.add_argument("--requant", choices=("auto", "shift", "fixed"), default="auto",
                   help="requantisation on VTA: power-of-two shift or fixed-point multiply")
    p.add_argument("--all-convs", action="store_true", help="offload the first convolution too")
    p.add_argument("--strict", action="store_true",
                   help="fail (one error listing each) if any conv/dense layer cannot run on VTA")
    p.add_argument("--report", type=Path, default=None, help="write layers.csv and PNG plots here")
    p.set_defaults(func=cmd_torch)
