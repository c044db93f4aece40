"""Data sets for ``vtasim infer --dataset``: the bundled ``digits`` test split, or a user's ``.npz``.

A user's archive holds ``x`` (N samples, any numeric type) and optionally ``y`` (N integer labels; top-1
and top-5 accuracy are reported when given); other arrays are ignored.  It is read through the bounded
reader (:func:`vtasim.hw.files.load_npz`: a regular file of at most :data:`MAX_DATASET_BYTES`, no pickle).

Preprocessing, in this order, each optional:

* ``layout="nhwc"``: 4-d samples stored channels-last are transposed to NCHW;
* ``x = (x * scale - mean) / std`` in float32, ``mean`` and ``std`` one number or one per channel
  (``--mean 0.485,0.456,0.406``);
* the result is cast to the model input's type and each sample must have the input's shape without its
  batch dimension (or with a batch of 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.inputs import DATASETS

__all__ = ["Preprocess", "load_dataset", "parse_floats", "DATASETS", "MAX_DATASET_BYTES", "LAYOUTS"]

LAYOUTS = ("nchw", "nhwc")
MAX_DATASET_BYTES = 4 << 30


def parse_floats(text: str, option: str) -> tuple:
    """``"0.5"`` or ``"0.485,0.456,0.406"`` -> a tuple of finite floats."""
    try:
        vals = tuple(float(v) for v in str(text).split(","))
    except ValueError:
        raise FrontendError(f"{option} {text!r}: not a number or comma-separated numbers") from None
    if not vals or not all(np.isfinite(vals)):
        raise FrontendError(f"{option} {text!r}: numbers must be finite")
    return vals


@dataclass(frozen=True)
class Preprocess:
    layout: str = "nchw"
    scale: float = 1.0
    mean: tuple = (0.0,)
    std: tuple = (1.0,)

    def check(self) -> "Preprocess":
        if self.layout not in LAYOUTS:
            raise FrontendError(f"--layout {self.layout!r} is not one of {', '.join(LAYOUTS)}")
        if not np.isfinite(self.scale) or any(s == 0 for s in self.std):
            raise FrontendError(f"--scale {self.scale} / --std {self.std}: finite, std non-zero (rule: x * scale "
                                f"- mean is divided by std)")
        return self

    @property
    def identity(self) -> bool:
        return self.layout == "nchw" and self.scale == 1.0 and self.mean == (0.0,) and self.std == (1.0,)

    def as_dict(self) -> dict:
        return {"layout": self.layout, "scale": self.scale, "mean": list(self.mean), "std": list(self.std)}

    def _per_channel(self, v: tuple, x: np.ndarray, option: str) -> np.ndarray:
        if len(v) == 1:
            return np.float32(v[0])
        if x.ndim < 2 or x.shape[1] != len(v):
            raise FrontendError(f"{option}: {len(v)} values for samples of shape {x.shape[1:]} (rule: one value, or "
                                f"one per channel, axis 1 of NCHW)")
        return np.asarray(v, np.float32).reshape((1, len(v)) + (1,) * (x.ndim - 2))

    def apply(self, x: np.ndarray) -> np.ndarray:
        if self.layout == "nhwc":
            if x.ndim != 4:
                raise FrontendError(f"--layout nhwc: samples of shape {x.shape[1:]} (rule: 4-d N,H,W,C data)")
            x = x.transpose(0, 3, 1, 2)
        if self.identity:
            return x
        x = x.astype(np.float32) * np.float32(self.scale)
        return (x - self._per_channel(self.mean, x, "--mean")) / self._per_channel(self.std, x, "--std")


def _user_npz(path: Path):
    from vtasim.hw.files import load_npz
    arrays = load_npz(path, "--dataset archive", MAX_DATASET_BYTES, limit="MAX_DATASET_BYTES", error=FrontendError)
    if "x" not in arrays:
        raise FrontendError(f"--dataset {path}: no array x (rule: an .npz with x and optionally y; holds "
                            f"{', '.join(sorted(arrays)) or 'nothing'})")
    x, y = arrays["x"], arrays.get("y")
    if x.ndim < 1 or len(x) == 0:
        raise FrontendError(f"--dataset {path}: x has shape {x.shape} (rule: N >= 1 samples along axis 0)")
    if y is not None:
        if y.dtype.kind not in "iu" or y.shape != (len(x),):
            raise FrontendError(f"--dataset {path}: y is {y.dtype} {y.shape} (rule: {len(x)} integer labels)")
        y = y.astype(np.int64)
    return x, y


def load_dataset(graph, name: str, pre: Preprocess = Preprocess()):
    """``(x stack (N,) + input shape, labels or None, description)`` for the one-input ``graph``."""
    from vtasim.compiler.frontend.inputs import as_stack
    pre.check()
    names = list(graph.inputs)
    if len(names) != 1:
        raise FrontendError(f"--dataset feeds one input; the model has {len(names)} ({', '.join(names)})")
    shape, dtype = graph.inputs[names[0]]
    if name == "digits":
        from vtasim.compiler.frontend.models.digits import load_split
        _, _, x, y = load_split()
        what = "digits test split"
    elif name.endswith(".npz"):
        x, y = _user_npz(Path(name))
        what = name
    else:
        raise FrontendError(f"--dataset {name!r}: not one of {', '.join(DATASETS)} nor an .npz file")
    x = pre.apply(x)
    xs = as_stack(x, shape, f"--dataset {name}")
    return (xs.astype(dtype) if dtype is not None else xs), y, what
