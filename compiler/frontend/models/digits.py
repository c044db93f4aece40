"""A small CNN for scikit-learn's bundled digits, trained in numpy and quantised with onnxruntime.

Network (channels are multiples of 16 so VTA's BLOCK packs them without waste)::

    x (N,1,8,8) -> Conv3x3 1->16 pad 1 -> Relu -> MaxPool 2x2 -> Conv3x3 16->32 pad 1 -> Relu
      -> MaxPool 2x2 (32x2x2) -> Flatten (128) -> Gemm 128->10 (logits; softmax only in the loss)

Training is plain numpy (im2col convolutions, Adam, a fixed seed) and takes a few seconds. The
shipped files next to this script are written by::

    python -m vtasim.compiler.frontend.models.digits --out compiler/frontend/models

``digits_float.onnx`` (float32), ``digits_int8_qdq.onnx`` (QuantizeLinear/DequantizeLinear pairs) and
``digits_int8_qop.onnx`` (QLinearConv and friends), both int8 activations and weights, per-tensor,
calibrated on the training images.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from vtasim.compiler.frontend.models import DIGITS_FLOAT, DIGITS_QDQ, DIGITS_QOP
from vtasim.compiler.frontend.models._onnx import GraphBuilder, op_counts, quantize, run

TEST_FRACTION = 0.2
EPOCHS = 12
BATCH = 32
LR = 3e-3
SHAPES = {"c1": (16, 1, 3, 3), "c2": (32, 16, 3, 3), "fc": (10, 128)}


def load_split(seed: int = 0):
    """``(x_train, y_train, x_test, y_test)``: x as float32 NCHW (N,1,8,8) in [0, 1], y int64.

    A stratified split (sklearn's ``train_test_split`` with ``random_state=seed``): 360 test images
    of the 1797, every class in the same proportion in both parts.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None, :, :]
    y = data.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=TEST_FRACTION, stratify=y, random_state=seed)
    return x_tr, y_tr, x_te, y_te


# --- the network in numpy ----------------------------------------------------------------------

