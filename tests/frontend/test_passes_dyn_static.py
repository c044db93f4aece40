"""DynamicToStatic: PyTorch's flatten export (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) and a
ConstantOfShape/Expand chain fold to constants when the shapes are static; a shape read from the
data stays and runs on the host.  Outputs against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from vtasim.compiler.frontend.dyn_static import dynamic_to_static
from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.models._onnx import run
from vtasim.compiler.frontend.onnx_import import from_onnx


def _model(nodes, inputs, inits: dict, out_shape, out="y"):
    g = helper.make_graph(nodes, "t", inputs, [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _ort(model, feeds):
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _flatten_model():
    """x (N, 4, 3, 3) -> Relu -> x.view(x.size(0), -1) as PyTorch writes it -> Gemm; plus
    ones_like(r) * r via Shape -> ConstantOfShape and an Expand of a bias to r's shape."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(0, np.int64))),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("ConstantOfShape", ["s"], ["ones"], value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Expand", ["b", "s"], ["bb"]),
             helper.make_node("Mul", ["r", "ones"], ["r1"]),
             helper.make_node("Add", ["r1", "bb"], ["r2"]),
             helper.make_node("Reshape", ["r2", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)]
    inits = {"ax0": np.array([0], np.int64), "minus1": np.array([-1], np.int64),
             "b": rng.standard_normal((4, 1, 1)).astype(np.float32),
             "w": rng.standard_normal((5, 36)).astype(np.float32)}
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 3, 3])], inits, ["N", 5])


def test_pytorch_flatten_chain_folds_to_constants():
    model = _flatten_model()
    g = from_onnx(model, batch=2)
    assert g.shapes.get("f") == (2, 36)            # data-propagating shape inference at the fixed batch
    g = dynamic_to_static(g)
    ops = g.counts()
    assert not {"Shape", "Gather", "Unsqueeze", "Concat", "ConstantOfShape"} & set(ops), ops
    assert ops == {"Relu": 1, "Mul": 1, "Add": 1, "Reshape": 1, "Gemm": 1}
    reshape = next(n for n in g.nodes if n.op == "Reshape")
    assert list(g.consts[reshape.inputs[1]]) == [2, -1]
    note = next(n for n in g.notes if n.startswith("dynamic_to_static"))
    assert "1 Shape/Size op(s)" in note and "Reshape" in note, note
    x = np.random.default_rng(1).standard_normal((2, 4, 3, 3)).astype(np.float32)
    outs, _ = execute(g, {}, {"x": x}, engine="reference")
    np.testing.assert_allclose(outs["y"], run(model, x), rtol=1e-5, atol=1e-5)


def test_a_shape_read_from_the_data_is_left_dynamic():
    """Reshape by a shape the caller feeds, then the PyTorch flatten of the result: nothing is static."""
    nodes = [helper.make_node("Reshape", ["x", "want"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("Relu", ["f"], ["y"])]
    inits = {"i0": np.array(0, np.int64), "ax0": np.array([0], np.int64), "minus1": np.array([-1], np.int64)}
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4]),
                           helper.make_tensor_value_info("want", TensorProto.INT64, [3])], inits, ["a", "b"])
    g = dynamic_to_static(from_onnx(model))
    assert g.counts()["Shape"] == 1 and g.counts()["Concat"] == 1
    assert "r" not in g.shapes
    assert any("left to run on the host" in n and "'r'" in n for n in g.notes), g.notes
    x = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    for want in ([2, 3, 4], [4, 2, 3], [3, 8, 1]):
        feeds = {"x": x, "want": np.array(want, np.int64)}
        outs, _ = execute(g, {}, feeds, engine="reference")
        ref = _ort(model, feeds)
        assert outs["y"].shape == ref.shape == (want[0], 24 // want[0])
        np.testing.assert_array_equal(outs["y"], ref)


def test_constant_of_shape_and_expand_at_run_time():
    """A shape fed by the caller: ConstantOfShape and Expand run on the host, equal to onnxruntime; a
    shape beyond the element limit is refused before anything is allocated."""
    import pytest
    from vtasim.compiler.frontend.errors import FrontendError
    nodes = [helper.make_node("ConstantOfShape", ["want"], ["c"], value=numpy_helper.from_array(np.full(1, 0.5, np.float32))),
             helper.make_node("Expand", ["b", "want"], ["e"]),
             helper.make_node("Add", ["c", "e"], ["y"])]
    b = np.random.default_rng(4).standard_normal((1, 3)).astype(np.float32)
    model = _model(nodes, [helper.make_tensor_value_info("want", TensorProto.INT64, [2])], {"b": b}, ["a", "b"])
    g = dynamic_to_static(from_onnx(model))
    assert g.counts() == {"ConstantOfShape": 1, "Expand": 1, "Add": 1}
    for want in ([2, 3], [5, 1], [1, 3]):
        feeds = {"want": np.array(want, np.int64)}
        outs, _ = execute(g, {}, feeds, engine="reference")
        np.testing.assert_array_equal(outs["y"], _ort(model, feeds))
    with pytest.raises(FrontendError, match="elements; the limit is"):
        execute(g, {}, {"want": np.array([1 << 20, 1 << 20], np.int64)}, engine="reference")
