"""The front end's graph passes, each judged by onnxruntime running the same (unrewritten) model file.

* ``simplify_inference``, ``fold_constants``, ``eliminate_common_subexpr``, ``dead_code_elimination``
  on small float models: the rewrite happened (node counts, folded constants) and the outputs are
  onnxruntime's;
* ``fuse_ops`` on int8 QDQ models written by onnxruntime's ``quantize_static`` (and two hand-written
  QDQ graphs that keep an explicit ReLU / ReLU6 before the QuantizeLinear): every pattern becomes its
  composite op and the host execution stays within one LSB of onnxruntime;
* ``legalize`` names a float Sigmoid left unfused and its substitute;
* the QOperator and QDQ files of one float model fuse to the same composite ops with equal outputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vtasim.compiler.frontend import fuse, passes
from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.models._onnx import GraphBuilder, quantize, run
from vtasim.compiler.frontend.network import Network
from vtasim.compiler.frontend.onnx_import import from_onnx, load_onnx

BATCH = 8


def _ours(g, x):
    outs, _ = execute(g, {}, {next(iter(g.inputs)): x}, engine="reference")
    return outs[g.outputs[0]]


def _ort_plain(model, x):
    """onnxruntime with its graph optimisations off: the ONNX semantics of each node.  (Its extended
    level rewrites DequantizeLinear(weight) -> MatMul into a dynamically quantised MatMul, which
    quantises the activations too and moves the result by ~1%.)"""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _float_model(nodes, x_shape, inits: dict, y: str):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


# --- the float passes --------------------------------------------------------------------------------

def test_simplify_inference_folds_bn_into_conv_and_rewrites_a_lone_bn(tmp_path):
    rng = np.random.default_rng(0)
    g = GraphBuilder()
    c = g.conv("x", rng.standard_normal((6, 3, 3, 3)), rng.standard_normal(6), pad=1)
    bn1 = g.batchnorm(c, rng.uniform(0.5, 2, 6), rng.standard_normal(6), rng.standard_normal(6),
                      rng.uniform(0.3, 3, 6))
    r = g.op("Relu", [bn1])
    bn2 = g.batchnorm(r, rng.uniform(0.5, 2, 6), rng.standard_normal(6), rng.standard_normal(6),
                      rng.uniform(0.3, 3, 6))          # after a Relu: no conv to fold into
    d = g.op("Dropout", [bn2])
    y = g.op("Identity", [d])
    model = g.model("bn", "x", (3, 6, 6), y, (6, 6, 6))
    x = rng.standard_normal((BATCH, 3, 6, 6)).astype(np.float32)
    graph = from_onnx(model, batch=BATCH)
    w_before = graph.consts["conv0.w"].copy()
    out = passes.simplify_inference(graph)
    counts = out.counts()
    assert "BatchNormalization" not in counts and "Dropout" not in counts and "Identity" not in counts
    assert counts == {"Conv": 1, "Relu": 1, "Mul": 1, "Add": 1}
    conv = next(n for n in out.nodes if n.op == "Conv")
    assert conv.inputs[1] != "conv0.w" and not np.allclose(out.consts[conv.inputs[1]], w_before)
    assert any("1 batch-norm(s) folded" in n and "1 rewritten" in n for n in out.notes)
    np.testing.assert_allclose(_ours(out, x), run(model, x), rtol=1e-4, atol=1e-4)


def test_simplify_inference_rewrites_a_bn_on_2d_features():
    """BatchNorm1d after a Gemm: the scale and shift broadcast along axis 1 of (N, C), not as (C, 1, 1)."""
    rng = np.random.default_rng(20)
    g = GraphBuilder()
    h = g.gemm("x", rng.standard_normal((6, 5)), rng.standard_normal(6))
    y = g.batchnorm(h, rng.uniform(0.5, 2, 6), rng.standard_normal(6), rng.standard_normal(6), rng.uniform(0.3, 3, 6))
    model = g.model("bn1d", "x", (5,), y, (6,))
    graph = passes.simplify_inference(from_onnx(model, batch=3))
    assert graph.counts() == {"Gemm": 1, "Mul": 1, "Add": 1}
    x = rng.standard_normal((3, 5)).astype(np.float32)
    ours, ref = _ours(graph, x), run(model, x)
    assert ours.shape == ref.shape == (3, 6)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_simplify_inference_leaves_a_shared_conv_output_unfolded():
    """A conv whose output is also used elsewhere keeps its weights; its BN becomes Mul + Add."""
    rng = np.random.default_rng(1)
    g = GraphBuilder()
    c = g.conv("x", rng.standard_normal((4, 4, 1, 1)), None)
    bn = g.batchnorm(c, rng.uniform(0.5, 2, 4), rng.standard_normal(4), rng.standard_normal(4), rng.uniform(0.3, 3, 4))
    y = g.op("Add", [bn, c])
    model = g.model("shared", "x", (4, 5, 5), y, (4, 5, 5))
    graph = passes.simplify_inference(from_onnx(model, batch=2))
    assert graph.counts() == {"Conv": 1, "Mul": 1, "Add": 2}
    assert next(n for n in graph.nodes if n.op == "Conv").inputs[1] == "conv0.w"
    x = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(_ours(graph, x), run(model, x), rtol=1e-5, atol=1e-5)


def test_fold_constants_evaluates_a_constant_subgraph_but_keeps_quantised_weights():
    rng = np.random.default_rng(2)
    c1, c2, c3 = (rng.standard_normal((1, 8)).astype(np.float32) for _ in range(3))
    wq = rng.integers(-127, 128, (8, 5)).astype(np.int8)
    nodes = [helper.make_node("Mul", ["c1", "c2"], ["t"]), helper.make_node("Sub", ["t", "c3"], ["u"]),
             helper.make_node("Relu", ["u"], ["v"]), helper.make_node("Add", ["x", "v"], ["a"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
             helper.make_node("MatMul", ["a", "w"], ["y"])]
    inits = dict(c1=c1, c2=c2, c3=c3, wq=wq, ws=np.array(0.02, np.float32), wz=np.array(0, np.int8))
    model = _float_model(nodes, (4, 8), inits, "y")
    graph = passes.fold_constants(from_onnx(model))
    assert [n.op for n in graph.nodes] == ["Add", "DequantizeLinear", "MatMul"]
    np.testing.assert_allclose(graph.consts["v"], np.maximum(c1 * c2 - c3, 0), rtol=1e-6)
    assert any("evaluated 3 node(s)" in n for n in graph.notes)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(_ours(graph, x), _ort_plain(model, x), rtol=1e-5, atol=1e-5)


def test_cse_merges_identical_dequantize_and_relu_but_not_different_attributes():
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d1"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d2"]),
             helper.make_node("Relu", ["d1"], ["r1"]), helper.make_node("Relu", ["d2"], ["r2"]),
             helper.make_node("Softmax", ["r1"], ["s1"], axis=1), helper.make_node("Softmax", ["r2"], ["s2"], axis=2),
             helper.make_node("Sub", ["s1", "s2"], ["y"])]
    model = _float_model(nodes, (2, 3, 4), dict(s=np.array(0.05, np.float32), z=np.array(3, np.int8)), "y")
    graph = passes.eliminate_common_subexpr(from_onnx(model))
    assert graph.counts() == {"QuantizeLinear": 1, "DequantizeLinear": 1, "Relu": 1, "Softmax": 2, "Sub": 1}
    softmax_inputs = {n.inputs[0] for n in graph.nodes if n.op == "Softmax"}
    assert len(softmax_inputs) == 1
    assert any("merged 2 node(s)" in n for n in graph.notes)
    x = 2 * rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = _ours(graph, x)
    assert np.abs(y).max() > 0.05          # the two softmax axes differ: the output is not trivially zero
    np.testing.assert_allclose(y, run(model, x), rtol=1e-5, atol=1e-6)


def test_dead_code_elimination_removes_an_unused_branch_and_its_constants():
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("Sigmoid", ["m"], ["dead"])]
    model = _float_model(nodes, (3, 4), dict(k=np.full((3, 4), 2, np.float32)), "y")
    graph = passes.dead_code_elimination(from_onnx(model))
    assert [n.op for n in graph.nodes] == ["Relu"] and "k" not in graph.consts
    assert any("removed 2 node(s)" in n for n in graph.notes)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(_ours(graph, x), run(model, x))


# --- fuse_ops on onnxruntime-quantised QDQ models -----------------------------------------------------

def _qdq(model, path, seed=0, fmt="qdq", **kw):
    """``quantize_static`` (QDQ unless ``fmt="qop"``, int8 activations and weights, per tensor unless
    ``per_channel=True``, MinMax) with options passed through; without options the models' own :func:`quantize`."""
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])
    cal = np.random.default_rng(seed + 100).standard_normal((32, *shape)).astype(np.float32)
    if not kw:
        return quantize(model, path, cal, fmt, batch=8)
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from vtasim.compiler.frontend.models._onnx import _reader
    raw = path.with_suffix(".float.onnx")
    onnx.save(model, raw)
    kw = {"activation_type": QuantType.QInt8, "weight_type": QuantType.QInt8, **kw}
    quantize_static(str(raw), str(path), _reader("x", cal, 8),
                    quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator, **kw)
    return path


