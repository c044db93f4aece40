"""A small edge network mixing what VTA runs with what stays on the host, as float ONNX and int8.

Shape (NCHW, ``c`` channels at ``hw`` x ``hw``)::

    Conv3x3 3->c + BN + LeakyRelu(0.1)                        (the first conv: kept on the host)
    Conv3x3 s2 c->2c + BN + Relu                               (VTA)
    depthwise Conv3x3 (group 2c) + BN + Relu                   (VTA when 2c packs into the blocks, else host)
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

from vtasim.compiler.frontend.models._onnx import GraphBuilder, quantize
from vtasim.compiler.frontend.models.resnet18 import CALIBRATION_IMAGES, he

__all__ = ["edge_net_float", "make_edge_net", "mobilenet_v2_float", "yolo_tiny_float", "bert_tiny_float",
           "dcgan_float", "NETWORKS", "make", "calibration"]


def _bn(g: GraphBuilder, rng, x: str, c: int) -> str:
    return g.batchnorm(x, scale=rng.uniform(0.5, 1.5, c), bias=rng.normal(0, 0.1, c), mean=rng.normal(0, 0.1, c),
                       var=rng.uniform(0.5, 1.5, c))


def _conv(g: GraphBuilder, rng, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
    t = g.conv(x, he(rng, (cout, cin // group, k, k)), None, stride=stride, pad=k // 2, group=group)
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


# --- the four edge networks -------------------------------------------------------------------------------

def _relu6(g: GraphBuilder, x: str) -> str:
    lo, hi = g.const(f"{x}.lo", np.array(0, np.float32)), g.const(f"{x}.hi", np.array(6, np.float32))
    return g.op("Clip", [x, lo, hi])


# MobileNetV2 (width 1.0): (expansion t, channels c, repeats n, first stride s)
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))


def mobilenet_v2_float(hw: int = 224, classes: int = 1000, width: float = 1.0, seed: int = 0):
    """MobileNetV2-shaped: Conv3x3 s2 + BN + ReLU6, 17 inverted residual blocks (1x1 expand + ReLU6,
    3x3 depthwise + ReLU6, 1x1 linear projection, a residual add where the shape stays), Conv1x1 to
    1280 + ReLU6, GlobalAveragePool, Gemm."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()

    def ch(c):
        return max(8, int(round(c * width / 8)) * 8)

    cin = ch(32)
    t = _relu6(g, _conv(g, rng, "x", 3, cin, 3, stride=2))
    for exp, c, n, s in MOBILENET_V2:
        cout = ch(c)
        for k in range(n):
            stride = s if k == 0 else 1
            mid = cin * exp
            y = _relu6(g, _conv(g, rng, t, cin, mid, 1)) if exp != 1 else t
            y = _relu6(g, _conv(g, rng, y, mid, mid, 3, stride=stride, group=mid))
            y = _conv(g, rng, y, mid, cout, 1)
            t = g.op("Add", [y, t]) if stride == 1 and cin == cout else y
            cin = cout
    t = _relu6(g, _conv(g, rng, t, cin, 1280, 1))
    t = g.op("Flatten", [g.op("GlobalAveragePool", [t])], axis=1)
    y = g.gemm(t, he(rng, (classes, 1280)), rng.normal(0, 0.01, classes).astype(np.float32))
    return g.model("mobilenet_v2", "x", (3, hw, hw), y, (classes,))


