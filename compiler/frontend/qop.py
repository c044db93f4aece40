"""QOperator-format ops (QLinearConv, QGemm, QLinearMatMul, QLinearAdd, QLinearGlobalAveragePool, QLinearSigmoid) ->
the composite ops of :mod:`compiler.frontend.composite`, so both ONNX quantisation formats share one
path after import."""

from __future__ import annotations

import numpy as np

from compiler import qnn
from compiler.frontend.composite import qadd_node, qconv_node, qdense_node, qparam
from compiler.frontend.errors import UnsupportedModel
from compiler.frontend.graph import Graph, Node

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
            if len(shape) != 2:
                problems.append(f"{w}: input `{ins[0]}` of shape {tuple(shape)} ({n.op} is supported on 2-D "
                                f"(N, K) inputs only)")
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
            nodes.append(qdense_node(n.name, w, ins[0], n.outputs[0], np.ascontiguousarray(weight), bias, xs, xz,
                                     ws, wz, ys, yz, g.consts[yz_name].dtype,
                                     x_dtype=g.consts[ins[2]].dtype))
        elif n.op == "QLinearAdd":
            vals = [_c(g, ins[k], w, problems, what) for k, what in
                    ((1, "A_scale"), (2, "A_zero_point"), (4, "B_scale"), (5, "B_zero_point"), (6, "C_scale"),
                     (7, "C_zero_point"))]
            if any(v is None for v in vals):
                continue
            nodes.append(qadd_node(n.name, w, ins[0], ins[3], n.outputs[0], *vals, g.consts[ins[7]].dtype))
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
        elif n.op == "QLinearSigmoid":     # com.microsoft: a per-tensor activation -> the same table as QDQ
            vals = [_c(g, _arg(ins, k), w, problems, what) for k, what in
                    ((1, "X_scale"), (2, "X_zero_point"), (3, "Y_scale"), (4, "Y_zero_point"))]
            if any(v is None for v in vals):
                continue
            xdt, ydt = g.consts[ins[2]].dtype, g.consts[ins[4]].dtype
            table = qnn.lut_table("sigmoid", *vals, xdt.name, ydt.name, rounding="half_even")
            nodes.append(Node("qlut", [ins[0]], list(n.outputs), dict(table=table, fn="sigmoid", x_dtype=xdt),
                              n.name, w))
        else:
            nodes.append(n)
    if problems:
        raise UnsupportedModel(problems)
    g.nodes = nodes
    return g
