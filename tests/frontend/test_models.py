"""The int8 ONNX models of issue 10: the shipped digits CNN, the ResNet-18-shaped and sub-network generators.

References: scikit-learn's labels (top-1), the numpy network the digits model was trained as (float
logits), onnxruntime running each file, the shipped files themselves (regeneration), and the
structure the brief asks for (op types, shapes, QuantizeLinear/DequantizeLinear around every Conv).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")

from compiler.frontend.models import DIGITS_FLOAT, DIGITS_QDQ, DIGITS_QOP, digits, digits_paths  # noqa: E402
from compiler.frontend.models._onnx import run  # noqa: E402

INT8 = {"qdq": DIGITS_QDQ, "qop": DIGITS_QOP}


@pytest.fixture(scope="module")
def split():
    return digits.load_split()


def _top1(path, x, y) -> float:
    return float((run(path, x).argmax(axis=1) == y).mean())


def test_split_is_stratified_held_out_and_deterministic(split):
    from sklearn.datasets import load_digits

    x_tr, y_tr, x_te, y_te = split
    ref = load_digits()
    assert x_tr.dtype == x_te.dtype == np.float32 and x_te.shape[1:] == (1, 8, 8)
    assert len(x_tr) + len(x_te) == len(ref.target) and len(y_te) >= 300
    assert 0.18 <= len(y_te) / len(ref.target) <= 0.22
    assert x_tr.min() >= 0 and x_tr.max() <= 1 and x_te.max() == 1.0
    full = np.bincount(ref.target, minlength=10) / len(ref.target)
    assert np.abs(np.bincount(y_te, minlength=10) / len(y_te) - full).max() < 0.01
    # every test image is a real digit of the data set, scaled by 1/16, with its own label
    flat = (ref.images.reshape(len(ref.target), -1) / 16.0).astype(np.float32)
    rows = {r.tobytes(): t for r, t in zip(flat, ref.target)}
    assert all(rows[im.reshape(-1).tobytes()] == t for im, t in zip(x_te, y_te))
    again = digits.load_split()
    assert all(np.array_equal(a, b) for a, b in zip(split, again))


def test_float_top1_and_int8_within_two_points(split):
    _, _, x_te, y_te = split
    ref = _top1(DIGITS_FLOAT, x_te, y_te)
    assert ref >= 0.95, f"float top-1 {ref:.4f}"
    for fmt, path in INT8.items():
        acc = _top1(path, x_te, y_te)
        assert abs(acc - ref) <= 0.02, f"{fmt}: int8 top-1 {acc:.4f} vs float {ref:.4f}"


def test_shipped_files_are_small_valid_and_shaped_as_described():
    want = {"Conv": 2, "Relu": 2, "MaxPool": 2, "Flatten": 1, "Gemm": 1}
    for path in digits_paths().values():
        assert path.stat().st_size < 1 << 20, path
        onnx.checker.check_model(onnx.load(path), full_check=True)
    ops = [n.op_type for n in onnx.load(DIGITS_FLOAT).graph.node]
    assert {op: ops.count(op) for op in set(ops)} == want
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(DIGITS_FLOAT).graph.initializer}
    assert [inits[f"conv{k}.w"].shape for k in (0, 1)] == [(16, 1, 3, 3), (32, 16, 3, 3)]
    assert inits["gemm0.w"].shape == (10, 128)
    _assert_qdq_around_every_conv(onnx.load(DIGITS_QDQ))
    qop = [n.op_type for n in onnx.load(DIGITS_QOP).graph.node]
    assert qop.count("QLinearConv") == 2 and "Conv" not in qop


def test_export_computes_the_numpy_network(split):
    """The float ONNX model of freshly trained parameters gives the numpy network's logits."""
    x_tr, y_tr, x_te, y_te = split
    params = digits.train(x_tr[:256], y_tr[:256], epochs=1)
    logits = run(digits.to_onnx(params), x_te)
    np.testing.assert_allclose(logits, digits.forward(params, x_te), rtol=1e-4, atol=1e-4)


def test_script_regenerates_the_shipped_models(tmp_path, split):
    _, _, x_te, _ = split
    assert digits.main(["--out", str(tmp_path)]) == 0
    for name, shipped in digits_paths().items():
        fresh = tmp_path / shipped.name
        same = np.array_equal(run(fresh, x_te).argmax(axis=1), run(shipped, x_te).argmax(axis=1))
        assert same, f"{name}: regenerated predictions differ from the shipped {shipped.name}"


def _assert_qdq_around_every_conv(model):
    """Every Conv/Gemm reads only DequantizeLinear outputs and feeds only a QuantizeLinear."""
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    consumers = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n.op_type)
    convs = [n for n in model.graph.node if n.op_type in ("Conv", "Gemm")]
    assert convs
    for n in convs:
        assert all(producer.get(i) == "DequantizeLinear" for i in n.input if i), (n.name, list(n.input))
        assert consumers[n.output[0]] == ["QuantizeLinear"], (n.name, consumers[n.output[0]])
