"""A PyTorch model quantised with ``torch.ao.quantization`` -> :class:`~vtasim.compiler.frontend.graph.Graph`.

The importer walks the converted model's FX graph: an FX-quantised model (``convert_fx``) is one
already; an eager-quantised model (QuantStub/DeQuantStub, ``prepare``/``convert``) is traced with
``torch.fx.symbolic_trace``, which keeps the quantised modules as leaves.  One run of the graph
(``ShapeProp``) records every value's shape and, for a quantised tensor, its scale, zero point and
type, so each op's input and output quantisation is read from the tensors PyTorch itself computed,
not re-derived.  The ops map onto the composite ops of :mod:`vtasim.compiler.frontend.composite` (the same
ones the ONNX paths produce), so everything after import - passes, partitioning, VTA regions, host
ops - is shared:

=====================================================  =============================================
PyTorch                                                graph op
=====================================================  =============================================
``quantize_per_tensor``, ``nnq.Quantize``              ``QuantizeLinear``
``.dequantize()``, ``nnq.DeQuantize``                  ``DequantizeLinear``
``nnq.Conv2d``, ``nniq.ConvReLU2d``                    ``qconv`` (int8 weights, per-tensor or
                                                       per-channel; the float bias in the accumulator's
                                                       scale, int32)
``nnq.Linear``, ``nniq.LinearReLU``                    ``qdense``
``quantized.add``/``add_relu``/``mul``                 ``qadd`` / ``qmul`` (a product broadcasts)
``quantized.cat``, ``torch.cat``                       ``Concat`` (inputs requantised by tables first)
``AdaptiveAvgPool2d(1)``, ``adaptive_avg_pool2d``      ``qgap``
``MaxPool2d``, ``max_pool2d``, ``flatten``,            the op on the integers (same scale and zero
``reshape``/``view``, ReLU, ReLU6                      point in and out)
Hardswish, Sigmoid, Tanh, Hardsigmoid, LeakyReLU       ``qlut`` (a 256-entry table)
``Identity``, ``Dropout``, ``contiguous``              nothing (an alias)
=====================================================  =============================================

Every op or argument it cannot take is listed in one :class:`UnsupportedModel`.  Files:
:func:`load_state_dict` reads a state dict with ``weights_only=True`` (no code runs); a model's
architecture comes from code, never from a file (:func:`load_factory`: ``package.module:function``).
"""

from __future__ import annotations

import io
import operator

import numpy as np

from vtasim.compiler import qnn
from vtasim.compiler.frontend.composite import qadd_node, qconv_node, qdense_node, qparam
from vtasim.compiler.frontend.errors import FrontendError, ModelFileError, UnsupportedModel
from vtasim.compiler.frontend.graph import Graph, Node

__all__ = ["from_torch", "graph_module", "load_state_dict", "apply_state_dict", "load_factory", "MAX_TORCH_BYTES"]

MAX_TORCH_BYTES = 1 << 30


def _torch():
    from vtasim.sim.install import require
    require(["torch"], "the PyTorch importer")
    import torch
    return torch


def _np_dtype(torch, dt):
    return {torch.quint8: np.dtype(np.uint8), torch.qint8: np.dtype(np.int8)}.get(dt)


