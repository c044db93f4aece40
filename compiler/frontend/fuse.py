"""Operator fusion on QDQ graphs (Relay's FuseOps + FakeQuantizationToInteger, in one pass).

Each ``QuantizeLinear`` is matched backwards against the patterns below; a match becomes one
composite op (:mod:`vtasim.compiler.frontend.composite`) that reads and writes the quantised tensors, so
the float ops between the ``DequantizeLinear`` and the ``QuantizeLinear`` disappear:

* ``DQ(x), DQ(W), [DQ(b)] -> Conv -> [Relu | Clip] -> Q``           -> ``qconv`` (bias, requantise, ReLU fused)
* ``DQ(x), DQ(W), [DQ(b)] -> ConvTranspose -> [Relu | Clip] -> Q``  -> ``qconv_transpose`` (per-tensor weights)
* ``DQ(x), DQ(W), [DQ(b)] -> Gemm | MatMul -> [Relu | Clip] -> Q``  -> ``qdense`` (a 3-d MatMul input
  (B, S, K) becomes one dense over its B*S rows between two reshapes: a transformer's linear layers)
* ``DQ(a), DQ(b) -> Add -> [Relu] -> Q``                            -> ``qadd`` (residual add)
* ``DQ(x) -> GlobalAveragePool -> Q``                               -> ``qgap``
* ``DQ(x) -> Sigmoid | Tanh | HardSwish | HardSigmoid | LeakyRelu | x*Sigmoid(x) -> Q`` -> ``qlut``
  (int8 table)
* ``DQ(x) -> MaxPool | Flatten | Reshape | Relu | Transpose | Squeeze | Unsqueeze | Slice | Gather -> Q``
  with the same scale and zero point -> the op on the integers (passive ops: max-pool and ReLU against
  the zero point, no requantisation).

Intermediate float values must have one consumer; anything that does not match stays as it is
and runs on the host in float.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler import qnn
from vtasim.compiler.frontend.composite import qadd_node, qconv_node, qdense_node, qparam
from vtasim.compiler.frontend.graph import Graph, Node

__all__ = ["fuse_ops", "lut_fn"]

_LUT = {"Sigmoid": "sigmoid", "Tanh": "tanh", "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid",
        "LeakyRelu": "leaky_relu"}
_PASSIVE = ("MaxPool", "Flatten", "Reshape", "Relu", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather")


def lut_fn(node: Node, fn: str):
    """The float function a table samples: :mod:`vtasim.compiler.qnn`'s by name (sigmoid, tanh, silu); the hard
    activations, which qnn does not name, here - HardSigmoid with the node's alpha and beta."""
    if fn == "hardswish":
        return lambda x: x * np.clip(x / 6 + 0.5, 0, 1)
    if fn == "hardsigmoid":
        alpha, beta = float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5))
        return lambda x: np.clip(alpha * x + beta, 0, 1)
    if fn == "leaky_relu":
        alpha = float(node.attrs.get("alpha", 0.01))
        return lambda x: np.where(x >= 0, x, alpha * x)
    return fn


class _Ctx:
    def __init__(self, g: Graph):
        self.g, self.prod, self.use = g, g.producers(), g.consumers()
        self.dead: set = set()

    def single(self, v: str) -> bool:
        return v not in self.g.outputs and len(self.use.get(v, [])) == 1

    def dq(self, v: str, per_channel: bool = False):
        """(quantised value, scale, zero point, dtype) when ``v`` is a DequantizeLinear output with constant
        parameters, else None."""
        n = self.prod.get(v)
        if n is None or n.op != "DequantizeLinear":
            return None
        s = self.g.const(n.inputs[1])
        z = self.g.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if s is None or (len(n.inputs) > 2 and n.inputs[2] and z is None):
            return None
        q = n.inputs[0]
        dtype = z.dtype if z is not None else (self.g.const(q).dtype if q in self.g.consts else np.uint8)
        try:
            return (q, qparam(s, n.where, per_channel), qparam(z if z is not None else np.zeros((), dtype), n.where,
                                                                per_channel), np.dtype(dtype))
        except Exception:   # noqa: BLE001 - not a pattern we fuse
            return None

    def const_dq(self, v: str, per_channel: bool = True):
        got = self.dq(v, per_channel)
        if got is None or got[0] not in self.g.consts:
            return None
        return (self.g.consts[got[0]],) + got[1:]


