"""QOperator-format ops -> the composite ops of :mod:`vtasim.compiler.frontend.composite`, so both ONNX
quantisation formats share one path after import.

* QLinearConv, QGemm, QLinearMatMul, QLinearAdd, QLinearMul, QLinearGlobalAveragePool: composite ops
  (``qconv``, ``qdense``, ``qadd``, ``qmul``, ``qgap``);
* QLinearSigmoid, QLinearLeakyRelu: a 256-entry table (``qlut``), as onnxruntime builds one;
* QLinearConcat: each input whose scale or zero point differs from the output's is requantised by a
  table, then the integers are concatenated;
* QLinearAveragePool, QLinearSoftmax: dequantise, the float op, quantise (onnxruntime computes them
  in float too; the result agrees to its float rounding).
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler import qnn
from vtasim.compiler.frontend.composite import qadd_node, qconv_node, qdense_node, qparam
from vtasim.compiler.frontend.errors import UnsupportedModel
from vtasim.compiler.frontend.graph import Graph, Node

__all__ = ["canonicalise_qoperator"]


def _c(g: Graph, name: str, where: str, problems: list, what: str, per_channel=False):
    if not name:          # an optional zero point left out: listed, never a silently dropped node
        problems.append(f"{where}: {what} is absent (give it explicitly)")
        return None
    v = g.const(name)
    if v is None:
        problems.append(f"{where}: {what} `{name}` is not a constant")
        return None
    try:
        return qparam(v, f"{where}: {what}", per_channel) if v.size == 1 or per_channel else v
    except Exception as e:   # noqa: BLE001 - reported with the others
        problems.append(str(e))
        return None


def _weight(g, name, where, problems):
    w = g.const(name)
    if w is None:
        problems.append(f"{where}: weight `{name}` is not a constant (only constant weights are supported)")
    return w


def _arg(ins, k):
    return ins[k] if len(ins) > k else ""


def _float_island(g: Graph, n: Node, op: str, attrs: dict, x: str, xs: str, xz: str, ys: str, yz: str) -> list:
    """``DequantizeLinear -> op -> QuantizeLinear`` standing for a QOperator op computed in float."""
    xf, yf = g.fresh(f"{n.name}_dq"), g.fresh(f"{n.name}_f")
    return [Node("DequantizeLinear", [x, xs, xz], [xf], {}, f"{n.name}_dq", n.where),
            Node(op, [xf], [yf], attrs, n.name, n.where),
            Node("QuantizeLinear", [yf, ys, yz], list(n.outputs), {}, f"{n.name}_q", n.where)]


def _lut_node(g, n, fn, vals, x, xdt, ydt, name=None):
    table = qnn.lut_table(fn, *vals, xdt.name, ydt.name, rounding="half_even", precision="float32")
    return Node("qlut", [x], list(n.outputs) if name is None else [name],
                dict(table=table, fn=getattr(fn, "__name__", fn), x_dtype=xdt), name or n.name, n.where)


def _leaky(alpha):
    def leaky_relu(x):
        return np.where(x >= 0, x, alpha * x)
    return leaky_relu


def requantize(x):
    return x


def _concat(g, n, problems):
    """QLinearConcat(Y_scale, Y_zp, (X, X_scale, X_zp)...) -> tables where the parameters differ, Concat."""
    ins, w = n.inputs, n.where
    ys, yz = _c(g, ins[0], w, problems, "Y_scale"), _c(g, ins[1], w, problems, "Y_zero_point")
    if (len(ins) - 2) % 3 or len(ins) < 5:
        problems.append(f"{w}: QLinearConcat takes Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples")
        return []
    if ys is None or yz is None:
        return []
    ydt, out, parts = g.consts[ins[1]].dtype, [], []
    for k in range(2, len(ins), 3):
        x, xs, xz = ins[k], _c(g, ins[k + 1], w, problems, "X_scale"), _c(g, ins[k + 2], w, problems, "X_zero_point")
        if xs is None or xz is None:
            return []
        xdt = g.consts[ins[k + 2]].dtype
        if np.isclose(xs, ys, rtol=1e-7) and xz == yz and xdt == ydt:
            parts.append(x)
            continue
        name = g.fresh(f"{n.name}_in{k // 3}")
        out.append(_lut_node(g, n, requantize, (xs, xz, ys, yz), x, xdt, ydt, name))
        parts.append(name)
    out.append(Node("Concat", parts, list(n.outputs), {"axis": int(n.attrs.get("axis", 1))}, n.name, w))
    return out


def canonicalise_qoperator(g: Graph) -> Graph:
    problems, nodes = [], []
    for n in g.nodes:
        ins, w = n.inputs, n.where
        if n.op == "QLinearConv":
            xs, xz = _c(g, ins[1], w, problems, "x_scale"), _c(g, ins[2], w, problems, "x_zero_point")
            wt = _weight(g, ins[3], w, problems)
            ws, wz = _c(g, ins[4], w, problems, "w_scale", True), _c(g, ins[5], w, problems, "w_zero_point", True)
            ys, yz = _c(g, ins[6], w, problems, "y_scale"), _c(g, ins[7], w, problems, "y_zero_point")
            bias = g.const(_arg(ins, 8)) if _arg(ins, 8) else None
            if any(v is None for v in (xs, xz, wt, ws, wz, ys, yz)):
                continue
            ydt = g.consts[ins[7]].dtype
            nodes.append(qconv_node(n.name, w, ins[0], n.outputs[0], wt, bias, n.attrs, xs, xz, ws, wz, ys, yz, ydt,
                                    x_dtype=g.consts[ins[2]].dtype))
        elif n.op in ("QGemm", "QLinearMatMul"):
            gemm = n.op == "QGemm"
            shape = g.shapes.get(ins[0]) or g.inputs.get(ins[0], ((0, 0), None))[0]
            if len(shape) != 2 and not (len(shape) == 3 and not gemm):
                problems.append(f"{w}: input `{ins[0]}` of shape {tuple(shape)} ({n.op} is supported on 2-D "
                                f"(N, K) inputs{'' if gemm else ' and 3-D (B, S, K) ones'} only)")
                continue
            xs, xz = _c(g, ins[1], w, problems, "a_scale"), _c(g, ins[2], w, problems, "a_zero_point")
            wt = _weight(g, ins[3], w, problems)
            ws, wz = _c(g, ins[4], w, problems, "b_scale", True), _c(g, ins[5], w, problems, "b_zero_point", True)
            if gemm:
                bias = g.const(_arg(ins, 6)) if _arg(ins, 6) else None
                ys_name, yz_name = _arg(ins, 7), _arg(ins, 8)
                if n.attrs.get("transA", 0) or n.attrs.get("alpha", 1.0) != 1.0:
                    problems.append(f"{w}: transA/alpha other than 0/1.0 are not supported")
                    continue
                if not ys_name:
                    problems.append(f"{w}: QGemm with a float output (no y_scale) is not supported")
                    continue
            else:
                bias, ys_name, yz_name = None, ins[6], ins[7]
            ys, yz = _c(g, ys_name, w, problems, "y_scale"), _c(g, yz_name, w, problems, "y_zero_point")
            if any(v is None for v in (xs, xz, wt, ws, wz, ys, yz)):
                continue
            if wt.ndim != 2:
                problems.append(f"{w}: weight of shape {wt.shape} (2-D expected)")
                continue
            weight = wt if (gemm and n.attrs.get("transB", 0)) else wt.T
            x_in, y_out, wrap = ins[0], n.outputs[0], []
            if len(shape) == 3:       # (B, S, K): one dense over the B*S rows between two reshapes
                b, s, k = shape
                x_in, y_out = g.fresh(f"{n.name}_rows"), g.fresh(f"{n.name}_rows_out")
                to2, to3 = g.fresh(f"{n.name}_shape2"), g.fresh(f"{n.name}_shape3")
                g.consts[to2] = np.array([b * s, k], np.int64)
                g.consts[to3] = np.array([b, s, weight.shape[0]], np.int64)
                g.shapes[x_in], g.shapes[y_out] = (b * s, k), (b * s, weight.shape[0])
                nodes.append(Node("Reshape", [ins[0], to2], [x_in], {}, f"{n.name}_rows", w))
                wrap = [Node("Reshape", [y_out, to3], list(n.outputs), {}, f"{n.name}_unrows", w)]
            nodes.append(qdense_node(n.name, w, x_in, y_out, np.ascontiguousarray(weight), bias, xs, xz,
                                     ws, wz, ys, yz, g.consts[yz_name].dtype,
                                     x_dtype=g.consts[ins[2]].dtype))
            nodes += wrap
        elif n.op in ("QLinearAdd", "QLinearMul"):
            vals = [_c(g, ins[k], w, problems, what) for k, what in
                    ((1, "A_scale"), (2, "A_zero_point"), (4, "B_scale"), (5, "B_zero_point"), (6, "C_scale"),
                     (7, "C_zero_point"))]
            if any(v is None for v in vals):
                continue
            nodes.append(qadd_node(n.name, w, ins[0], ins[3], n.outputs[0], *vals, g.consts[ins[7]].dtype,
                                   op="qadd" if n.op == "QLinearAdd" else "qmul"))
        elif n.op == "QLinearConcat":
            nodes += _concat(g, n, problems)
        elif n.op in ("QLinearAveragePool", "QLinearSoftmax"):
            vals = [_c(g, _arg(ins, k), w, problems, what) for k, what in
                    ((1, "x_scale"), (2, "x_zero_point"), (3, "y_scale"), (4, "y_zero_point"))]
            if any(v is None for v in vals):
                continue
            attrs = {k: v for k, v in n.attrs.items() if k not in ("channels_last", "opset")}
            if n.attrs.get("channels_last", 0):
                problems.append(f"{w}: channels_last=1 is not supported")
                continue
            if n.op == "QLinearSoftmax" and int(n.attrs.get("opset", 13)) < 13:
                attrs = {"axis": attrs.get("axis", 1), "coerce_2d": 1}
            op = "AveragePool" if n.op == "QLinearAveragePool" else "Softmax"
            nodes += _float_island(g, n, op, attrs, ins[0], ins[1], ins[2], ins[3], ins[4])
        elif n.op == "QLinearGlobalAveragePool":
            vals = [_c(g, ins[k], w, problems, what) for k, what in
                    ((1, "x_scale"), (2, "x_zero_point"), (3, "y_scale"), (4, "y_zero_point"))]
            if any(v is None for v in vals):
                continue
            if n.attrs.get("channels_last", 0):
                problems.append(f"{w}: channels_last=1 is not supported")
                continue
            xs, xz, ys, yz = vals
            nodes.append(Node("qgap", [ins[0]], list(n.outputs),
                              dict(x_scale=xs, x_zp=xz, y_scale=ys, y_zp=yz, y_dtype=g.consts[ins[4]].dtype),
                              n.name, w))
        elif n.op in ("QLinearSigmoid", "QLinearLeakyRelu"):   # com.microsoft: per-tensor -> a table as QDQ
            vals = [_c(g, _arg(ins, k), w, problems, what) for k, what in
                    ((1, "X_scale"), (2, "X_zero_point"), (3, "Y_scale"), (4, "Y_zero_point"))]
            if any(v is None for v in vals):
                continue
            xdt, ydt = g.consts[ins[2]].dtype, g.consts[ins[4]].dtype
            fn = "sigmoid" if n.op == "QLinearSigmoid" else _leaky(float(n.attrs.get("alpha", 0.01)))
            nodes.append(_lut_node(g, n, fn, vals, ins[0], xdt, ydt))
        else:
            nodes.append(n)
    if problems:
        raise UnsupportedModel(problems)
    g.nodes = nodes
    return g