class _Importer:
    def __init__(self, torch, gm, source: str):
        self.torch, self.gm, self.source = torch, gm, source
        self.nodes, self.consts, self.shapes, self.problems = [], {}, {}, []
        self.alias: dict = {}            # FX node name -> value name (ops that are no-ops here)
        self.modules = dict(gm.named_modules())

    # values and their quantisation ----------------------------------------------------------
    def value(self, arg) -> str:
        return self.alias.get(arg.name, arg.name)

    def meta(self, n):
        return n.meta.get("tensor_meta")

    def qinfo(self, n, where):
        """(scale, zero point, numpy dtype) of a per-tensor quantised value, or None (and a problem)."""
        tm = self.meta(n)
        if tm is None or not getattr(tm, "is_quantized", False):
            self.problems.append(f"{where}: `{n.name}` is not a quantised tensor here")
            return None
        qp = tm.qparams
        if qp.get("qscheme") not in (self.torch.per_tensor_affine, self.torch.per_tensor_symmetric):
            self.problems.append(f"{where}: `{n.name}` is quantised {qp.get('qscheme')} (activations: per-tensor)")
            return None
        dt = _np_dtype(self.torch, tm.dtype)
        if dt is None:
            self.problems.append(f"{where}: `{n.name}` is {tm.dtype} (quint8 or qint8 activations)")
            return None
        return float(qp["scale"]), int(qp["zero_point"]), dt

    def const(self, base: str, arr) -> str:
        name = base
        k = 0
        while name in self.consts:
            k += 1
            name = f"{base}_{k}"
        self.consts[name] = np.asarray(arr)
        return name

    def emit(self, node: Node, n) -> None:
        tm = self.meta(n)
        if tm is not None:
            self.shapes[node.outputs[0]] = tuple(int(d) for d in tm.shape)
        self.nodes.append(node)

    # weights ---------------------------------------------------------------------------------
    def weight(self, m, where):
        """(int8 weight array, scale (float or (O,)), zero point (int or (O,)))."""
        torch = self.torch
        w = m.weight()
        if w.dtype != torch.qint8:
            self.problems.append(f"{where}: weight is {w.dtype} (qint8 weights)")
            return None
        qs = w.qscheme()
        if qs in (torch.per_channel_affine, torch.per_channel_symmetric):
            if w.q_per_channel_axis() != 0:
                self.problems.append(f"{where}: per-channel weight along axis {w.q_per_channel_axis()} (axis 0)")
                return None
            ws = qparam(w.q_per_channel_scales().double().numpy(), where, True)
            wz = qparam(w.q_per_channel_zero_points().numpy(), where, True)
        elif qs in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            ws, wz = float(w.q_scale()), int(w.q_zero_point())
        else:
            self.problems.append(f"{where}: weight quantised {qs} (per-tensor or per-channel affine)")
            return None
        return w.int_repr().numpy().astype(np.int8), ws, wz

    def bias(self, m, xs, ws, where):
        """The float bias in the accumulator's scale (x_scale * w_scale), int32, as fbgemm quantises it."""
        b = m.bias()
        if b is None:
            return None
        acc = np.round(b.detach().double().numpy() / (xs * np.asarray(ws, np.float64)))
        if np.any(np.abs(acc) > 2 ** 31 - 1):
            self.problems.append(f"{where}: bias does not fit int32 in the accumulator's scale")
            return None
        return acc.astype(np.int32)

    # the ops ---------------------------------------------------------------------------------
    def quantize(self, n, x, where):
        q = self.qinfo(n, where)
        if q is None:
            return
        s, z, dt = q
        self.emit(Node("QuantizeLinear", [self.value(x), self.const(f"{n.name}_scale", np.float32(s)),
                                          self.const(f"{n.name}_zp", dt.type(z))], [n.name], {}, n.name, where), n)

    def dequantize(self, n, x, where):
        q = self.qinfo(x, where)
        if q is None:
            return
        s, z, dt = q
        self.emit(Node("DequantizeLinear", [self.value(x), self.const(f"{n.name}_scale", np.float32(s)),
                                            self.const(f"{n.name}_zp", dt.type(z))], [n.name], {}, n.name, where), n)

    def conv(self, n, m, x, act, where):
        if m.padding_mode != "zeros" or isinstance(m.padding, str):
            self.problems.append(f"{where}: padding={m.padding!r}, padding_mode={m.padding_mode!r} "
                                 f"(explicit zero padding only)")
            return
        xi, yi, w = self.qinfo(x, where), self.qinfo(n, where), self.weight(m, where)
        if xi is None or yi is None or w is None:
            return
        (xs, xz, xdt), (ys, yz, ydt), (wq, ws, wz) = xi, yi, w
        ph, pw = (int(p) for p in m.padding)
        attrs = dict(strides=[int(s) for s in m.stride], pads=[ph, pw, ph, pw],
                     dilations=[int(d) for d in m.dilation], group=int(m.groups))
        bias = self.bias(m, xs, ws, where)
        self.emit(qconv_node(n.name, where, self.value(x), n.name, wq, bias, attrs, xs, xz, ws, wz, ys, yz, ydt,
                             act, x_dtype=xdt), n)

    def linear(self, n, m, x, act, where):
        xi, yi, w = self.qinfo(x, where), self.qinfo(n, where), self.weight(m, where)
        if xi is None or yi is None or w is None:
            return
        tm = self.meta(x)
        if tm is None or len(tm.shape) != 2:
            self.problems.append(f"{where}: input `{x.name}` of shape {tuple(tm.shape) if tm else '?'} "
                                 f"(Linear on 2-D (N, K) inputs only)")
            return
        (xs, xz, xdt), (ys, yz, ydt), (wq, ws, wz) = xi, yi, w
        bias = self.bias(m, xs, ws, where)
        self.emit(qdense_node(n.name, where, self.value(x), n.name, np.ascontiguousarray(wq), bias, xs, xz, ws, wz,
                              ys, yz, ydt, act, x_dtype=xdt), n)

    def binary(self, n, a, b, op, act, where):
        ai, bi, yi = self.qinfo(a, where), self.qinfo(b, where), self.qinfo(n, where)
        if ai is None or bi is None or yi is None:
            return
        sa, sb = tuple(self.meta(a).shape), tuple(self.meta(b).shape)
        if sa != sb and (op != "qmul" or len(sa) != len(sb) or any(p not in (1, q) and q not in (1, p) for p, q in zip(sa, sb))):
            self.problems.append(f"{where}: operands of shapes {sa} and {sb} (equal shapes; a product also broadcasts)")
            return
        self.emit(qadd_node(n.name, where, self.value(a), self.value(b), n.name, ai[0], ai[1], bi[0], bi[1],
                            yi[0], yi[1], yi[2], act, op=op), n)

    def passive(self, n, x, op, attrs, where, extra=()):
        """An op on the integers: PyTorch keeps the scale and zero point, which is checked."""
        xi, yi = self.qinfo(x, where), self.qinfo(n, where)
        if xi is None or yi is None:
            return
        if not (np.isclose(xi[0], yi[0], rtol=1e-7) and xi[1:] == yi[1:]):
            self.problems.append(f"{where}: {op} changes the quantisation ({xi} -> {yi})")
            return
        self.emit(Node(op, [self.value(x)] + list(extra), [n.name], attrs, n.name, where), n)

    def clamp(self, n, x, lo, hi, where):
        """ReLU (lo=0) / ReLU6 (hi=6) on the integers: the bounds in the input's quantisation."""
        xi = self.qinfo(x, where)
        if xi is None:
            return
        s, z, dt = xi
        attrs = {"min": int(z) if lo == 0 else int(np.iinfo(dt).min)}
        if hi is not None:
            attrs["max"] = int(min(np.iinfo(dt).max, np.round(hi / s) + z))
        self.passive(n, x, "Clip", attrs, where)

    def gap(self, n, x, size, where):
        if tuple(size) not in ((1,), (1, 1)):
            self.problems.append(f"{where}: adaptive average pooling to {tuple(size)} (only to 1x1)")
            return
        xi, yi = self.qinfo(x, where), self.qinfo(n, where)
        if xi is None or yi is None:
            return
        self.emit(Node("qgap", [self.value(x)], [n.name], dict(x_scale=xi[0], x_zp=xi[1], y_scale=yi[0],
                                                                y_zp=yi[1], y_dtype=yi[2]), n.name, where), n)

    def lut(self, n, x, fn, name, where):
        xi, yi = self.qinfo(x, where), self.qinfo(n, where)
        if xi is None or yi is None:
            return
        table = qnn.lut_table(fn, xi[0], xi[1], yi[0], yi[1], xi[2].name, yi[2].name, rounding="half_even",
                              precision="float32")
        self.emit(Node("qlut", [self.value(x)], [n.name], dict(table=table, fn=name, x_dtype=xi[2]), n.name, where), n)

    def cat(self, n, xs, dim, where):
        """``quantized::cat``: each input whose quantisation differs from the output's is requantised by a table
        (as PyTorch requantises it), then the integers are concatenated."""
        yi = self.qinfo(n, where)
        infos = [self.qinfo(x, where) for x in xs]
        if yi is None or any(i is None for i in infos):
            return
        parts = []
        for k, (x, xi) in enumerate(zip(xs, infos)):
            if np.isclose(xi[0], yi[0], rtol=1e-7) and xi[1:] == yi[1:]:
                parts.append(self.value(x))
                continue
            name = f"{n.name}_in{k}"
            table = qnn.lut_table(lambda v: v, xi[0], xi[1], yi[0], yi[1], xi[2].name, yi[2].name,
                                  rounding="half_even", precision="float32")
            self.nodes.append(Node("qlut", [self.value(x)], [name], dict(table=table, fn="requantize", x_dtype=xi[2]),
                                   name, where))
            self.shapes[name] = tuple(int(d) for d in self.meta(x).shape)
            parts.append(name)
        nd = len(self.meta(n).shape)
        self.emit(Node("Concat", parts, [n.name], {"axis": int(dim) % nd}, n.name, where), n)

    def maxpool(self, n, x, kernel, stride, padding, dilation, ceil_mode, where):
        pair = lambda v: [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]
        kernel, padding, dilation = pair(kernel), pair(padding), pair(dilation)
        stride = pair(stride) if stride not in (None, [], ()) else kernel
        if dilation != [1, 1]:
            self.problems.append(f"{where}: max pooling with dilation {dilation} (only 1)")
            return
        self.passive(n, x, "MaxPool", dict(kernel_shape=kernel, strides=stride, pads=padding + padding,
                                           ceil_mode=int(bool(ceil_mode))), where)

    def reshape(self, n, x, shape, where):
        if not all(isinstance(s, int) for s in shape):
            self.problems.append(f"{where}: reshape to {shape} (constant integer sizes only)")
            return
        self.passive(n, x, "Reshape", {}, where, [self.const(f"{n.name}_shape", np.array(shape, np.int64))])

    def flatten(self, n, x, start, end, where):
        nd = len(self.meta(x).shape) if self.meta(x) is not None else 0
        if end not in (-1, nd - 1):
            self.problems.append(f"{where}: flatten(start_dim={start}, end_dim={end}) (only to the last dimension)")
            return
        self.passive(n, x, "Flatten", {"axis": int(start) % max(nd, 1)}, where)


