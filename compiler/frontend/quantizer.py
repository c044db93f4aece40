"""``vtasim quantize``: TVM's ``relay.quantize`` recipe for a float ONNX model, written as a QDQ model.

As TVM's qconfig does it: symmetric int8 everywhere (zero point 0), weights per tensor with scale
``max|w| / 127`` (``max``) or TVM's ``power2`` rule, activations by a calibration mode
(:mod:`vtasim.compiler.frontend.calibrate`; ``global`` is TVM's default ``global_scale=8``), biases int32
in the accumulator's scale, and the convolutions listed in ``skip_conv_layers`` left in float (TVM
skips the first by default, ``[0]``).  The result is an ordinary QDQ model: onnxruntime runs it and
``vtasim onnx`` takes it like any other int8 model.  With ``global`` activations and ``power2``
weights every scale is a power of two, so every requantisation on VTA is a shift (TVM's VTA flow).

Which tensors are quantised: every activation that is an input of a quantisable op (Conv, Gemm,
MatMul with a constant weight, Add of two activations, GlobalAveragePool) or of a passive op
(MaxPool, Flatten, Reshape), and their outputs — moved past a single Relu/Clip that follows, so the
activation fuses with the op.  A passive op's output keeps its input's scale (it runs on the integers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasim.compiler.frontend.calibrate import CALIBRATIONS, activation_scale, power2_scale
from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["QuantizeOptions", "quantize_model", "WEIGHT_SCALES", "MAX_SAMPLES"]

WEIGHT_SCALES = ("max", "power2")
QUANTISABLE = ("Conv", "Gemm", "MatMul", "Add", "GlobalAveragePool")
PASSIVE = ("MaxPool", "Flatten", "Reshape")
MAX_SAMPLES = 1 << 20          # values kept per tensor for calibration (a seeded uniform subsample)


@dataclass
class QuantizeOptions:
    calibrate: str = "global"
    global_scale: float = 8.0
    weight_scale: str = "power2"
    skip_conv_layers: tuple = (0,)
    notes: list = field(default_factory=list)

    def check(self):
        if self.calibrate not in CALIBRATIONS:
            raise FrontendError(f"--calibrate {self.calibrate!r} is not one of {', '.join(CALIBRATIONS)}")
        if self.weight_scale not in WEIGHT_SCALES:
            raise FrontendError(f"--weight-scale {self.weight_scale!r} is not one of {', '.join(WEIGHT_SCALES)}")
        if not np.isfinite(self.global_scale) or self.global_scale <= 0:
            raise FrontendError(f"--global-scale {self.global_scale!r}: must be a finite number > 0")
        if any(k < 0 for k in self.skip_conv_layers):
            raise FrontendError(f"--skip-conv-layers {list(self.skip_conv_layers)}: indices count convolutions "
                                f"from 0")


def _weight_q(w: np.ndarray, mode: str) -> tuple[np.ndarray, float]:
    top = float(np.abs(w).max(initial=0.0))
    s = power2_scale(top) if mode == "power2" else (top / 127 if top > 0 else 1.0)
    return np.clip(np.round(w / s), -127, 127).astype(np.int8), s


def _plan(model, opts: QuantizeOptions):
    """(tensors to quantise, {passive output: its input}, {node index: role}) over the float graph."""
    g = model.graph
    consts = {t.name for t in g.initializer}
    consumers: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    conv_k, roles, tensors, passive = 0, {}, [], {}

    def add(t):
        if t and t not in consts and t not in tensors:
            tensors.append(t)

    def tail(t):
        """The value after a single Relu/Clip consumer, else ``t``."""
        use = consumers.get(t, [])
        if len(use) == 1 and use[0].op_type in ("Relu", "Clip") and t not in [o.name for o in g.output]:
            return use[0].output[0]
        return t

    for k, n in enumerate(g.node):
        op = n.op_type
        if op == "Conv":
            skip = conv_k in opts.skip_conv_layers
            conv_k += 1
            if skip:
                roles[k] = "float"
                continue
        if op == "MatMul" and n.input[1] not in consts:
            continue
        if op == "Add" and (n.input[0] in consts or n.input[1] in consts):
            continue
        if op in QUANTISABLE:
            roles[k] = "quantised"
            add(n.input[0])
            if op == "Add":
                add(n.input[1])
            add(tail(n.output[0]))
        elif op in PASSIVE:
            roles[k] = "passive"
            add(n.input[0])
            add(n.output[0])
            passive[n.output[0]] = n.input[0]
    return tensors, passive, roles


def _calibrate(model, tensors, data, opts: QuantizeOptions) -> dict:
    if opts.calibrate == "global":
        return {t: activation_scale(None, "global", opts.global_scale) for t in tensors}
    if data is None or len(data) == 0:
        raise FrontendError(f"--calibrate {opts.calibrate} needs calibration inputs (--dataset NAME or --calib DIR)")
    import onnx
    import onnxruntime as ort
    from onnx import helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in tensors if t not in have)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    names = [o.name for o in sess.get_outputs()]
    samples: dict[str, list] = {t: [] for t in tensors}
    for x in data:
        outs = dict(zip(names, sess.run(None, {name: x})))
        for t in tensors:
            samples[t].append(np.asarray(outs[t], np.float32).reshape(-1))
    rng = np.random.default_rng(0)
    scales = {}
    for t in tensors:
        v = np.concatenate(samples[t])
        if v.size > MAX_SAMPLES:
            v = rng.choice(v, MAX_SAMPLES, replace=False)
        scales[t] = activation_scale(v, opts.calibrate, opts.global_scale)
    return scales


def quantize_model(model, opts: QuantizeOptions, data=None):
    """The QDQ model of the float ``model`` (an ``onnx.ModelProto``); ``data``: calibration inputs, each
    one array for the model's first input."""
    from onnx import helper, numpy_helper
    opts.check()
    g = model.graph
    if len(g.input) - len({t.name for t in g.initializer} & {i.name for i in g.input}) != 1:
        raise FrontendError("quantize: the model must have exactly one input")
    tensors, passive, roles = _plan(model, opts)
    scales = _calibrate(model, tensors, data, opts)
    for out, src in passive.items():          # passive ops keep their input's scale (in graph order)
        scales[out] = scales.get(src, scales[out])
    inits = {t.name: t for t in g.initializer}
    new_inits, weight_q = [], {}
    for k, n in enumerate(g.node):
        if roles.get(k) != "quantised" or n.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
        q, s = _weight_q(w, opts.weight_scale)
        weight_q[n.input[1]] = (q, s)
        if len(n.input) > 2 and n.input[2]:
            b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float64)
            acc = scales[n.input[0]] * s
            weight_q[n.input[2]] = (np.round(b / acc).astype(np.int32), acc)
    nodes, rename = [], {}
    graph_inputs = {i.name for i in g.input}
    zp = "vtasim_q_zero"
    new_inits.append(numpy_helper.from_array(np.array(0, np.int8), zp))
    for name, (q, s) in weight_q.items():
        new_inits += [numpy_helper.from_array(q, f"{name}_q"), numpy_helper.from_array(np.array(s, np.float32),
                                                                                       f"{name}_scale")]
        if q.dtype == np.int32:
            new_inits.append(numpy_helper.from_array(np.array(0, np.int32), f"{name}_zero"))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale",
                                                           f"{name}_zero" if q.dtype == np.int32 else zp],
                                      [f"{name}_dq"], name=f"{name}_dequantize"))
        rename[name] = f"{name}_dq"
    for t in tensors:
        s_name = f"{t}_act_scale"
        new_inits.append(numpy_helper.from_array(np.array(scales[t], np.float32), s_name))
        src = t if t in graph_inputs else f"{t}_float"
        if t not in graph_inputs:
            rename[("out", t)] = src
        nodes.append(helper.make_node("QuantizeLinear", [src, s_name, zp], [f"{t}_q"], name=f"{t}_quantize"))
        dq_out = f"{t}_dq" if t in graph_inputs else t
        nodes.append(helper.make_node("DequantizeLinear", [f"{t}_q", s_name, zp], [dq_out], name=f"{t}_dequantize"))
        if t in graph_inputs:
            rename[t] = dq_out
    out_nodes = []
    for n in g.node:
        m = helper.make_node(n.op_type, [rename.get(i, i) for i in n.input],
                             [rename.get(("out", o), o) for o in n.output], name=n.name, domain=n.domain)
        m.attribute.extend(n.attribute)
        out_nodes.append(m)
    final = _toposort(nodes + out_nodes, {i.name for i in g.input} | {t.name for t in g.initializer}
                      | {t.name for t in new_inits})
    used = {i for n in final for i in n.input}
    kept_inits = [t for t in g.initializer if t.name in used]
    graph = helper.make_graph(final, g.name, list(g.input), list(g.output), kept_inits + new_inits)
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(13, _opset(model)))],
                            producer_name="vtasim.quantize")
    out.ir_version = model.ir_version
    n_w = sum(1 for q, _ in weight_q.values() if q.dtype == np.int8)
    opts.notes.append(f"quantize: {len(tensors)} activation(s) ({opts.calibrate}), {n_w} weight(s) "
                      f"({opts.weight_scale}), {sum(1 for r in roles.values() if r == 'float')} conv(s) kept float")
    return out, scales


