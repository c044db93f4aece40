"""One VTA region: a composite ``qconv``/``qdense`` node compiled for the accelerator.

The region maps the node's quantisation onto VTA's signed 8-bit data path: a uint8 tensor with zero
point z is the int8 tensor ``q - 128`` with zero point ``z - 128`` (exact), so uint8 inputs and
outputs are shifted on the host at the region's edge.  Weights must be symmetric (zero point 0);
the requantisation runs on VTA's ALU as planned by :func:`compiler.qnn.plan_requant`.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.composite import out_limits
from compiler.frontend.errors import FrontendError

__all__ = ["VtaRegion", "region_problem", "acc_bound"]


def region_problem(node) -> str | None:
    """Why ``node`` cannot run on VTA (None when it can, before the requantisation check)."""
    a = node.attrs
    if node.op == "qconv_transpose":
        return "transposed convolutions have no VTA lowering in the front end yet"
    if node.op not in ("qconv", "qdense"):
        return f"{node.op} has no VTA lowering"
    if a["weight"].dtype != np.int8:
        return f"weights are {a['weight'].dtype.name} (VTA needs int8)"
    if np.any(np.asarray(a["w_zp"]) != 0):
        return "weight zero point is not 0 (VTA needs symmetric weights)"
    if node.op == "qconv":
        o, i, kh, kw = a["weight"].shape
        dil = a.get("dilations", (1, 1))
        if dil[0] != dil[1]:
            return f"dilations={dil} cannot be packed (equal dilations needed)"
        if kh != kw:
            return f"kernel {kh}x{kw} cannot be packed (conv2d_packed takes square kernels)"
        if a["strides"][0] != a["strides"][1]:
            return f"strides {a['strides']} cannot be packed (equal strides needed)"
    return None


def acc_bound(weight: np.ndarray, bias, za: int) -> int:
    """Largest |accumulator| the layer can produce: sum |w| * max |x - za| + |bias| per channel."""
    o = weight.shape[0]
    wsum = np.abs(weight.astype(np.int64)).reshape(o, -1).sum(axis=1)
    dx = max(abs(-128 - za), abs(127 - za))
    b = np.abs(np.asarray(bias, np.int64)) if bias is not None else 0
    return int(np.max(wsum * dx + b))


class VtaRegion:
    """Compiles lazily on the first input (its shape and type fix the program) and caches it."""

    def __init__(self, node, cfg, knobs=None, path: str = "auto"):
        why = region_problem(node)
        if why:
            raise FrontendError(f"{node.where}: cannot run on VTA: {why}")
        self.node, self.cfg, self.knobs, self.path = node, cfg, knobs, path
        self.layer, self.key, self.plan = None, None, None

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def layer_name(self) -> str:
        """The compiled layer's name: the node's, letters, digits and ``_`` only (a file name too)."""
        return "".join(c if c.isalnum() else "_" for c in self.node.name)[:40] or "region"

    def _shift(self, dtype) -> int:
        return 128 if np.dtype(dtype) == np.uint8 else 0

    def _plan(self, x_dtype):
        from compiler.qnn import plan_requant
        a = self.node.attrs
        za = int(a["x_zp"]) - self._shift(x_dtype)
        if a.get("requant_plan") is not None and np.dtype(x_dtype) == a["x_dtype"]:
            return za, a["requant_plan"]      # parallel layers combined: their plans, merged per channel
        ys = self._shift(a["y_dtype"])
        lo, hi = out_limits(a)
        mult = np.asarray(a["x_scale"], np.float64) * np.asarray(a["w_scale"], np.float64) / a["y_scale"]
        mult = mult if mult.ndim and mult.size > 1 else float(mult)
        plan = plan_requant(mult, acc_bound(a["weight"], a["bias"], za), int(a["y_zp"]) - ys, lo - ys, hi - ys,
                            self.cfg, path=self.path)
        return za, plan

    def check(self, x_dtype=np.int8):
        """Raise the requantisation error (if any) without compiling."""
        return self._plan(x_dtype)

    def compile(self, x_shape, x_dtype):
        from compiler.ops.quantized import build_qconv, build_qdense
        key = (tuple(x_shape), np.dtype(x_dtype).str)
        if self.key == key:
            return self.layer
        a = self.node.attrs
        za, plan = self._plan(x_dtype)
        name = self.layer_name
        if self.node.op == "qconv":
            self.layer = build_qconv(self.cfg, tuple(x_shape), a["weight"], a["bias"], a["strides"], a["pads"], za,
                                     plan, knobs=self.knobs, name=name, groups=int(a.get("group", 1)),
                                     dilations=tuple(a.get("dilations", (1, 1))))
        else:
            self.layer = build_qdense(self.cfg, tuple(x_shape), a["weight"], a["bias"], za, plan,
                                      knobs=self.knobs, name=name)
        self.key, self.plan = key, plan
        return self.layer

    def _to_int8(self, x):
        if x.dtype == np.uint8:
            return (x.astype(np.int16) - 128).astype(np.int8)
        if x.dtype != np.int8:
            raise FrontendError(f"{self.node.where}: VTA region input is {x.dtype.name} (int8/uint8 expected)")
        return x

    def _from_int8(self, y):
        if self.node.attrs["y_dtype"] == np.uint8:
            return (y.astype(np.int16) + 128).astype(np.uint8)
        return y

    def run(self, x, engine: str = "cycle"):
        """(output in the node's type, RunResult or None for the numpy reference)."""
        layer = self.compile(x.shape, x.dtype)
        if engine == "reference":
            return self._from_int8(layer.reference(self._to_int8(x))), None
        y, res = layer.run(self._to_int8(x), engine=engine)
        return self._from_int8(y), res

    def image(self, x):
        return self.compile(x.shape, x.dtype).image(self._to_int8(x))
