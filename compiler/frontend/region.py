"""One VTA region: a composite ``qconv``/``qdense``/``qconv_transpose`` node compiled for the accelerator.

The region maps the node's quantisation onto VTA's signed 8-bit data path: a uint8 tensor with zero
point z is the int8 tensor ``q - 128`` with zero point ``z - 128`` (exact), so uint8 inputs and
outputs are shifted on the host at the region's edge.  Weights must be symmetric (zero point 0);
the requantisation runs on VTA's ALU as planned by :func:`vtasim.compiler.qnn.plan_requant`.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.composite import out_limits
from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["VtaRegion", "region_problem", "acc_bound", "REGION_KIND"]

REGION_KIND = "qlayer"          # a region of one compiled QLayer (one image)


def region_problem(node) -> str | None:
    """Why ``node`` cannot run on VTA (None when it can, before the requantisation check)."""
    a = node.attrs
    if node.op not in ("qconv", "qdense", "qconv_transpose"):
        return f"{node.op} has no VTA lowering"
    if a["weight"].dtype != np.int8:
        return f"weights are {a['weight'].dtype.name} (VTA needs int8)"
    if np.any(np.asarray(a["w_zp"]) != 0):
        return "weight zero point is not 0 (VTA needs symmetric weights)"
    if node.op == "qconv_transpose":
        from vtasim.compiler.ops.qconv_transpose import transpose_problem
        return transpose_problem(a["weight"].shape, a["strides"], a["pads"], a["dilations"], a["output_padding"],
                                 a["group"])
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

    def requant_plan(self, x_dtype):
        from vtasim.compiler.qnn import plan_requant
        a = self.node.attrs
        za = int(a["x_zp"]) - self._shift(x_dtype)
        if a.get("requant_plan") is not None and np.dtype(x_dtype) == a["x_dtype"]:
            return za, a["requant_plan"]      # parallel layers combined: their plans, merged per channel
        ys = self._shift(a["y_dtype"])
        lo, hi = out_limits(a)
        mult = np.asarray(a["x_scale"], np.float64) * np.asarray(a["w_scale"], np.float64) / a["y_scale"]
        mult = mult if mult.ndim and mult.size > 1 else float(mult)
        if self.node.op == "qconv_transpose":      # per tap class of the phases (qnn.conv_transpose_acc_bound)
            from vtasim.compiler.qnn import conv_transpose_acc_bound
            bound = conv_transpose_acc_bound(a["weight"], a["bias"], za, a["strides"])
        else:
            bound = acc_bound(a["weight"], a["bias"], za)
        return za, plan_requant(mult, bound, int(a["y_zp"]) - ys, lo - ys, hi - ys, self.cfg, path=self.path)

    def check(self, x_dtype=np.int8):
        """Raise the requantisation error (if any) without compiling."""
        return self.requant_plan(x_dtype)

    def compile(self, x_shape, x_dtype, residual=None, name: str | None = None):
        """The compiled layer for this input; ``residual`` (a QAddPlan) fuses an add into the epilogue
        (multi-op regions), ``name`` overrides the layer name."""
        from vtasim.compiler.ops.qconv_transpose import build_qconv_transpose
        from vtasim.compiler.ops.quantized import build_qconv, build_qdense
        key = self._key(x_shape, x_dtype, residual, name)
        if self.key == key:
            return self.layer
        a = self.node.attrs
        za, plan = self.requant_plan(x_dtype)
        name = name or self.layer_name
        if self.node.op == "qconv":
            self.layer = build_qconv(self.cfg, tuple(x_shape), a["weight"], a["bias"], a["strides"], a["pads"], za,
                                     plan, knobs=self.knobs, name=name, groups=int(a.get("group", 1)),
                                     dilations=tuple(a.get("dilations", (1, 1))), residual=residual)
        elif self.node.op == "qconv_transpose":
            self.layer = build_qconv_transpose(self.cfg, tuple(x_shape), a["weight"], a["bias"], a["strides"],
                                               a["pads"], za, plan, knobs=self.knobs, name=name,
                                               dilations=a["dilations"], output_padding=a["output_padding"],
                                               groups=a["group"])
        else:
            self.layer = build_qdense(self.cfg, tuple(x_shape), a["weight"], a["bias"], za, plan,
                                      knobs=self.knobs, name=name)
        self.key, self.plan = key, plan
        return self.layer

    @staticmethod
    def _key(x_shape, x_dtype, residual=None, name=None) -> tuple:
        """The compile cache key: input shape and type, the fused add (by identity) and the name override."""
        return (tuple(x_shape), np.dtype(x_dtype).str, id(residual), name)

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

    @property
    def inputs(self) -> list:
        """The value names at the region's host edge (the region interface of ``VtaChainRegion``)."""
        return [self.node.inputs[0]]

    @property
    def outputs(self) -> list:
        return [self.node.outputs[0]]

    def images(self, feeds: dict) -> list:
        """The region's memory images for ``feeds`` ({input value: array}): one."""
        return [self.image(feeds[self.node.inputs[0]])]

    def edge_bytes(self) -> dict:
        """Host<->VTA activation bytes per inference of the compiled layer: the packed (padded) input the
        host writes and the packed output it reads back (the image's output region: a compiled network's
        restored layer keeps the image and the input buffer, not the output's)."""
        if self.layer is None:
            raise FrontendError(f"{self.node.where}: edge_bytes before the region was compiled")
        built = self.layer.built
        out = next(o for o in built.image.outputs if o.name == self.layer.output.name)
        return {"in": built.buffers["data"].nbytes, "out": out.nbytes}

    # ---- a compiled network's region (vtasim.compiler.frontend.netfile) ---------------------------------
    def edge(self) -> dict:
        """The host side of the region: the input it was compiled for and the uint8 <-> int8 shifts.  A
        compiled network's single-op region is the plain compile (no fused add, the node's own name); a
        fused or renamed compile is a member of a multi-op region, saved by the region."""
        shape, dtype = self.key[:2]
        if self.key != self._key(shape, dtype):
            raise FrontendError(f"{self.node.where}: region {self.name!r} was compiled with a fused add or another "
                                f"name (rule: a saved single-op region is the plain compile)")
        return {"in_shape": tuple(shape), "in_dtype": np.dtype(dtype).name, "in_shift": self._shift(dtype),
                "out_dtype": np.dtype(self.node.attrs["y_dtype"]).name,
                "out_shift": self._shift(self.node.attrs["y_dtype"])}

    def export(self) -> dict:
        """``{"kind", "members", "edge", "images": [{"image": MemoryImage, "state": dict}]}`` of the compiled region
        (one image per compiled program, in the order they run); :meth:`restore` takes it back."""
        from vtasim.compiler.ops.qlayer_state import layer_state
        if self.layer is None:
            raise FrontendError(f"{self.node.where}: region {self.name!r} is not compiled yet (run one input first)")
        state, image = layer_state(self.layer)
        return {"kind": REGION_KIND, "members": [self.name], "edge": self.edge(),
                "images": [{"image": image, "state": state}]}

    @classmethod
    def restore(cls, node, cfg, record: dict, where: str, path: str = "auto") -> "VtaRegion":
        """The region of ``node`` compiled as ``record`` (what :meth:`export` gave) with the requantisation
        ``path`` it was partitioned with, every field checked against the node and the image; it runs
        without compiling."""
        from vtasim.compiler.ops.qlayer_state import restore_layer
        region = cls(node, cfg, path=path)
        if record.get("kind") != REGION_KIND or len(record.get("images", ())) != 1:
            raise FrontendError(f"{where}: kind {record.get('kind')!r} with {len(record.get('images', ()))} image(s) "
                                f"(rule: kind {REGION_KIND!r}, one image)")
        edge = record.get("edge")
        shape, dtype = edge.get("in_shape") if isinstance(edge, dict) else None, None
        try:
            dtype = np.dtype(edge["in_dtype"]) if isinstance(edge, dict) else None
        except (TypeError, KeyError):
            pass
        if dtype not in (np.dtype(np.int8), np.dtype(np.uint8)) or not isinstance(shape, tuple):
            raise FrontendError(f"{where}: edge = {edge!r:.100} (rule: in_shape and an int8/uint8 in_dtype)")
        region.key = cls._key(shape, dtype)
        want = region.edge()
        if edge != want:
            diff = sorted(set(edge) ^ set(want)) or [k for k in want if edge[k] != want[k]]
            k = diff[0]
            raise FrontendError(f"{where}: edge {k} = {edge.get(k)!r:.60} does not match the node's {want.get(k)!r:.60} "
                                f"(rule: the edge is the node's input shape, types and uint8 shifts)")
        step = record["images"][0]
        layer = restore_layer(cfg, step["state"], step["image"], where)
        if layer.in_shape != shape:
            raise FrontendError(f"{where}: the layer takes {layer.in_shape}, the edge says {shape}")
        region.check_layer(layer, dtype, where)
        region.layer, region.plan = layer, layer.plan
        return region

    def check_layer(self, layer, x_dtype, where: str) -> None:
        """Refuse a restored ``layer`` whose zero point, requantisation steps or weight are not the node's."""
        node = self.node
        za, plan = self.requant_plan(x_dtype)
        if layer.za != za or layer.plan.steps != plan.steps or layer.plan.stages != plan.stages:
            raise FrontendError(f"{where}: the layer's zero point / requantisation steps differ from the node's "
                                f"(rule: the node's quantisation)")
        w = node.attrs["weight"]
        if layer.weight.size != w.size or not np.array_equal(layer.weight.reshape(w.shape), w):
            raise FrontendError(f"{where}: the layer's weight differs from the node's (rule: the node's weight)")
