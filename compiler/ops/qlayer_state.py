"""A compiled :class:`~vtasim.compiler.ops.quantized.QLayer` as data, and back: what a saved network keeps of a
layer so that it runs again without compiling.

``layer_state(layer)`` returns ``(state, image)``: ``state`` a dict of plain values and numpy arrays
(geometry, weight, bias, input zero point, requantisation plan, knobs, where the input segment and the
output region lie) and ``image`` the compiled program's :class:`~vtasim.sim.image.MemoryImage` (input all
zeros).  ``restore_layer(cfg, state, image)`` checks every field against the others and the image (one
:class:`~vtasim.compiler.errors.CompileError` line naming the field and the rule) and returns a QLayer whose
``run``, ``reference`` and ``image(x, expected=False)`` are those of the compiled one: only the input
segment is swapped per run.  A restored layer has no tensor expressions, so its images carry no
expected output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from vtasim.compiler.errors import CompileError
from vtasim.compiler.ops.quantized import STEP_KINDS, QLayer, Geometry
from vtasim.compiler.qnn.vta_requant import RequantPlan
from vtasim.compiler.runtime.queue import DramBuffer
from vtasim.hw.files import brief

__all__ = ["layer_state", "restore_layer", "arith_state", "restore_arith", "STATE_KEYS", "ARITH_KEYS"]

ARITH_KEYS = ("name", "geom", "weight", "bias", "za", "plan", "knobs", "knob_source")
STATE_KEYS = ARITH_KEYS + ("input", "output")


@dataclass
class _Program:
    """What a restored layer keeps of ``vtasim.compiler.lowering.build.Built``: the image and the input buffer."""

    image: object
    buffers: dict


@dataclass
class _OutputRef:
    """What a restored layer keeps of its output tensor: the image output's name and packed shape."""

    name: str
    shape: tuple


def arith_state(layer: QLayer) -> dict:
    """The layer's arithmetic (geometry, weight, bias, zero point, requantisation plan, knobs): what its
    numpy :meth:`~vtasim.compiler.ops.quantized.QLayer.reference` needs; a multi-op region keeps one per member."""
    return {"name": layer.name, "geom": asdict(layer.geom), "weight": np.asarray(layer.weight),
            "bias": np.asarray(layer.bias), "za": int(layer.za), "plan": asdict(layer.plan),
            "knobs": dict(layer.knobs), "knob_source": layer.knob_source}


def layer_state(layer: QLayer):
    """``(state, image)`` of a compiled layer (see the module docstring)."""
    buf = layer.built.buffers["data"]
    state = {**arith_state(layer), "input": {"addr": int(buf.addr), "nbytes": int(buf.nbytes)},
             "output": {"name": layer.output.name, "shape": tuple(int(v) for v in layer.output.shape)}}
    return state, layer.built.image


def _bad(where: str, field: str, value, rule: str) -> CompileError:
    return CompileError(f"{where}: {field} = {brief(value)} ({rule})")