def _lut_fn(fn: str, **attrs):
    """The float function of a table: the QDQ fusion pass's, by its ONNX activation name and attributes
    (PyTorch's Hardsigmoid is ONNX's HardSigmoid with alpha 1/6, beta 1/2)."""
    from vtasim.compiler.frontend.fuse import lut_fn as onnx_lut_fn
    return onnx_lut_fn(Node(fn, [], [], attrs), fn)


def _module(imp: _Importer, n, m, where):
    torch = imp.torch
    nnq = torch.ao.nn.quantized
    nniq = torch.ao.nn.intrinsic.quantized
    x = n.args[0] if n.args else None
    if isinstance(m, nnq.Quantize):
        imp.quantize(n, x, where)
    elif isinstance(m, nnq.DeQuantize):
        imp.dequantize(n, x, where)
    elif isinstance(m, nniq.ConvReLU2d):
        imp.conv(n, m, x, "relu", where)
    elif type(m) is nnq.Conv2d:
        imp.conv(n, m, x, None, where)
    elif isinstance(m, nniq.LinearReLU):
        imp.linear(n, m, x, "relu", where)
    elif type(m) is nnq.Linear:
        imp.linear(n, m, x, None, where)
    elif isinstance(m, (torch.nn.Identity, torch.nn.Dropout)):
        imp.alias[n.name] = imp.value(x)
    elif isinstance(m, torch.nn.MaxPool2d):
        if m.return_indices:
            imp.problems.append(f"{where}: MaxPool2d(return_indices=True) is not supported")
        else:
            imp.maxpool(n, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, where)
    elif isinstance(m, torch.nn.AdaptiveAvgPool2d):
        size = m.output_size
        imp.gap(n, x, (size, size) if isinstance(size, int) else size, where)
    elif isinstance(m, torch.nn.Flatten):
        imp.flatten(n, x, m.start_dim, m.end_dim, where)
    elif isinstance(m, torch.nn.ReLU6) or isinstance(m, nnq.ReLU6):
        imp.clamp(n, x, 0, 6.0, where)
    elif isinstance(m, torch.nn.ReLU):
        imp.clamp(n, x, 0, None, where)
    elif isinstance(m, (torch.nn.Hardswish, nnq.Hardswish)):
        imp.lut(n, x, _lut_fn("hardswish"), "hardswish", where)
    elif isinstance(m, torch.nn.Hardsigmoid):
        imp.lut(n, x, _lut_fn("hardsigmoid", alpha=1 / 6, beta=0.5), "hardsigmoid", where)
    elif isinstance(m, torch.nn.Sigmoid):
        imp.lut(n, x, "sigmoid", "sigmoid", where)
    elif isinstance(m, torch.nn.Tanh):
        imp.lut(n, x, "tanh", "tanh", where)
    elif isinstance(m, (torch.nn.LeakyReLU, nnq.LeakyReLU)):
        imp.lut(n, x, _lut_fn("leaky_relu", alpha=float(m.negative_slope)), "leaky_relu", where)
    elif isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
        imp.problems.append(f"{where}: float {type(m).__name__} (quantise the model first: prepare/convert or "
                            f"prepare_fx/convert_fx)")
    else:
        imp.problems.append(f"{where}: module {type(m).__module__}.{type(m).__name__} is not supported")


