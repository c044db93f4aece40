"""The bundled int8 ONNX models: the shipped digits CNN, the ResNet-18-shaped and sub-network generators.

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

from vtasim.compiler.frontend.models import DIGITS_FLOAT, DIGITS_QDQ, DIGITS_QOP, digits, digits_paths  # noqa: E402
from vtasim.compiler.frontend.models._onnx import run  # noqa: E402

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


# --- ResNet-18-shaped network and the sub-network set -------------------------------------------

from vtasim.compiler.errors import CompileError  # noqa: E402
from vtasim.compiler.frontend.models import blocks, resnet18  # noqa: E402

# (kernel, stride, cin, cout) of every Conv of ResNet-18 v1 in graph order: stem, then per block
# conv1, conv2 and (first block of stages 2-4) the 1x1 stride-2 shortcut
RESNET18_CONVS = [(7, 2, 3, 64)] + [(3, 1, 64, 64)] * 4
for _c in (128, 256, 512):
    RESNET18_CONVS += [(3, 2, _c // 2, _c), (3, 1, _c, _c), (1, 2, _c // 2, _c), (3, 1, _c, _c), (3, 1, _c, _c)]


def _ops(model) -> dict:
    ops = [n.op_type for n in model.graph.node]
    return {op: ops.count(op) for op in set(ops)}


def _convs(model) -> list:
    """(kernel, stride, cin, cout) of each Conv, weights read through its DequantizeLinear if quantised."""
    inits = {i.name: i for i in model.graph.initializer}
    deq = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    out = []
    for n in model.graph.node:
        if n.op_type == "Conv":
            w = inits[deq.get(n.input[1], n.input[1])].dims
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            assert attrs["pads"] == [w[2] // 2] * 4, (n.name, attrs)
            out.append((w[2], attrs["strides"][0], w[1], w[0]))
    return out


def _rel_err(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


@pytest.fixture(scope="module")
def resnet224(tmp_path_factory):
    """The 224x224 int8 model, generated once for the module (a few seconds)."""
    return resnet18.make_resnet18(tmp_path_factory.mktemp("r18") / "resnet18_int8.onnx")


def test_resnet18_float_has_the_resnet18_shape():
    model = resnet18.make_resnet18_float(image=224)
    onnx.checker.check_model(model, full_check=True)
    assert _ops(model) == {"Conv": 20, "BatchNormalization": 20, "Relu": 17, "MaxPool": 1, "Add": 8,
                           "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    assert _convs(model) == RESNET18_CONVS
    params = sum(int(np.prod(i.dims)) for i in model.graph.initializer if not i.name.startswith("bn"))
    bn = sum(int(np.prod(i.dims)) for i in model.graph.initializer if i.name.startswith("bn"))
    assert bn % 4 == 0              # scale, bias, mean, var per BN; torchvision counts scale and bias
    assert params + bn // 2 == 11_689_512        # torchvision resnet18's published parameter count


def test_resnet18_int8_at_224_runs_folds_bn_and_tracks_float(resnet224):
    model = onnx.load(resnet224)
    onnx.checker.check_model(model)
    ops = _ops(model)
    assert "BatchNormalization" not in ops and ops["Conv"] == 20 and ops["Add"] == 8
    assert sorted(_convs(model)) == sorted(RESNET18_CONVS)        # quant_pre_process may reorder nodes
    _assert_qdq_around_every_conv(model)
    x = np.random.default_rng(11).standard_normal((1, 3, 224, 224)).astype(np.float32)
    y = run(resnet224, x)
    assert y.shape == (1, 1000)
    ref = run(resnet18.make_resnet18_float(image=224), x)
    assert _rel_err(ref, y) < 0.1, _rel_err(ref, y)     # a wrong BN fold is off by far more than this


def test_resnet18_small_variant_is_seeded_and_has_a_qoperator_form(tmp_path):
    a = resnet18.make_resnet18(tmp_path / "a.onnx", seed=3, image=32, classes=10)
    b = resnet18.make_resnet18(tmp_path / "b.onnx", seed=3, image=32, classes=10)
    c = resnet18.make_resnet18(tmp_path / "c.onnx", seed=4, image=32, classes=10)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes() != c.read_bytes()
    qop = resnet18.make_resnet18(tmp_path / "qop.onnx", seed=3, format="qop", image=32, classes=10)
    ops = _ops(onnx.load(qop))
    assert ops["QLinearConv"] == 20 and "Conv" not in ops
    x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype(np.float32)
    assert run(a, x).shape == run(qop, x).shape == (2, 10)


@pytest.mark.parametrize("bad", [0, 100, -32])
def test_resnet18_rejects_image_sizes_it_cannot_halve_five_times(bad):
    with pytest.raises(CompileError, match=f"image size {bad} must be a positive multiple of 32"):
        resnet18.make_resnet18_float(image=bad)


def test_quantise_rejects_an_unknown_format(tmp_path):
    with pytest.raises(CompileError, match="format 'int4' is not one of"):
        blocks.dense_head(tmp_path / "h.onnx", c=16, classes=10, format="int4")


BLOCKS = [
    ("residual_block", {}, (64, 56, 56), (64, 56, 56), [(3, 1, 64, 64)] * 2, {"Add": 1}),
    ("downsample_block", {}, (64, 56, 56), (128, 28, 28), [(3, 2, 64, 128), (3, 1, 128, 128), (1, 2, 64, 128)],
     {"Add": 1}),
    ("dense_head", {}, (512, 7, 7), (1000,), [], {"GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}),
    ("residual_block", {"c": 16, "hw": 8}, (16, 8, 8), (16, 8, 8), [(3, 1, 16, 16)] * 2, {"Add": 1}),
]


@pytest.mark.parametrize("name,kw,shape_in,shape_out,convs,ops", BLOCKS,
                         ids=[f"{b[0]}{b[1] or ''}" for b in BLOCKS])
def test_block_is_int8_qdq_runs_and_tracks_its_float_model(tmp_path, name, kw, shape_in, shape_out, convs, ops):
    path = getattr(blocks, name)(tmp_path / f"{name}.onnx", **kw)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    found = _ops(model)
    assert {k: found.get(k) for k in ops} == ops and "BatchNormalization" not in found
    assert sorted(_convs(model)) == sorted(convs)
    _assert_qdq_around_every_conv(model)
    x = np.abs(np.random.default_rng(9).standard_normal((2, *shape_in))).astype(np.float32)
    y = run(path, x)
    assert y.shape == (2, *shape_out)
    ref = run(getattr(blocks, f"{name}_float")(**kw), x)
    assert _rel_err(ref, y) < 0.1, _rel_err(ref, y)


def test_downsample_block_rejects_an_odd_size(tmp_path):
    with pytest.raises(CompileError, match="hw 7 must be even"):
        blocks.downsample_block(tmp_path / "d.onnx", hw=7)