def _toposort(nodes: list, available: set) -> list:
    """Nodes in an order where each one's inputs are made before it (Kahn's algorithm, stable)."""
    waiting = {}
    ready, out = [], []
    for k, n in enumerate(nodes):
        missing = {i for i in n.input if i and i not in available}
        waiting[k] = missing
    made: dict[str, list] = {}
    for k, miss in waiting.items():
        for i in miss:
            made.setdefault(i, []).append(k)
        if not miss:
            ready.append(k)
    import heapq
    heapq.heapify(ready)
    while ready:
        k = heapq.heappop(ready)
        out.append(nodes[k])
        for o in nodes[k].output:
            for j in made.pop(o, []):
                waiting[j].discard(o)
                if not waiting[j]:
                    heapq.heappush(ready, j)
    if len(out) != len(nodes):
        raise FrontendError("quantize: the graph has a cycle or an undefined value")
    return out


def _opset(model) -> int:
    return next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), 13)


def layerwise_ties(path, net, feeds: list) -> dict:
    """Each VTA region fed onnxruntime's own input tensor, its output against onnxruntime's: how many
    outputs differ, how many requantisations were exact ties (``acc * m`` ending in .5, where VTA's
    round-half-up and onnxruntime's round-half-even part), and how many differ off a tie.  ``net`` is
    built with ``combine_parallel=False`` (a combined region's output is no tensor of the model)."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    from vtasim.compiler.frontend.host_ops import qconv_acc, qdense_acc
    m = onnx.load(str(path))
    names = sorted({v for n in net.graph.nodes if n.target == "vta" for v in (n.inputs[0], n.outputs[0])})
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in names if t not in have)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # the Q tensors as written
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    total = {"outputs": 0, "differ": 0, "ties": 0, "off_tie": 0, "regions": 0}
    for feed in feeds:
        vals = dict(zip(outs, sess.run(None, feed)))
        for n in net.graph.nodes:
            if n.target != "vta":
                continue
            x, want = vals[n.inputs[0]], vals[n.outputs[0]]
            got, _ = net.regions[n.name].run(x, engine="reference")
            a = n.attrs
            acc = (qconv_acc if n.op == "qconv" else qdense_acc)(n, x)
            mult = np.asarray(a["x_scale"], np.float64) * np.asarray(a["w_scale"], np.float64) / a["y_scale"]
            frac = np.abs(acc * (mult.reshape(1, -1, *([1] * (acc.ndim - 2))) if np.ndim(mult) else mult) % 1 - 0.5)
            tie = frac < 1e-9
            diff = got.astype(np.int64) != want.astype(np.int64)
            total["outputs"] += diff.size
            total["differ"] += int(diff.sum())
            total["ties"] += int(tie.sum())
            total["off_tie"] += int((diff & ~tie).sum())
            total["regions"] += 1
    return total