def _int(v, where, field, lo=None, hi=None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f" in {lo} .. {hi}" if hi is not None else f" >= {lo}" if lo is not None else ""
        raise _bad(where, field, v, f"rule: an integer{rng}")
    return v


def _keys(d, want, where, field, optional=()) -> dict:
    if not isinstance(d, dict):
        raise _bad(where, field, d, "rule: an object")
    missing = [k for k in want if k not in d]
    extra = [k for k in d if k not in want and k not in optional]
    if missing or extra:
        raise CompileError(f"{where}: {field} has keys {sorted(map(str, d))[:12]}; missing {missing}, unknown "
                           f"{extra[:5]} (rule: exactly {', '.join(want)})")
    return d


def _geometry(raw, where) -> Geometry:
    names = [f.name for f in fields(Geometry)]
    _keys(raw, names, where, "geom")
    vals = {}
    for k in names:
        v = raw[k]
        if k in ("strides", "pads", "dilation"):
            size = 4 if k == "pads" else 2
            if not isinstance(v, tuple) or len(v) != size:
                raise _bad(where, f"geom.{k}", v, f"rule: {size} integers")
            vals[k] = tuple(_int(x, where, f"geom.{k}", 0, 1 << 16) for x in v)
        elif k in ("host_pad", "dense"):
            if not isinstance(v, bool):
                raise _bad(where, f"geom.{k}", v, "rule: true or false")
            vals[k] = v
        else:
            vals[k] = _int(v, where, f"geom.{k}", 0 if k.endswith("_pad") else 1, 1 << 20)
    return Geometry(**vals)


def _array(v, where, field, dtype, shape) -> np.ndarray:
    if not isinstance(v, np.ndarray) or v.dtype != np.dtype(dtype) or tuple(v.shape) != tuple(shape):
        got = f"{v.dtype} {v.shape}" if isinstance(v, np.ndarray) else type(v).__name__
        raise CompileError(f"{where}: {field} is {got} (rule: {np.dtype(dtype)} of shape {tuple(shape)})")
    return v


def _plan(raw, where, channels: int) -> RequantPlan:
    names = [f.name for f in fields(RequantPlan)]
    _keys(raw, names, where, "plan")
    vectors = raw["vectors"]
    if not isinstance(vectors, dict):
        raise _bad(where, "plan.vectors", vectors, "rule: an object of int32 arrays")
    for k, v in vectors.items():
        _array(v, where, f"plan.vectors.{k}", np.int32, (channels,))
    steps = raw["steps"]
    if not isinstance(steps, list):
        raise _bad(where, "plan.steps", steps, "rule: a list of (kind, operand)")
    for i, st in enumerate(steps):
        ok = isinstance(st, tuple) and len(st) == 2 and st[0] in STEP_KINDS and (
            (isinstance(st[1], int) and not isinstance(st[1], bool) and -(1 << 31) <= st[1] < (1 << 31))
            or (isinstance(st[1], str) and st[1] in vectors))
        if not ok:
            raise _bad(where, f"plan.steps[{i}]", st, f"rule: (kind in {', '.join(STEP_KINDS)}, an int32 immediate "
                                                       f"or the name of a plan vector)")
    return RequantPlan(**raw)


def _arith(state, where, keys):
    """The checked arithmetic fields of ``state`` (exactly ``keys``): (name, geometry, weight, bias, za, plan)."""
    _keys(state, keys, where, "layer state")
    name = state["name"]
    if not isinstance(name, str) or not name:
        raise _bad(where, "name", name, "rule: a non-empty string")
    g = _geometry(state["geom"], where)
    weight = _array(state["weight"], where, "weight", np.int8, (g.o, g.c // g.groups, g.kh, g.kw))
    bias = _array(state["bias"], where, "bias", np.int32, (g.o,))
    za = _int(state["za"], where, "za", -128, 127)
    plan = _plan(state["plan"], where, g.o)
    if not isinstance(state["knobs"], dict) or not isinstance(state["knob_source"], str):
        raise _bad(where, "knobs", state["knobs"], "rule: an object and a knob source string")
    return name, g, weight, bias, za, plan


def restore_arith(cfg, state, where: str = "layer") -> QLayer:
    """A QLayer of :func:`arith_state`'s ``state``, every field checked: its ``reference`` runs, it has no
    program of its own (a member of a multi-op region runs in the region's image)."""
    name, g, weight, bias, za, plan = _arith(state, where, ARITH_KEYS)
    return QLayer(name, cfg, g, weight, bias, za, plan, dict(state["knobs"]), state["knob_source"], None, None, None)


def restore_layer(cfg, state, image, where: str = "layer") -> QLayer:
    """The QLayer of ``state`` and ``image`` (see the module docstring); every field checked."""
    name, g, weight, bias, za, plan = _arith(state, where, STATE_KEYS)
    if image.cfg != cfg:
        raise CompileError(f"{where}: the image's config differs from the network's (rule: one config per network)")
    inp = _keys(state["input"], ("addr", "nbytes"), where, "input")
    addr = _int(inp["addr"], where, "input.addr", 0)
    nbytes = _int(inp["nbytes"], where, "input.nbytes", 1)
    hp = g.h + (g.pads[0] + g.pads[2] if g.host_pad else 0)
    wp = g.w + (g.pads[1] + g.pads[3] if g.host_pad else 0)
    want = g.n_pad * g.c_pad * hp * wp
    if nbytes != want or not any(s.addr == addr and len(s.data) == nbytes for s in image.segments):
        raise CompileError(f"{where}: input = {nbytes} bytes at {addr:#x}, but the image has no such segment or the "
                           f"geometry packs {want} bytes (rule: the input is a segment of the image, of the packed size)")
    out = _keys(state["output"], ("name", "shape"), where, "output")
    shape = out["shape"]
    if not isinstance(shape, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape):
        raise _bad(where, "output.shape", shape, "rule: positive integers")
    if not g.grouped and int(np.prod(shape)) != g.n_pad * g.o_pad * g.oh * g.ow:
        raise CompileError(f"{where}: output.shape = {shape} does not hold the geometry's {g.n_pad} x {g.o_pad} x "
                           f"{g.oh} x {g.ow} outputs (rule: the packed output of the layer)")
    region = next((o for o in image.outputs if o.name == out["name"]), None)
    if region is None or region.nbytes != int(np.prod(shape)):
        raise CompileError(f"{where}: output {brief(out['name'])} of shape {shape} (rule: an output region of the "
                           f"image of that many bytes)")
    program = _Program(image, {"data": DramBuffer("data", addr, nbytes, False, 0)})
    return QLayer(name, cfg, g, weight, bias, za, plan, dict(state["knobs"]), state["knob_source"], program,
                  _OutputRef(out["name"], shape), None)
