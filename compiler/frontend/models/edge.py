"""A small edge network mixing what VTA runs with what stays on the host, as float ONNX and int8.

Shape (NCHW, ``c`` channels at ``hw`` x ``hw``)::

    Conv3x3 3->c + BN + LeakyRelu(0.1)                        (the first conv: kept on the host)
    Conv3x3 s2 c->2c + BN + Relu                               (VTA)
    depthwise Conv3x3 (group 2c) + BN + Relu                   (host: grouped convs have no VTA lowering)
    Conv1x1 2c->2c + BN + LeakyRelu(0.1)                       (VTA; LeakyReLU a table on the host)
    Resize nearest x2, Concat with the first conv's output     (host, YOLO's route/upsample)
    Conv1x1 3c->c + BN + Relu                                  (VTA)
    GlobalAveragePool, Flatten, Gemm c->classes                (VTA dense head)

Weights are He-initialised and the BN statistics random (seeded); quantised like the other models
(``quant_pre_process`` then ``quantize_static``, int8 per tensor) on seeded random images.  Nothing
is shipped: ``make_edge_net(path)`` writes the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from compiler.frontend.models._onnx import GraphBuilder, quantize
from compiler.frontend.models.resnet18 import CALIBRATION_IMAGES, he

__all__ = ["edge_net_float", "make_edge_net"]


def _bn(g: GraphBuilder, rng, x: str, c: int) -> str:
    return g.batchnorm(x, scale=rng.uniform(0.5, 1.5, c), bias=rng.normal(0, 0.1, c), mean=rng.normal(0, 0.1, c),
                       var=rng.uniform(0.5, 1.5, c))


def _conv(g: GraphBuilder, rng, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
    w = he(rng, (cout, cin // group, k, k))
    name = f"conv{g._count.get('Conv', 0)}"
    ins = [x, g.const(f"{name}.w", w)]
    t = g.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
    return _bn(g, rng, t, cout)


def edge_net_float(c: int = 16, hw: int = 16, classes: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    a = g.op("LeakyRelu", [_conv(g, rng, "x", 3, c, 3)], alpha=0.1)
    t = g.op("Relu", [_conv(g, rng, a, c, 2 * c, 3, stride=2)])
    t = g.op("Relu", [_conv(g, rng, t, 2 * c, 2 * c, 3, group=2 * c)])
    t = g.op("LeakyRelu", [_conv(g, rng, t, 2 * c, 2 * c, 1)], alpha=0.1)
    scales = g.const("up.scales", np.array([1, 1, 2, 2], np.float32))
    roi = g.const("up.roi", np.zeros(0, np.float32))
    t = g.op("Resize", [t, roi, scales], mode="nearest")
    t = g.op("Concat", [t, a], axis=1)
    t = g.op("Relu", [_conv(g, rng, t, 3 * c, c, 1)])
    t = g.op("Flatten", [g.op("GlobalAveragePool", [t])], axis=1)
    y = g.gemm(t, he(rng, (classes, c)), rng.normal(0, 0.01, classes).astype(np.float32))
    return g.model("edge_net", "x", (3, hw, hw), y, (classes,))


def make_edge_net(path, c: int = 16, hw: int = 16, classes: int = 10, seed: int = 0, fmt: str = "qdq") -> Path:
    """Write the int8 edge network (``fmt`` "qdq" or "qop") to ``path``."""
    calib = np.random.default_rng(seed + 1).random((CALIBRATION_IMAGES, 3, hw, hw)).astype(np.float32)
    return quantize(edge_net_float(c, hw, classes, seed), Path(path), calib, fmt, batch=1,
                    symbolic_shapes=False)