def _arg(n, k, key, default):
    if len(n.args) > k:
        return n.args[k]
    return n.kwargs.get(key, default)


def _function(imp: _Importer, n, where):
    torch = imp.torch
    F = torch.nn.functional
    t = n.target
    x = n.args[0] if n.args else None
    q = torch.ops.quantized
    if t is torch.quantize_per_tensor:
        imp.quantize(n, x, where)
    elif t in (q.add, q.add.default, q.add_relu, q.add_relu.default, q.mul, q.mul.default):
        name = getattr(t, "_name", None) or str(t)
        op = "qmul" if "mul" in name else "qadd"
        imp.binary(n, n.args[0], n.args[1], op, "relu" if "relu" in name else None, where)
    elif t in (q.cat, q.cat.default, torch.cat, torch.concat):
        imp.cat(n, list(n.args[0]), _arg(n, 1, "dim", 0), where)
    elif t is torch.flatten:
        imp.flatten(n, x, int(_arg(n, 1, "start_dim", 0)), int(_arg(n, 2, "end_dim", -1)), where)
    elif t in (F.adaptive_avg_pool2d, torch._C._nn.adaptive_avg_pool2d):
        size = _arg(n, 1, "output_size", None)
        imp.gap(n, x, (size, size) if isinstance(size, int) else tuple(size), where)
    elif t in (F.max_pool2d, torch.max_pool2d):
        imp.maxpool(n, x, _arg(n, 1, "kernel_size", None), _arg(n, 2, "stride", None), _arg(n, 3, "padding", 0),
                    _arg(n, 4, "dilation", 1), _arg(n, 5, "ceil_mode", False), where)
    elif t in (F.relu, torch.relu):
        imp.clamp(n, x, 0, None, where)
    elif t in (F.relu6,):
        imp.clamp(n, x, 0, 6.0, where)
    elif t in (F.hardswish,):
        imp.lut(n, x, _lut_fn("hardswish"), "hardswish", where)
    elif t in (F.hardsigmoid,):
        imp.lut(n, x, _lut_fn("hardsigmoid", alpha=1 / 6, beta=0.5), "hardsigmoid", where)
    elif t in (torch.sigmoid, F.sigmoid):
        imp.lut(n, x, "sigmoid", "sigmoid", where)
    elif t in (torch.reshape,):
        imp.reshape(n, x, list(n.args[1:]) if len(n.args) > 2 else list(_arg(n, 1, "shape", [])), where)
    elif t is operator.getitem:
        imp.problems.append(f"{where}: indexing ({n.args[1]!r}) is not supported")
    else:
        imp.problems.append(f"{where}: function {getattr(t, '__name__', t)} is not supported")