def _lsb_vs_ort(net, path, seed=7):
    """(max |ours - onnxruntime| in output LSBs, fraction of equal outputs, our output) on a batch."""
    shape = net.graph.inputs[net.input_name][0]
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    ours, _ = net.run(x, engine="reference")
    ref = run(path, x)
    lsb = float(net.graph.consts[next(n for n in net.graph.nodes if n.outputs[0] == net.graph.outputs[0]).inputs[1]])
    d = np.abs(ours.astype(np.float64) - ref) / lsb
    assert np.unique(np.round(ours / lsb)).size > 8, "the output is (nearly) constant: the check would be weak"
    return float(d.max()), float((d < 1e-3).mean()), ours


def _conv_head(rng, g, act):
    c = g.conv("x", rng.standard_normal((8, 4, 3, 3)) * 0.4, rng.standard_normal(8) * 0.2, pad=1)
    if act == "relu":
        return g.op("Relu", [c])
    if act == "relu6":
        return g.op("Clip", [c, g.const("lo", np.array(0, np.float32)), g.const("hi", np.array(6, np.float32))])
    if act == "silu":
        return g.op("Mul", [c, g.op("Sigmoid", [c])])
    if act == "HardSigmoid":
        return g.op("HardSigmoid", [c], alpha=0.3, beta=0.4)
    return g.op(act, [c])