def yolo_tiny_float(hw: int = 416, seed: int = 0, anchors: int = 3, classes: int = 80):
    """A YOLOv3-tiny-shaped backbone and head: Conv3x3 + BN + LeakyReLU(0.1) with MaxPool 2x2 between
    (16 ... 512 channels), then the detection head at 1/32, a 1x1 conv, nearest Resize x2 and a Concat
    with the 1/16 feature map, and the second head; both heads' maps flattened and concatenated."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()

    def cbl(x, cin, cout, k):
        return g.op("LeakyRelu", [_conv(g, rng, x, cin, cout, k)], alpha=0.1)

    t, cin, route = "x", 3, None
    for k, c in enumerate((16, 32, 64, 128, 256)):
        t = cbl(t, cin, c, 3)
        cin = c
        if k == 4:
            route = t                                              # the 1/16 feature map
        t = g.op("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 2])
    t = cbl(t, cin, 512, 3)
    t = cbl(t, 512, 256, 1)
    out = anchors * (5 + classes)
    head1 = g.conv(cbl(t, 256, 512, 3), he(rng, (out, 512, 1, 1)), rng.normal(0, 0.01, out))
    u = cbl(t, 256, 128, 1)
    u = g.op("Resize", [u, g.const("up.roi", np.zeros(0, np.float32)),
                        g.const("up.scales", np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    u = g.op("Concat", [u, route], axis=1)
    head2 = g.conv(cbl(u, 128 + 256, 256, 3), he(rng, (out, 256, 1, 1)), rng.normal(0, 0.01, out))
    flat = [g.op("Flatten", [h], axis=1) for h in (head1, head2)]
    y = g.op("Concat", flat, axis=1)
    cells = (hw // 32) ** 2 + (hw // 16) ** 2
    return g.model("yolo_tiny", "x", (3, hw, hw), y, (out * cells,))


def bert_tiny_float(seq: int = 16, hidden: int = 128, heads: int = 2, layers: int = 2, vocab: int = 512,
                    classes: int = 4, seed: int = 0):
    """A BERT-tiny-shaped encoder on token ids (N, seq): token + position embeddings (Gather, Add),
    LayerNormalization, ``layers`` x [Q/K/V MatMuls, heads split by Reshape/Transpose, scaled Q K^T,
    Softmax, the product with V, the output MatMul, residual Add + LayerNormalization, FFN MatMul to
    4*hidden, Gelu (as Erf), MatMul back, residual Add + LayerNormalization], the first token's
    state (Gather), a Gemm classifier."""
    from onnx import TensorProto
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    d = hidden // heads

    def c(name, v):
        from onnx import numpy_helper
        g.inits.append(numpy_helper.from_array(np.asarray(v), name))     # 0-d stays 0-d (a scalar index)
        return name

    def lin(x, cin, cout):
        w = (rng.standard_normal((cin, cout)) * np.sqrt(1.0 / cin)).astype(np.float32)
        k = g.counts.get("MatMul", 0)
        y = g.op("MatMul", [x, c(f"mm{k}.w", w)])
        return g.op("Add", [y, c(f"mm{k}.b", rng.normal(0, 0.02, cout).astype(np.float32))])

    def norm(x):
        k = g.counts.get("LayerNormalization", 0)
        return g.op("LayerNormalization", [x, c(f"ln{k}.s", rng.uniform(0.8, 1.2, hidden).astype(np.float32)),
                                           c(f"ln{k}.b", rng.normal(0, 0.05, hidden).astype(np.float32))],
                    axis=-1, epsilon=1e-5)

    emb = c("tok.emb", rng.normal(0, 1.0, (vocab, hidden)).astype(np.float32))
    pos = c("pos.emb", rng.normal(0, 0.5, (1, seq, hidden)).astype(np.float32))
    t = norm(g.op("Add", [g.op("Gather", [emb, "x"], axis=0), pos]))
    split = c("heads.shape", np.array([0, seq, heads, d], np.int64))      # 0: the batch dimension as it is
    merge = c("merge.shape", np.array([0, seq, hidden], np.int64))
    scale = c("attn.scale", np.array(1 / np.sqrt(d), np.float32))
    for _ in range(layers):
        q, k, v = (g.op("Transpose", [g.op("Reshape", [lin(t, hidden, hidden), split])], perm=[0, 2, 1, 3])
                   for _ in range(3))
        att = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])],
                   axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [att, v])], perm=[0, 2, 1, 3]), merge])
        t = norm(g.op("Add", [lin(ctx, hidden, hidden), t]))
        h = lin(t, hidden, 4 * hidden)
        h = g.op("Mul", [g.op("Mul", [h, c(f"gelu{_}.half", np.array(0.5, np.float32))]),
                         g.op("Add", [g.op("Erf", [g.op("Div", [h, c(f"gelu{_}.s2", np.array(np.sqrt(2), np.float32))])]),
                                      c(f"gelu{_}.one", np.array(1, np.float32))])])
        t = norm(g.op("Add", [lin(h, 4 * hidden, hidden), t]))
    first = g.op("Gather", [t, c("cls.idx", np.array(0, np.int64))], axis=1)
    y = g.gemm(first, he(rng, (classes, hidden)), rng.normal(0, 0.01, classes).astype(np.float32))
    return g.model("bert_tiny", "x", (seq,), y, (classes,), in_type=TensorProto.INT64)


def dcgan_float(z: int = 32, base: int = 64, seed: int = 0):
    """A DCGAN-style generator: z (N, z, 1, 1) -> ConvTranspose 4x4 s1 to 4x4, then three ConvTranspose
    4x4 s2 pad 1 (8x8, 16x16, 32x32) with ReLU between, Tanh; the image flattened (N, 3*32*32)."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    chans = (z, 4 * base, 2 * base, base, 3)
    t = "x"
    for k in range(4):
        w = he(rng, (chans[k + 1], chans[k], 4, 4)).transpose(1, 0, 2, 3) * 0.7
        t = g.conv(t, np.ascontiguousarray(w), rng.normal(0, 0.05, chans[k + 1]), stride=1 if k == 0 else 2,
                   pad=0 if k == 0 else 1, op="ConvTranspose")
        t = g.op("Relu", [t]) if k < 3 else g.op("Tanh", [t])
    y = g.op("Flatten", [t], axis=1)
    return g.model("dcgan", "x", (z, 1, 1), y, (3 * 32 * 32,))


def calibration(model, n: int = CALIBRATION_IMAGES, seed: int = 1) -> np.ndarray:
    """Seeded calibration inputs of the model's input shape: images in [0, 1), token ids, or N(0, 1) codes."""
    from onnx import TensorProto
    vi = model.graph.input[0]
    shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim[1:])
    r = np.random.default_rng(seed)
    if vi.type.tensor_type.elem_type == TensorProto.INT64:
        vocab = next(i.dims[0] for i in model.graph.initializer if i.name.startswith("tok.emb") and len(i.dims) == 2)
        return r.integers(0, vocab, (n, *shape)).astype(np.int64)
    if model.graph.name == "dcgan":
        return r.standard_normal((n, *shape)).astype(np.float32)
    return r.random((n, *shape)).astype(np.float32)


NETWORKS = {"mobilenet_v2": mobilenet_v2_float, "yolo_tiny": yolo_tiny_float, "bert_tiny": bert_tiny_float,
            "dcgan": dcgan_float, "edge_net": edge_net_float}


def make(name: str, path, fmt: str = "qdq", seed: int = 0, **size) -> Path:
    """Write the int8 model of ``NETWORKS[name](**size)`` to ``path``, quantised by onnxruntime."""
    m = NETWORKS[name](seed=seed, **size)
    return quantize(m, Path(path), calibration(m, seed=seed + 1), fmt, batch=1, symbolic_shapes=False)
