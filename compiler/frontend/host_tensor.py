"""Host (numpy) rules of the ONNX tensor and float ops that edge models use around their quantised
layers: data movement (Transpose, Split, Slice, Pad, Squeeze/Unsqueeze, Gather, Resize) and float
maths (LeakyRelu, PRelu, Div, LayerNormalization, Gelu, Erf).

Each rule is ``fn(node, *inputs) -> array or tuple of arrays`` with ONNX's semantics (opset 13-21;
the attribute forms of older opsets where they differ).  :mod:`vtasim.compiler.frontend.host_ops` registers
them in its op table; ``tests/frontend/test_host_tensor.py`` checks each against onnxruntime.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["TENSOR_OPS", "RESIZE_MODES", "RESIZE_COORDS"]

RESIZE_MODES = ("nearest", "linear")
RESIZE_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _ints(v) -> list[int]:
    return [int(e) for e in np.asarray(v).reshape(-1)]


def _axes(node, args, k: int, ndim: int, what="axes") -> list[int] | None:
    """Axes from input ``k`` (opset >= 13) or the attribute (older), normalised to 0..ndim-1."""
    raw = args[k] if len(args) > k and args[k] is not None else node.attrs.get(what)
    if raw is None:
        return None
    out = []
    for a in _ints(raw):
        if not -ndim <= a < ndim:
            raise FrontendError(f"{node.where}: axis {a} is outside the {ndim}-d input")
        out.append(a % ndim)
    return out


def _transpose(node, x):
    perm = node.attrs.get("perm")
    return np.ascontiguousarray(np.transpose(x, perm if perm is None else [int(p) for p in perm]))


def _squeeze(node, x, *rest):
    axes = _axes(node, (x,) + rest, 1, x.ndim)
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    for a in axes:
        if x.shape[a] != 1:
            raise FrontendError(f"{node.where}: Squeeze of axis {a} of size {x.shape[a]} (must be 1)")
    return x.reshape([d for k, d in enumerate(x.shape) if k not in axes])


def _unsqueeze(node, x, *rest):
    raw = rest[0] if rest and rest[0] is not None else node.attrs.get("axes")
    if raw is None:
        raise FrontendError(f"{node.where}: Unsqueeze without axes")
    nd = x.ndim + len(_ints(raw))
    axes = sorted(a % nd for a in _ints(raw))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(shape)


def _split(node, x, *rest):
    axis = int(node.attrs.get("axis", 0)) % x.ndim
    sizes = rest[0] if rest and rest[0] is not None else node.attrs.get("split")
    n_out = len(node.outputs)
    if sizes is None:
        n = int(node.attrs.get("num_outputs", n_out))
        step = -(-x.shape[axis] // n)                 # the last piece may be smaller (opset 18)
        sizes = [min(step, x.shape[axis] - k * step) for k in range(n)]
    sizes = _ints(sizes)
    if sum(sizes) != x.shape[axis] or len(sizes) != n_out or min(sizes) < 0:
        raise FrontendError(f"{node.where}: split {sizes} does not cut axis {axis} of size {x.shape[axis]} "
                            f"into {n_out} output(s)")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _slice(node, x, starts, ends, axes=None, steps=None):
    starts, ends = _ints(starts), _ints(ends)
    axes = list(range(len(starts))) if axes is None else [a % x.ndim for a in _ints(axes)]
    steps = [1] * len(starts) if steps is None else _ints(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise FrontendError(f"{node.where}: starts/ends/axes/steps of different lengths")
    if 0 in steps:
        raise FrontendError(f"{node.where}: a Slice step of 0")
    idx = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        idx[a] = slice(s, e, st)         # Python's slice clamps exactly as ONNX does, negative steps included
    return np.ascontiguousarray(x[tuple(idx)])


def _pad(node, x, pads=None, value=None, axes=None):
    mode = node.attrs.get("mode", "constant")
    pads = _ints(pads if pads is not None else node.attrs.get("pads", []))
    axs = list(range(x.ndim)) if axes is None else [a % x.ndim for a in _ints(axes)]
    if len(pads) != 2 * len(axs):
        raise FrontendError(f"{node.where}: {len(pads)} pads for {len(axs)} axes")
    width = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for k, a in enumerate(axs):
        lo, hi = pads[k], pads[k + len(axs)]
        width[a] = (max(lo, 0), max(hi, 0))       # negative pads remove elements
        crop[a] = slice(-min(lo, 0), x.shape[a] + min(hi, 0) if hi < 0 else None)
    x = x[tuple(crop)]
    if mode == "constant":
        v = np.asarray(value).reshape(-1)[0] if value is not None and np.size(value) else node.attrs.get("value", 0)
        return np.pad(x, width, mode="constant", constant_values=v)
    if mode in ("reflect", "edge"):
        return np.pad(x, width, mode=mode)
    raise FrontendError(f"{node.where}: Pad mode {mode!r} (constant, reflect or edge)")


def _gather(node, x, idx):
    axis = int(node.attrs.get("axis", 0)) % x.ndim
    idx = np.asarray(idx, np.int64)
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise FrontendError(f"{node.where}: Gather index outside [-{n}, {n - 1}] on axis {axis}")
    return np.take(x, np.where(idx < 0, idx + n, idx), axis=axis)


def _div(node, a, b):
    if np.result_type(a, b).kind in "iu":           # integer division truncates toward zero
        q = np.trunc(np.true_divide(a, b))
        return q.astype(np.result_type(a, b))
    return (a / b).astype(np.result_type(a, b))


def _layer_norm(node, x, scale, bias=None):
    axis = int(node.attrs.get("axis", -1)) % x.ndim
    eps = float(node.attrs.get("epsilon", 1e-5))
    axes = tuple(range(axis, x.ndim))
    xf = x.astype(np.float32)
    mean = xf.mean(axis=axes, keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (xf - mean) / np.sqrt(var + eps) * scale
    return (y + bias if bias is not None else y).astype(x.dtype)


def _gelu(node, x):
    xf = x.astype(np.float64)
    if node.attrs.get("approximate", "none") == "tanh":
        y = 0.5 * xf * (1 + np.tanh(np.sqrt(2 / np.pi) * (xf + 0.044715 * xf ** 3)))
    else:
        y = 0.5 * xf * (1 + special.erf(xf / np.sqrt(2)))
    return y.astype(x.dtype)


def _leaky_relu(node, x):
    alpha = np.float32(node.attrs.get("alpha", 0.01))
    return np.where(x >= 0, x, x * alpha).astype(x.dtype)


def _prelu(node, x, slope):
    return np.where(x >= 0, x, x * slope).astype(x.dtype)


# --- Resize -------------------------------------------------------------------------------------------

def _source_coords(node, out_n: int, in_n: int, scale: float) -> np.ndarray:
    mode = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    o = np.arange(out_n, dtype=np.float64)
    if mode == "asymmetric":
        return o / scale
    if mode == "align_corners":
        return o * (in_n - 1) / (out_n - 1) if out_n > 1 else np.zeros(out_n)
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_n > 1 else np.zeros(out_n)
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    raise FrontendError(f"{node.where}: Resize coordinate_transformation_mode {mode!r} is not one of "
                        f"{', '.join(RESIZE_COORDS)}")


def _nearest_index(node, c: np.ndarray, in_n: int) -> np.ndarray:
    rule = node.attrs.get("nearest_mode", "round_prefer_floor")
    if rule == "floor":
        i = np.floor(c)
    elif rule == "ceil":
        i = np.ceil(c)
    elif rule == "round_prefer_ceil":
        i = np.floor(c + 0.5)
    elif rule == "round_prefer_floor":
        i = np.ceil(c - 0.5)
    else:
        raise FrontendError(f"{node.where}: Resize nearest_mode {rule!r} is not one of {', '.join(_NEAREST)}")
    return np.clip(i, 0, in_n - 1).astype(np.int64)


def _resize_axis(node, x: np.ndarray, axis: int, out_n: int, scale: float) -> np.ndarray:
    in_n = x.shape[axis]
    c = _source_coords(node, out_n, in_n, scale)
    if node.attrs.get("mode", "nearest") == "nearest":
        return np.take(x, _nearest_index(node, c, in_n), axis=axis)
    c = np.clip(c, 0, in_n - 1)
    lo = np.floor(c).astype(np.int64)
    hi = np.minimum(lo + 1, in_n - 1)
    w = (c - lo).astype(np.float32)
    sh = [1] * x.ndim
    sh[axis] = out_n
    w = w.reshape(sh)
    a, b = np.take(x, lo, axis=axis).astype(np.float32), np.take(x, hi, axis=axis).astype(np.float32)
    return a * (1 - w) + b * w


def _resize(node, x, roi=None, scales=None, sizes=None):
    mode = node.attrs.get("mode", "nearest")
    if mode not in RESIZE_MODES:
        raise FrontendError(f"{node.where}: Resize mode {mode!r} is not one of {', '.join(RESIZE_MODES)}")
    if node.attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        raise FrontendError(f"{node.where}: Resize with tf_crop_and_resize is not supported")
    if sizes is not None and np.size(sizes):
        out = _ints(sizes)
        if len(out) != x.ndim:
            raise FrontendError(f"{node.where}: Resize sizes {out} for a {x.ndim}-d input")
        fac = [o / i for o, i in zip(out, x.shape)]
    elif scales is not None and np.size(scales):
        fac = [float(s) for s in np.asarray(scales).reshape(-1)]
        if len(fac) != x.ndim or min(fac) <= 0:
            raise FrontendError(f"{node.where}: Resize scales {fac} for a {x.ndim}-d input (positive, one per axis)")
        out = [int(np.floor(i * s)) for i, s in zip(x.shape, fac)]
    else:
        raise FrontendError(f"{node.where}: Resize needs scales or sizes")
    y = x
    for axis in range(x.ndim):
        if out[axis] != x.shape[axis] or fac[axis] != 1.0:
            y = _resize_axis(node, y, axis, out[axis], fac[axis])
    return y.astype(x.dtype) if x.dtype.kind == "f" else np.rint(y).astype(x.dtype)


TENSOR_OPS = {
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Split": _split,
    "Slice": _slice,
    "Pad": _pad,
    "Gather": _gather,
    "Div": _div,
    "LayerNormalization": _layer_norm,
    "Gelu": _gelu,
    "Erf": lambda n, x: special.erf(x).astype(x.dtype),
    "LeakyRelu": _leaky_relu,
    "PRelu": _prelu,
    "Resize": _resize,
}