def _method(imp: _Importer, n, where):
    x = n.args[0]
    t = n.target
    if t == "dequantize":
        imp.dequantize(n, x, where)
    elif t in ("contiguous", "detach"):
        imp.alias[n.name] = imp.value(x)
    elif t in ("reshape", "view"):
        shape = list(n.args[1]) if len(n.args) == 2 and isinstance(n.args[1], (list, tuple)) else list(n.args[1:])
        imp.reshape(n, x, shape, where)
    elif t == "flatten":
        imp.flatten(n, x, int(_arg(n, 1, "start_dim", 0)), int(_arg(n, 2, "end_dim", -1)), where)
    elif t in ("relu", "relu_"):
        imp.clamp(n, x, 0, None, where)
    else:
        imp.problems.append(f"{where}: method .{t}() is not supported")


def graph_module(torch, module, source):
    if isinstance(module, torch.fx.GraphModule):
        return module
    if isinstance(module, torch.jit.ScriptModule):
        raise FrontendError(f"{source}: a TorchScript module; give the quantised nn.Module (eager or FX "
                            f"convert output): the importer walks its FX graph")
    try:
        return torch.fx.symbolic_trace(module)
    except Exception as e:        # noqa: BLE001 - FX's tracing errors share no base class
        raise FrontendError(f"{source}: torch.fx cannot trace the model ({type(e).__name__}: "
                            f"{str(e).splitlines()[0][:160]}); give a model quantised with prepare/convert "
                            f"or prepare_fx/convert_fx whose forward has no data-dependent control flow") from None