def _net(path, cfg):
    return Network(load_onnx(path, batch=BATCH), cfg, mode="host")


@pytest.mark.parametrize("act", ["relu", "relu6"])
def test_fuse_conv_with_relu_and_relu6(act, cfg, tmp_path):
    rng = np.random.default_rng(5)
    g = GraphBuilder()
    y = _conv_head(rng, g, act)
    path = _qdq(g.model(act, "x", (4, 6, 6), y, (8, 6, 6)), tmp_path / "m.onnx")
    net = _net(path, cfg)
    assert net.graph.counts() == {"QuantizeLinear": 1, "qconv": 1, "DequantizeLinear": 1}
    worst, same, ours = _lsb_vs_ort(net, path)
    assert worst <= 1 and same > 0.95
    assert ours.min() >= 0 and (act == "relu" or ours.max() <= 6 + 1e-6)


def _hand_qdq_conv(act, rng):
    """x -> Q -> DQ -> Conv(DQ(w), DQ(b)) -> act -> Q (symmetric int8, zero point 0) -> DQ: the activation
    is not implied by the output range, so fusing it matters."""
    xs, ws, ys = 0.04, 0.01, 6.0 / 127 * 1.5
    w = rng.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8)
    b = rng.integers(-2000, 2000, 8).astype(np.int32)
    act_nodes = ([helper.make_node("Relu", ["c"], ["a"])] if act == "relu" else
                 [helper.make_node("Clip", ["c", "lo", "hi"], ["a"])])
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "z8"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "z8"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "z8"], ["wd"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "z32"], ["bd"]),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             *act_nodes,
             helper.make_node("QuantizeLinear", ["a", "ys", "z8"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "z8"], ["y"])]
    inits = dict(xs=np.array(xs, np.float32), ws=np.array(ws, np.float32), bs=np.array(xs * ws, np.float32),
                 ys=np.array(ys, np.float32), z8=np.array(0, np.int8), z32=np.array(0, np.int32), w=w, b=b,
                 lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    return _float_model(nodes, (BATCH, 4, 6, 6), inits, "y")


@pytest.mark.parametrize("act", ["relu", "relu6"])
def test_fuse_keeps_an_explicit_activation_before_quantize(act, cfg, tmp_path):
    model = _hand_qdq_conv(act, np.random.default_rng(6))
    path = tmp_path / "hand.onnx"
    onnx.save(model, path)
    net = _net(path, cfg)
    (qconv,) = [n for n in net.graph.nodes if n.op == "qconv"]
    assert qconv.attrs["act"] == ("relu" if act == "relu" else ("clip", 0.0, 6.0))
    assert "Relu" not in net.graph.counts() and "Clip" not in net.graph.counts()
    worst, same, ours = _lsb_vs_ort(net, path)
    assert worst <= 1 and same > 0.95
    ys = 6.0 / 127 * 1.5
    assert ours.min() == 0 and (act == "relu" or np.isclose(ours.max(), np.round(6 / ys) * ys))
    qconv.attrs["act"] = None            # without the activation the outputs differ: the fusion is what clips
    assert not np.array_equal(net.run(np.random.default_rng(7).standard_normal((BATCH, 4, 6, 6)).astype(np.float32),
                                      engine="reference")[0], ours)


def test_fuse_gemm_and_matmul(cfg, tmp_path):
    rng = np.random.default_rng(8)
    g = GraphBuilder()
    h = g.gemm("x", rng.standard_normal((16, 24)) * 0.3, rng.standard_normal(16) * 0.1)
    y = g.op("MatMul", [g.op("Relu", [h]), g.const("w2", (rng.standard_normal((16, 10)) * 0.3).astype(np.float32))])
    path = _qdq(g.model("mlp", "x", (24,), y, (10,)), tmp_path / "mlp.onnx")
    net = _net(path, cfg)
    assert net.graph.counts() == {"QuantizeLinear": 1, "qdense": 2, "DequantizeLinear": 1}
    worst, same, _ = _lsb_vs_ort(net, path)
    assert worst <= 1 and same > 0.9


def test_batched_matmul_with_a_constant_weight_is_one_dense_over_the_rows(cfg, tmp_path):
    """A 3-D (B, S, K) MatMul with a constant (K, O) weight becomes one qdense over the B*S rows between
    two reshapes, in both formats, within one LSB of onnxruntime."""
    rng = np.random.default_rng(21)
    g = GraphBuilder()
    y = g.op("MatMul", ["x", g.const("w", (rng.standard_normal((16, 8)) * 0.3).astype(np.float32))])
    model = g.model("bmm", "x", (3, 16), y, (3, 8))
    path = _qdq(model, tmp_path / "bmm.onnx")
    net = _net(path, cfg)
    counts = net.graph.counts()
    assert "MatMul" not in counts and counts["qdense"] == 1 and counts["Reshape"] == 2, counts
    worst, _, _ = _lsb_vs_ort(net, path)
    assert worst <= 1
    cal = np.random.default_rng(22).standard_normal((16, 3, 16)).astype(np.float32)
    qop = quantize(model, tmp_path / "bmm_qop.onnx", cal, "qop", batch=8)
    net = _net(qop, cfg)
    assert net.graph.counts()["qdense"] == 1
    worst, _, _ = _lsb_vs_ort(net, qop)
    assert worst <= 1


def test_fuse_residual_add(cfg, tmp_path):
    rng = np.random.default_rng(9)
    g = GraphBuilder()
    a = g.op("Relu", [g.conv("x", rng.standard_normal((4, 4, 3, 3)) * 0.3, None, pad=1)])
    b = g.conv(a, rng.standard_normal((4, 4, 3, 3)) * 0.3, rng.standard_normal(4) * 0.1, pad=1)
    y = g.op("Relu", [g.op("Add", [b, "x"])])
    path = _qdq(g.model("res", "x", (4, 6, 6), y, (4, 6, 6)), tmp_path / "res.onnx")
    net = _net(path, cfg)
    assert net.graph.counts() == {"QuantizeLinear": 1, "qconv": 2, "qadd": 1, "DequantizeLinear": 1}
    (add,) = [n for n in net.graph.nodes if n.op == "qadd"]
    qin = next(n for n in net.graph.nodes if n.op == "QuantizeLinear").outputs[0]
    assert qin in add.inputs            # the shortcut reads the quantised input itself
    worst, same, _ = _lsb_vs_ort(net, path)
    assert worst <= 1 and same > 0.95


def test_fuse_pool_flatten_head_runs_passive_ops_on_integers(cfg, tmp_path):
    rng = np.random.default_rng(10)
    g = GraphBuilder()
    c = g.op("Relu", [g.conv("x", rng.standard_normal((8, 4, 3, 3)) * 0.4, rng.standard_normal(8) * 0.1, pad=1)])
    p = g.op("MaxPool", [c], kernel_shape=[2, 2], strides=[2, 2])
    gap = g.op("Flatten", [g.op("GlobalAveragePool", [p])])
    fl = g.op("Flatten", [p])
    y = g.op("Add", [g.gemm(fl, rng.standard_normal((8, 72)) * 0.2, rng.standard_normal(8) * 0.1),
                     g.gemm(gap, rng.standard_normal((8, 8)) * 0.5, np.zeros(8))])
    path = _qdq(g.model("head", "x", (4, 6, 6), y, (8,)), tmp_path / "head.onnx")
    net = _net(path, cfg)
    counts = net.graph.counts()
    assert counts == {"QuantizeLinear": 1, "qconv": 1, "MaxPool": 1, "qgap": 1, "Flatten": 2, "qdense": 2,
                      "qadd": 1, "DequantizeLinear": 1}, counts
    prod = net.graph.producers()
    for n in net.graph.nodes:
        if n.op in ("MaxPool", "Flatten", "qgap"):
            assert prod[n.inputs[0]].op != "DequantizeLinear"      # reads integers, not dequantised floats
    worst, same, _ = _lsb_vs_ort(net, path)
    assert worst <= 1 and same > 0.9


_LUT_CASES = {"Sigmoid": {}, "Tanh": {"op_types_to_quantize": ["Conv", "Tanh"]},
              "HardSwish": {"op_types_to_quantize": ["Conv", "HardSwish"]},
              "HardSigmoid": {"op_types_to_quantize": ["Conv", "HardSigmoid"]},
              # onnxruntime puts a QuantizeLinear between Sigmoid and Mul; with both left in float the
              # whole x * Sigmoid(x) sits between one DequantizeLinear and the next QuantizeLinear
              "silu": {"nodes_to_exclude": ["sigmoid0", "mul0"]}}


@pytest.mark.parametrize("act", list(_LUT_CASES))
def test_fuse_activations_to_lookup_tables(act, cfg, tmp_path):
    rng = np.random.default_rng(11)
    g = GraphBuilder()
    y = _conv_head(rng, g, act)
    if act == "silu":                     # a quantised consumer after the float SiLU
        y = g.conv(y, rng.standard_normal((8, 8, 1, 1)) * 0.3, None)
    path = _qdq(g.model(act, "x", (4, 6, 6), y, (8, 6, 6)), tmp_path / f"{act}.onnx", **_LUT_CASES[act])
    net = _net(path, cfg)
    counts = net.graph.counts()
    (lut,) = [n for n in net.graph.nodes if n.op == "qlut"]
    assert lut.attrs["fn"] == act.lower()
    assert not {"Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Mul"} & set(counts), counts
    assert any(f"{act.lower()} runs as a 256-entry int8 lookup table" in n for n in net.notes)
    worst, same, _ = _lsb_vs_ort(net, path)
    assert worst <= 1 and same > 0.95


def test_legalize_names_an_unfused_float_sigmoid_and_its_substitute(cfg, tmp_path):
    rng = np.random.default_rng(12)
    g = GraphBuilder()
    y = _conv_head(rng, g, "Sigmoid")
    path = _qdq(g.model("sig", "x", (4, 6, 6), y, (8, 6, 6)), tmp_path / "sig.onnx", nodes_to_exclude=["sigmoid0"])
    net = _net(path, cfg)
    assert net.graph.counts().get("Sigmoid") == 1 and "qlut" not in net.graph.counts()
    (note,) = [n for n in net.notes if n.startswith("legalize:")]
    assert "Sigmoid is not supported on VTA" in note and passes.SUBSTITUTES["Sigmoid"] in note
    x = rng.standard_normal((BATCH, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(net.run(x, engine="reference")[0], run(path, x), rtol=1e-5, atol=1e-6)


def test_fuse_ops_leaves_unmatched_patterns_in_float(cfg, tmp_path):
    """A Q whose producer matches no pattern (a float Softmax) stays; fusion changes nothing it cannot own."""
    rng = np.random.default_rng(13)
    g = GraphBuilder()
    y = g.op("Softmax", [_conv_head(rng, g, "relu")], axis=1)
    path = _qdq(g.model("sm", "x", (4, 6, 6), y, (8, 6, 6)), tmp_path / "sm.onnx",
                op_types_to_quantize=["Conv", "Relu", "Softmax"])
    graph = fuse.fuse_ops(passes.fold_constants(load_onnx(path, batch=BATCH)))
    assert graph.counts().get("Softmax") == 1 and graph.counts().get("qconv") == 1
    x = rng.standard_normal((BATCH, 4, 6, 6)).astype(np.float32)
    ours, ref = _ours(graph, x), run(path, x)
    assert np.abs(ours - ref).max() <= float(graph.consts[graph.producers()[graph.outputs[0]].inputs[1]]) + 1e-6


# --- QOperator and QDQ: one set of composite ops --------------------------------------------------------

def _mixed_float():
    rng = np.random.default_rng(14)
    g = GraphBuilder()
    a = g.op("Relu", [g.conv("x", rng.standard_normal((8, 4, 3, 3)) * 0.4, rng.standard_normal(8) * 0.1, pad=1)])
    b = g.conv(a, rng.standard_normal((8, 8, 3, 3)) * 0.2, rng.standard_normal(8) * 0.1, pad=1)
    r = g.op("Relu", [g.op("Add", [a, b])])
    p = g.op("MaxPool", [r], kernel_shape=[2, 2], strides=[2, 2])
    s = g.op("Sigmoid", [g.conv(p, rng.standard_normal((8, 8, 1, 1)) * 0.5, None)])
    h = g.op("Flatten", [g.op("GlobalAveragePool", [s])])
    y = g.op("MatMul", [g.gemm(h, rng.standard_normal((12, 8)) * 0.5, rng.standard_normal(12) * 0.1),
                        g.const("wm", (rng.standard_normal((12, 10)) * 0.4).astype(np.float32))])
    return g.model("mixed", "x", (4, 8, 8), y, (10,))


@pytest.mark.parametrize("case", ["per_tensor", "per_channel", "uint8"])
def test_qoperator_and_qdq_give_the_same_composites_and_outputs(case, cfg, tmp_path):
    from onnxruntime.quantization import QuantType
    model = _mixed_float()
    per_channel = case == "per_channel"
    opts = {"per_channel": True} if per_channel else {}
    if case == "uint8":                   # uint8 activations and weights (weights with a zero point)
        opts = {"activation_type": QuantType.QUInt8, "weight_type": QuantType.QUInt8}
    paths = {fmt: _qdq(model, tmp_path / f"{fmt}.onnx", seed=15, fmt=fmt, **opts) for fmt in ("qdq", "qop")}
    raw = {fmt: {n.op_type for n in onnx.load(p).graph.node} for fmt, p in paths.items()}
    assert "QLinearConv" in raw["qop"] and "QLinearConv" not in raw["qdq"] and "Conv" in raw["qdq"]
    nets = {fmt: _net(p, cfg) for fmt, p in paths.items()}
    counts = {fmt: n.graph.counts() for fmt, n in nets.items()}
    assert counts["qdq"] == counts["qop"]
    assert {k: counts["qdq"].get(k) for k in ("qconv", "qadd", "qlut", "qgap", "qdense", "MaxPool")} == \
        dict(qconv=3, qadd=1, qlut=1, qgap=1, qdense=2, MaxPool=1)
    x = np.random.default_rng(16).standard_normal((BATCH, 4, 8, 8)).astype(np.float32)
    ys = {fmt: n.run(x, engine="reference")[0] for fmt, n in nets.items()}
    np.testing.assert_array_equal(ys["qdq"], ys["qop"])
    for net in nets.values():
        w_scales = [n.attrs["w_scale"] for n in net.graph.nodes if n.op in ("qconv", "qdense")]
        assert all(np.ndim(s) == (1 if per_channel else 0) for s in w_scales)
        out_types = [n.attrs["table"].dtype if n.op == "qlut" else n.attrs["y_dtype"]
                     for n in net.graph.nodes if n.op in ("qconv", "qdense", "qadd", "qgap", "qlut")]
        assert len(out_types) == 8 and set(out_types) == {np.dtype(np.uint8 if case == "uint8" else np.int8)}
    for fmt, path in paths.items():
        worst, _, _ = _lsb_vs_ort(nets[fmt], path, seed=16)
        assert worst <= 1, fmt