def _im2col(x: np.ndarray) -> np.ndarray:
    """(N,C,H,W) -> (N,H,W,C*9): the 3x3 neighbourhoods of a pad-1 convolution, in (c, kh, kw) order."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=2)  # N,C,9,H,W
    return cols.transpose(0, 3, 4, 1, 2).reshape(n, h, w, c * 9)


def _col2im(dcols: np.ndarray, c: int) -> np.ndarray:
    """The adjoint of ``_im2col``: (N,H,W,C*9) -> (N,C,H,W)."""
    n, h, w, _ = dcols.shape
    d = dcols.reshape(n, h, w, c, 3, 3).transpose(0, 3, 4, 5, 1, 2)  # N,C,3,3,H,W
    dxp = np.zeros((n, c, h + 2, w + 2), dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, i, j]
    return dxp[:, :, 1:-1, 1:-1]


def _conv(x, w, b):
    cols = _im2col(x)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.transpose(0, 3, 1, 2), cols


def _conv_back(dout, cols, w):
    d = dout.transpose(0, 2, 3, 1)                       # N,H,W,F
    wmat = w.reshape(w.shape[0], -1)
    dw = (d.reshape(-1, d.shape[-1]).T @ cols.reshape(-1, cols.shape[-1])).reshape(w.shape)
    return _col2im(d @ wmat, w.shape[1]), dw, d.sum(axis=(0, 1, 2))


def _pool(x):
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], -1)[..., 0], arg


def _pool_back(dout, arg):
    n, c, h2, w2 = dout.shape
    win = np.zeros((n, c, h2, w2, 4), dout.dtype)
    np.put_along_axis(win, arg[..., None], dout[..., None], -1)
    return win.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h2 * 2, w2 * 2)


def forward(p: dict, x: np.ndarray, keep: bool = False):
    """Logits of the float network (and the saved activations for the backward pass if ``keep``)."""
    z1, cols1 = _conv(x, p["c1"], p["c1.b"])
    a1 = np.maximum(z1, 0)
    m1, arg1 = _pool(a1)
    z2, cols2 = _conv(m1, p["c2"], p["c2.b"])
    a2 = np.maximum(z2, 0)
    m2, arg2 = _pool(a2)
    flat = m2.reshape(len(x), -1)
    logits = flat @ p["fc"].T + p["fc.b"]
    return (logits, (cols1, z1, arg1, cols2, z2, arg2, flat, m2.shape)) if keep else logits


def _grads(p: dict, x: np.ndarray, y: np.ndarray):
    logits, (cols1, z1, arg1, cols2, z2, arg2, flat, m2_shape) = forward(p, x, keep=True)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    dlog = prob
    dlog[np.arange(len(y)), y] -= 1
    dlog /= len(y)
    g = {"fc": dlog.T @ flat, "fc.b": dlog.sum(axis=0)}
    dm2 = (dlog @ p["fc"]).reshape(m2_shape)
    dz2 = _pool_back(dm2, arg2) * (z2 > 0)
    dm1, g["c2"], g["c2.b"] = _conv_back(dz2, cols2, p["c2"])
    dz1 = _pool_back(dm1, arg1) * (z1 > 0)
    _, g["c1"], g["c1.b"] = _conv_back(dz1, cols1, p["c1"])
    return g


def train(x: np.ndarray, y: np.ndarray, seed: int = 0, epochs: int = EPOCHS) -> dict:
    """Float32 parameters trained with Adam on softmax cross-entropy (He-initialised, fixed seed)."""
    rng = np.random.default_rng(seed)
    p = {}
    for name, shape in SHAPES.items():
        fan_in = int(np.prod(shape[1:]))
        p[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        p[name + ".b"] = np.zeros(shape[0], np.float32)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), BATCH):
            idx = order[i:i + BATCH]
            step += 1
            for k, gk in _grads(p, x[idx], y[idx]).items():
                m[k] = 0.9 * m[k] + 0.1 * gk
                v[k] = 0.999 * v[k] + 0.001 * gk * gk
                mh, vh = m[k] / (1 - 0.9 ** step), v[k] / (1 - 0.999 ** step)
                p[k] = (p[k] - LR * mh / (np.sqrt(vh) + 1e-8)).astype(np.float32)
    return p


def to_onnx(p: dict):
    """The float ONNX model of the trained parameters (Conv, Relu, MaxPool, Flatten, Gemm)."""
    g = GraphBuilder()
    t = g.conv("image", p["c1"], p["c1.b"], pad=1)
    t = g.op("MaxPool", [g.op("Relu", [t])], kernel_shape=[2, 2], strides=[2, 2])
    t = g.conv(t, p["c2"], p["c2.b"], pad=1)
    t = g.op("MaxPool", [g.op("Relu", [t])], kernel_shape=[2, 2], strides=[2, 2])
    t = g.gemm(g.op("Flatten", [t], axis=1), p["fc"], p["fc.b"])
    return g.model("digits_cnn", "image", (1, 8, 8), t, (10,))


def build(out: Path, seed: int = 0) -> dict:
    """Train, export and quantise; write the three files into ``out``; return ``{name: path}``."""
    import onnx

    x_tr, y_tr, _, _ = load_split(seed)
    model = to_onnx(train(x_tr, y_tr, seed))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"float": out / DIGITS_FLOAT.name, "qdq": out / DIGITS_QDQ.name, "qop": out / DIGITS_QOP.name}
    onnx.save(model, paths["float"])
    for fmt in ("qdq", "qop"):
        quantize(model, paths[fmt], x_tr, fmt)
    return paths


def accuracy(path, x: np.ndarray, y: np.ndarray) -> float:
    """Top-1 of the model at ``path`` under onnxruntime."""
    return float((run(path, x).argmax(axis=1) == y).mean())


def held_out_top1(path, limit: int | None = None) -> float:
    """Top-1 of the model at ``path`` under onnxruntime on the first ``limit`` held-out digits (all 360
    by default): the images ``vtasim onnx --dataset digits`` runs."""
    _, _, x_te, y_te = load_split()
    return accuracy(path, x_te[:limit], y_te[:limit])


def main(argv=None) -> int:
    import onnx

    ap = argparse.ArgumentParser(prog="python -m vtasim.compiler.frontend.models.digits", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for the three .onnx files")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    paths = build(args.out, args.seed)
    _, _, x_te, y_te = load_split(args.seed)
    for path in paths.values():
        print(f"{path}: {path.stat().st_size} bytes, top-1 {accuracy(path, x_te, y_te):.4f} on {len(y_te)} "
              f"held-out digits, ops {op_counts(onnx.load(path))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