def from_torch(module, input_shape, source: str = "model") -> Graph:
    """Import a quantised ``torch.nn.Module`` (eager ``convert`` or ``convert_fx`` output) for an input of
    ``input_shape`` (the batch included): the graph's one float32 input is that shape.

    Raises :class:`UnsupportedModel` listing every op it cannot take."""
    torch = _torch()
    from torch.fx.passes.shape_prop import ShapeProp
    shape = tuple(int(d) for d in input_shape)
    if not shape or any(d < 1 for d in shape) or int(np.prod(shape)) > (1 << 28):
        raise FrontendError(f"input shape {shape}: every dimension at least 1, at most 2^28 elements")
    if module.training:
        raise FrontendError(f"{source}: the module is in training mode; call .eval() (and convert it) first")
    gm = graph_module(torch, module, source)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        raise FrontendError(f"{source}: forward takes {len(placeholders)} tensors (one input tensor supported)")
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(torch.zeros(shape))
    except Exception as e:        # noqa: BLE001 - the model's own errors on this shape
        raise FrontendError(f"{source}: the model does not run on an input of shape {shape} "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:160]})") from None
    imp = _Importer(torch, gm, source)
    inputs, outputs = {}, []
    for k, n in enumerate(gm.graph.nodes):
        where = f"{source} node {k} {n.name!r}"
        if n.op == "placeholder":
            inputs[n.name] = (shape, np.dtype(np.float32))
            imp.shapes[n.name] = shape
        elif n.op == "get_attr":
            continue                       # scales and zero points: read from the values' quantisation
        elif n.op == "call_module":
            _module(imp, n, imp.modules[n.target], where + f" ({n.target})")
        elif n.op == "call_function":
            _function(imp, n, where)
        elif n.op == "call_method":
            _method(imp, n, where)
        elif n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else [n.args[0]]
            for o in outs:
                tm = imp.meta(o) if hasattr(o, "meta") else None
                if tm is None or getattr(tm, "is_quantized", False):
                    imp.problems.append(f"{where}: output `{o}` is not a float tensor (end the model with "
                                        f"DeQuantStub / dequantize)")
                else:
                    outputs.append(imp.value(o))
    if imp.problems:
        raise UnsupportedModel(imp.problems)
    g = Graph(imp.nodes, inputs, outputs, imp.consts, source)
    g.shapes = imp.shapes
    g.notes.append(f"torch import: {len(imp.nodes)} op(s) from the FX graph of {type(module).__name__}")
    return g


