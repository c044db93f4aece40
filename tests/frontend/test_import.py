"""ONNX import: both quantisation formats to the same composite ops, the host execution against
onnxruntime, and every way a model file can be bad (one clear error, nothing large allocated)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vtasim.compiler.frontend.compare import OrtReference, agreement, output_lsb
from vtasim.compiler.frontend.errors import ModelFileError, UnsupportedModel
from vtasim.compiler.frontend.models import DIGITS_QDQ, DIGITS_QOP
from vtasim.compiler.frontend.network import Network
from vtasim.compiler.frontend.onnx_import import MAX_ELEMENTS, load_onnx


@pytest.mark.parametrize("path", [DIGITS_QDQ, DIGITS_QOP], ids=["qdq", "qop"])
def test_both_formats_fuse_to_the_same_composites(path, cfg):
    net = Network.from_onnx(path, cfg, mode="host")
    counts = net.graph.counts()
    assert counts["qconv"] == 2 and counts["qdense"] == 1
    assert "Conv" not in counts and "Gemm" not in counts and "QLinearConv" not in counts


@pytest.mark.parametrize("path", [DIGITS_QDQ, DIGITS_QOP], ids=["qdq", "qop"])
def test_host_execution_equals_onnxruntime_on_digits(path, cfg, digits_split):
    _, _, xt, _ = digits_split
    net = Network.from_onnx(path, cfg, mode="host")
    ort = OrtReference(path)
    ours = np.concatenate([net.run(x[None], engine="reference")[0] for x in xt[:64]])
    ref = np.concatenate([ort.run(x[None]) for x in xt[:64]])
    m = agreement(ours, ref, output_lsb(net.graph))
    # onnxruntime requantises with a float multiplier, we with TVM's 31-bit fixed point: ties may differ by 1
    assert m["max_lsb"] <= 1 and m["top1"] == 1.0


def test_resnet_shaped_host_execution_tracks_onnxruntime(resnet_small, cfg):
    net = Network.from_onnx(resnet_small, cfg, mode="host")
    c = net.graph.counts()
    assert c["qconv"] == 20 and c["qadd"] == 8 and c["qdense"] == 1 and c["qgap"] == 1
    x = np.random.default_rng(3).random(net.graph.inputs[net.input_name][0], np.float32)
    y, _ = net.run(x, engine="reference")
    m = agreement(y, OrtReference(resnet_small).run(x), output_lsb(net.graph))
    assert m["max_lsb"] <= 2 and m["rel_err"] < 0.02


def _save(model, tmp_path, name="m.onnx"):
    p = tmp_path / name
    p.write_bytes(model.SerializeToString())
    return p


def test_not_onnx_truncated_and_empty_files(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\xffnot a model at all" * 50)
    with pytest.raises(ModelFileError, match="not an ONNX model"):
        load_onnx(junk)
    data = DIGITS_QDQ.read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError):
        load_onnx(cut)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty"):
        load_onnx(empty)
    with pytest.raises(ModelFileError):
        load_onnx(tmp_path)                       # a directory


def _tiny(initializers=(), nodes=None, in_dims=(1, 4)):
    nodes = nodes or [helper.make_node("Relu", ["x"], ["y"])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_dims))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_absurd_sizes_fail_before_allocating(tmp_path):
    big = TensorProto()
    big.name, big.data_type = "w", TensorProto.FLOAT
    big.dims.extend([1 << 20, 1 << 20])              # 2^40 elements declared, 8 bytes given
    big.raw_data = b"\x00" * 8
    with pytest.raises(ModelFileError, match="elements"):
        load_onnx(_save(_tiny([big]), tmp_path))
    lying = numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
    lying.dims[0] = 400                              # more elements declared than bytes present
    with pytest.raises(ModelFileError, match="bytes"):
        load_onnx(_save(_tiny([lying]), tmp_path, "l.onnx"))
    with pytest.raises(ModelFileError, match="limit"):
        load_onnx(_save(_tiny(in_dims=(1, MAX_ELEMENTS + 1)), tmp_path, "i.onnx"))


def test_every_unsupported_op_listed_with_where(tmp_path):
    """Only what neither VTA nor the host implements refuses the model, every such node in one error."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Einsum", ["a"], ["b"], name="g1", equation="nchw->nchw"),
             helper.make_node("Conv", ["b", "w"], ["c"], name="dw", group=4, auto_pad="SAME_UPPER"),
             helper.make_node("TopK", ["c", "k"], ["y", "yi"], name="e1")]
    w = numpy_helper.from_array(np.zeros((4, 1, 1, 1), np.float32), "w")
    idx = numpy_helper.from_array(np.ones((1,), np.int64), "k")
    with pytest.raises(UnsupportedModel) as e:
        load_onnx(_save(_tiny([w, idx], nodes, (1, 4, 2, 2)), tmp_path))
    msg = str(e.value)
    assert "node 1 'g1' (Einsum)" in msg and "node 3 'e1' (TopK)" in msg and "auto_pad=SAME_UPPER" in msg
    assert len(e.value.problems) == 3