def _activation(ctx: _Ctx, v: str):
    """(value before the activation, act) walking back over one Relu/Clip with constant bounds."""
    n = ctx.prod.get(v)
    if n is None or not ctx.single(v):
        return v, None, None
    if n.op == "Relu":
        return n.inputs[0], "relu", n
    if n.op == "Clip":
        lo = n.inputs[1] if len(n.inputs) > 1 else ""
        hi = n.inputs[2] if len(n.inputs) > 2 else ""
        if (lo and lo not in ctx.g.consts) or (hi and hi not in ctx.g.consts):
            return v, None, None
        lo_v = float(ctx.g.consts[lo]) if lo else n.attrs.get("min")
        hi_v = float(ctx.g.consts[hi]) if hi else n.attrs.get("max")
        return n.inputs[0], ("clip", lo_v, hi_v), n
    return v, None, None


def _bias(ctx: _Ctx, name: str, acc_scale, where: str):
    """The bias as int32 in the accumulator's scale (``acc_scale`` = x_scale * w_scale)."""
    if not name:
        return None
    got = ctx.const_dq(name)
    if got is not None:
        q, s, z, _ = got
        if np.allclose(np.asarray(s, np.float64), acc_scale, rtol=1e-6, atol=0) and not np.any(z):
            return q.astype(np.int32)
        real = (q.astype(np.float64) - z) * s
    elif name in ctx.g.consts:
        real = ctx.g.consts[name].astype(np.float64)
    else:
        return False
    return np.round(real / acc_scale).astype(np.int32)


def _match_gemm_like(ctx: _Ctx, q: Node, ys, yz, ydt):
    pre, act, act_node = _activation(ctx, q.inputs[0])
    p = ctx.prod.get(pre)
    if p is None or p.op not in ("Conv", "ConvTranspose", "Gemm", "MatMul") or not ctx.single(pre):
        return None
    x = ctx.dq(p.inputs[0])
    w = ctx.const_dq(p.inputs[1])
    if x is None or w is None:
        return None
    x_shape = ctx.g.shapes.get(p.inputs[0], (0, 0))
    if p.op == "MatMul" and len(x_shape) not in (2, 3):
        return None               # a 4-d batched MatMul stays a float op on the host
    xq, xs, xz, xdt = x
    wq, ws, wz, _ = w
    if p.op == "ConvTranspose" and (np.ndim(ws) or np.ndim(wz)):
        return None               # per-channel scales run along ConvTranspose's axis 1: left in float
    acc_scale = np.asarray(xs, np.float64) * np.asarray(ws, np.float64)
    if p.op == "Gemm":
        at = p.attrs
        if at.get("transA", 0) or at.get("alpha", 1.0) != 1.0 or at.get("beta", 1.0) != 1.0 or wq.ndim != 2:
            return None
        weight = wq if at.get("transB", 0) else wq.T
    elif p.op == "MatMul":
        if wq.ndim != 2:
            return None
        weight = wq.T
    else:
        weight = wq
    bias = _bias(ctx, p.inputs[2] if len(p.inputs) > 2 else "", acc_scale, p.where)
    if bias is False:
        return None
    if p.op in ("Conv", "ConvTranspose"):
        node = qconv_node(p.name, p.where, xq, q.outputs[0], wq, bias, p.attrs, xs, xz, ws, wz, ys, yz, ydt, act,
                          x_dtype=xdt, op="qconv" if p.op == "Conv" else "qconv_transpose")
    elif len(x_shape) == 3:       # (B, S, K) @ (K, O): one dense over the B*S rows, between two reshapes
        return _rows_dense(ctx, p, q, xq, x_shape, weight, bias, (xs, xz, ws, wz, ys, yz, ydt, act, xdt)), \
            [p] + ([act_node] if act_node else [])
    else:
        node = qdense_node(p.name, p.where, xq, q.outputs[0], np.ascontiguousarray(weight), bias, xs, xz, ws, wz,
                           ys, yz, ydt, act, x_dtype=xdt)
    return node, [p] + ([act_node] if act_node else [])


def _rows_dense(ctx: _Ctx, p: Node, q: Node, xq: str, x_shape, weight, bias, params) -> list:
    xs, xz, ws, wz, ys, yz, ydt, act, xdt = params
    g = ctx.g
    b, s, k = x_shape
    o = weight.shape[0]
    flat, flat_out = g.fresh(f"{p.name}_rows"), g.fresh(f"{p.name}_rows_out")
    to2, to3 = g.fresh(f"{p.name}_shape2"), g.fresh(f"{p.name}_shape3")
    g.consts[to2], g.consts[to3] = np.array([b * s, k], np.int64), np.array([b, s, o], np.int64)
    g.shapes[flat], g.shapes[flat_out] = (b * s, k), (b * s, o)
    dense = qdense_node(p.name, p.where, flat, flat_out, np.ascontiguousarray(weight), bias, xs, xz, ws, wz, ys, yz,
                        ydt, act, x_dtype=xdt)
    return [Node("Reshape", [xq, to2], [flat], {}, f"{p.name}_rows", p.where), dense,
            Node("Reshape", [flat_out, to3], list(q.outputs), {}, f"{p.name}_unrows", p.where)]


