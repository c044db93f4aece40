"""A 5-layer VGG-style int8 network with random weights, generated on demand (not shipped).

Shape (``image`` = 16 by default)::

    x (N,3,image,image) -> Conv3x3 3->32 + Relu -> Conv3x3 32->32 + Relu -> MaxPool 2x2
      -> Conv3x3 32->64 + Relu -> Conv3x3 64->64 + Relu -> MaxPool 2x2
      -> Flatten (64 * (image/4)^2) -> Gemm -> classes

Weights are He-initialised (seeded), biases small; the int8 model is onnxruntime's ``quant_pre_process``
then ``quantize_static`` (int8 activations and weights, per-tensor), calibrated on seeded random images,
as :mod:`.resnet18` does.  ``python -m vtasim.compiler.frontend.models.vgg OUT.onnx`` writes one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.compiler.errors import CompileError
from vtasim.compiler.frontend.models._onnx import GraphBuilder, quantize
from vtasim.compiler.frontend.models.resnet18 import calibration_images, he

__all__ = ["make_vgg5", "make_vgg5_float", "CHANNELS"]

CHANNELS = (32, 32, 64, 64)          # the four convolutions; a pool after the second and the fourth


def make_vgg5_float(seed: int = 0, image: int = 16, classes: int = 10):
    """The float ``onnx.ModelProto``: four 3x3 convolutions with ReLU, two max pools, one dense layer."""
    if image % 4 or image <= 0:
        raise CompileError("make_vgg5", f"image size {image} must be a positive multiple of 4 (two 2x2 pools)")
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    t, cin = "image", 3
    for k, c in enumerate(CHANNELS):
        t = g.op("Relu", [g.conv(t, he(rng, (c, cin, 3, 3)), rng.normal(0, 0.05, c), pad=1)])
        if k % 2:
            t = g.op("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 2])
        cin = c
    t = g.op("Flatten", [t], axis=1)
    feat = cin * (image // 4) ** 2
    t = g.gemm(t, he(rng, (classes, feat)), rng.normal(0, 0.01, classes).astype(np.float32))
    return g.model("vgg5", "image", (3, image, image), t, (classes,))


def make_vgg5(path, seed: int = 0, format: str = "qdq", image: int = 16, classes: int = 10) -> Path:  # noqa: A002
    """Write the int8 model (``format`` "qdq" or "qop") to ``path``; return the path."""
    model = make_vgg5_float(seed, image, classes)
    return quantize(model, Path(path), calibration_images(seed, (3, image, image)), format, batch=1)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m vtasim.compiler.frontend.models.vgg", description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="the .onnx file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--image", type=int, default=16)
    ap.add_argument("--classes", type=int, default=10)
    args = ap.parse_args(argv)
    make_vgg5(args.out, args.seed, image=args.image, classes=args.classes)
    print(f"{args.out}: {args.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