def load_state_dict(path, max_bytes: int = MAX_TORCH_BYTES) -> dict:
    """A ``state_dict`` saved with ``torch.save(model.state_dict(), path)``, read with ``weights_only=True``:
    PyTorch's restricted unpickler, which rebuilds tensors and plain containers and refuses anything else,
    so the file runs no code.  (A whole pickled module is not accepted: loading one runs code from the
    file, and PyTorch 2.14 cannot restore a pickled quantised module anyway.)"""
    from vtasim.hw.files import read_regular
    torch = _torch()
    data = read_regular(path, "state dict", max_bytes, error=ModelFileError)
    try:
        sd = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:        # noqa: BLE001 - torch.load raises many types (UnpicklingError for code)
        raise ModelFileError(f"{path}: not a state dict torch.load(weights_only=True) reads "
                             f"({type(e).__name__}: {str(e).splitlines()[0][:160]})") from None
    if not isinstance(sd, dict) or not all(isinstance(k, str) for k in sd):
        raise ModelFileError(f"{path}: holds a {type(sd).__name__}, not a state dict (save model.state_dict())")
    return sd


def apply_state_dict(module, sd: dict, source: str):
    """``module.load_state_dict(sd)`` (strict), its key mismatches said in one line."""
    try:
        module.load_state_dict(sd, strict=True)
    except (RuntimeError, KeyError, ValueError) as e:
        raise FrontendError(f"{source}: the state dict does not fit the model: {str(e).splitlines()[0][:200]}; "
                            f"{' '.join(str(e).split())[:300]}") from None
    return module


def load_factory(spec: str):
    """``package.module:function``: import it (the current directory on the path, as ``python -m`` has) and
    call ``function()``, which returns the quantised module.  This runs the user's own code, by design."""
    import importlib
    import sys
    mod_name, sep, fn_name = spec.partition(":")
    if not sep or not mod_name or not fn_name.isidentifier():
        raise FrontendError(f"model {spec!r}: give package.module:function (a function returning the quantised "
                            f"module)")
    torch = _torch()
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as e:
        raise FrontendError(f"model {spec!r}: cannot import it ({type(e).__name__}: {e})") from None
    try:
        module = fn()
    except Exception as e:        # noqa: BLE001 - the user's code: its error in one line
        raise FrontendError(f"model {spec!r}: {fn_name}() raised {type(e).__name__}: "
                            f"{str(e).splitlines()[0][:160] if str(e) else ''}") from None
    if not isinstance(module, torch.nn.Module):
        raise FrontendError(f"model {spec!r}: {fn_name}() returned a {type(module).__name__}, not a torch.nn.Module")
    return module.eval()