def _match_add(ctx: _Ctx, q: Node, ys, yz, ydt):
    pre, act, act_node = _activation(ctx, q.inputs[0])
    if act not in (None, "relu"):
        return None
    p = ctx.prod.get(pre)
    if p is None or p.op != "Add" or not ctx.single(pre):
        return None
    a, b = ctx.dq(p.inputs[0]), ctx.dq(p.inputs[1])
    if a is None or b is None or a[0] in ctx.g.consts or b[0] in ctx.g.consts:
        return None
    sa, sb = ctx.g.shapes.get(p.inputs[0]), ctx.g.shapes.get(p.inputs[1])
    if sa is None or sa != sb:
        return None
    node = qadd_node(p.name, p.where, a[0], b[0], q.outputs[0], a[1], a[2], b[1], b[2], ys, yz, ydt, act)
    return node, [p] + ([act_node] if act_node else [])


def _match_unary(ctx: _Ctx, q: Node, ys, yz, ydt):
    p = ctx.prod.get(q.inputs[0])
    if p is None or not ctx.single(q.inputs[0]):
        return None
    silu = None
    if p.op == "Mul" and len(p.inputs) == 2:       # x * Sigmoid(x)
        for k in (0, 1):
            s = ctx.prod.get(p.inputs[1 - k])
            if s is not None and s.op == "Sigmoid" and s.inputs[0] == p.inputs[k] and ctx.single(p.inputs[1 - k]):
                silu = s
                src = p.inputs[k]
    if silu is None and p.op not in _LUT and p.op not in ("GlobalAveragePool",) + _PASSIVE:
        return None
    src = src if silu is not None else p.inputs[0]
    x = ctx.dq(src)
    if x is None or x[0] in ctx.g.consts:
        return None
    xq, xs, xz, xdt = x
    if silu is not None or p.op in _LUT:
        fn = "silu" if silu is not None else _LUT[p.op]
        # the QuantizeLinear the table replaces rounds half to even
        table = qnn.lut_table(lut_fn(p, fn), xs, xz, ys, yz, np.dtype(xdt).name, np.dtype(ydt).name,
                              rounding="half_even")
        node = Node("qlut", [xq], [q.outputs[0]], dict(table=table, fn=fn, x_dtype=xdt), p.name, p.where)
        return node, [p] + ([silu] if silu is not None else [])
    if p.op == "GlobalAveragePool":
        node = Node("qgap", [xq], [q.outputs[0]], dict(x_scale=xs, x_zp=xz, y_scale=ys, y_zp=yz, y_dtype=ydt),
                    p.name, p.where)
        return node, [p]
    if not (np.isclose(xs, ys, rtol=1e-7) and xz == yz and xdt == ydt):
        return None
    if p.op == "Relu":
        node = Node("Clip", [xq], [q.outputs[0]], {"min": int(xz)}, p.name, p.where)
    else:
        node = Node(p.op, [xq] + p.inputs[1:], [q.outputs[0]], dict(p.attrs), p.name, p.where)
    return node, [p]


def fuse_ops(g: Graph) -> Graph:
    ctx = _Ctx(g)
    out, fused = [], {}
    for n in g.nodes:
        if n.op != "QuantizeLinear" or id(n) in ctx.dead:
            out.append(n)
            continue
        s, z = g.const(n.inputs[1]), g.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if s is None or z is None or s.size != 1 or z.size != 1:
            out.append(n)
            continue
        ys, yz, ydt = float(s.reshape(-1)[0]), int(z.reshape(-1)[0]), z.dtype
        got = None
        for match in (_match_gemm_like, _match_add, _match_unary):
            got = match(ctx, n, ys, yz, ydt)
            if got is not None:
                break
        if got is None:
            out.append(n)
            continue
        node, removed = got
        ctx.dead.update(id(r) for r in removed)
        for made in node if isinstance(node, list) else [node]:
            out.append(made)
            if made.op != "Reshape":
                fused[made.op] = fused.get(made.op, 0) + 1
    g.nodes = [n for n in out if id(n) not in ctx.dead]
    if fused:
        g.notes.append("fuse_ops: " + ", ".join(f"{v} {k}" for k, v in sorted(fused.items())))
    return g
