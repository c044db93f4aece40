"""A ResNet-18-shaped network with random weights, as float ONNX (with BatchNormalization) and int8 QDQ.

Shape (ResNet-18 v1)::

    Conv7x7 s2 3->64 + BN + Relu, MaxPool 3x3 s2 pad 1,
    4 stages x 2 BasicBlocks (64, 128, 256, 512 channels; the first block of stages 2-4 has stride 2
    and a 1x1 stride-2 Conv + BN on the shortcut), each block: Conv3x3 + BN + Relu, Conv3x3 + BN,
    Add (shortcut), Relu;
    GlobalAveragePool, Flatten, Gemm 512->classes.

Weights are He-initialised, BN statistics random (seeded). The int8 model is onnxruntime's
``quant_pre_process`` (which folds every BN into its Conv) then ``quantize_static`` (int8
activations and weights, per-tensor) calibrated on a few seeded random images. Nothing is shipped:
the files are generated on demand (``make_resnet18(path)``: 2.4-2.5 s at 224x224 here, by
``python -m vtasim.compiler.frontend.models.resnet18 OUT.onnx``, which prints its time).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.compiler.errors import CompileError
from vtasim.compiler.frontend.models._onnx import GraphBuilder, quantize

STAGES = (64, 128, 256, 512)
CALIBRATION_IMAGES = 4


def he(rng, shape) -> np.ndarray:
    """He-normal weights for a Conv (F,C,kh,kw) or Gemm (F,C) of this shape."""
    return (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)


def conv_bn(g: GraphBuilder, rng, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
    """Conv kxk (no bias, pad k//2) + BatchNormalization with random statistics (+ Relu)."""
    t = g.conv(x, he(rng, (cout, cin, k, k)), None, stride=stride, pad=k // 2)
    t = g.batchnorm(t, scale=rng.uniform(0.5, 1.5, cout), bias=rng.normal(0, 0.1, cout),
                    mean=rng.normal(0, 0.1, cout), var=rng.uniform(0.5, 1.5, cout))
    return g.op("Relu", [t]) if relu else t


def basic_block(g: GraphBuilder, rng, x: str, cin: int, cout: int, stride: int = 1) -> str:
    """The ResNet v1 BasicBlock; a 1x1 Conv + BN shortcut when the stride or the channels change."""
    t = conv_bn(g, rng, x, cin, cout, 3, stride)
    t = conv_bn(g, rng, t, cout, cout, 3, relu=False)
    short = x if stride == 1 and cin == cout else conv_bn(g, rng, x, cin, cout, 1, stride, relu=False)
    return g.op("Relu", [g.op("Add", [t, short])])


def dense_head(g: GraphBuilder, rng, x: str, c: int, classes: int) -> str:
    """GlobalAveragePool, Flatten, Gemm c->classes."""
    t = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    return g.gemm(t, he(rng, (classes, c)), rng.normal(0, 0.01, classes).astype(np.float32))


def make_resnet18_float(seed: int = 0, image: int = 224, classes: int = 1000):
    """The float ``onnx.ModelProto`` (BatchNormalization nodes kept), input ``image`` (N,3,image,image)."""
    if image % 32 or image <= 0:
        raise CompileError("make_resnet18", f"image size {image} must be a positive multiple of 32 "
                           "(five stride-2 steps)")
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    t = conv_bn(g, rng, "image", 3, STAGES[0], 7, stride=2)
    t = g.op("MaxPool", [t], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = STAGES[0]
    for k, c in enumerate(STAGES):
        t = basic_block(g, rng, t, cin, c, stride=1 if k == 0 else 2)
        t = basic_block(g, rng, t, c, c)
        cin = c
    t = dense_head(g, rng, t, cin, classes)
    return g.model("resnet18_shaped", "image", (3, image, image), t, (classes,))


def calibration_images(seed: int, shape: tuple, count: int = CALIBRATION_IMAGES) -> np.ndarray:
    """Seeded standard-normal images (what a normalised photo looks like to the first layer)."""
    return np.random.default_rng(seed + 1).standard_normal((count, *shape)).astype(np.float32)


def make_resnet18(path, seed: int = 0, format: str = "qdq", image: int = 224, classes: int = 1000) -> Path:  # noqa: A002
    """Write the int8 model (``format`` "qdq" or "qop") to ``path``; return the path."""
    model = make_resnet18_float(seed, image, classes)
    return quantize(model, Path(path), calibration_images(seed, (3, image, image)), format, batch=1)


def main(argv=None) -> int:
    import argparse
    import time

    import onnx

    from vtasim.compiler.frontend.models._onnx import op_counts

    ap = argparse.ArgumentParser(prog="python -m vtasim.compiler.frontend.models.resnet18", description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="the .onnx file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=("qdq", "qop"), default="qdq")
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    make_resnet18(args.out, args.seed, args.format, args.image, args.classes)
    print(f"{args.out}: {args.out.stat().st_size} bytes in {time.perf_counter() - t0:.1f} s, "
          f"ops {op_counts(onnx.load(args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
