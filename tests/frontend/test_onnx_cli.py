"""``vtasim onnx``: bad models, inputs and options end in one line on stderr and exit 2."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from cli_checks import one_line_error as _one_line_error

from vtasim.compiler.frontend.models import DIGITS_QDQ


def _vtasim(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "onnx", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, timeout=600)
    return r.returncode, r.stdout, r.stderr


def test_not_onnx_and_truncated(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("hello, I am a text file\n" * 10)
    _one_line_error(*_vtasim(bad)[::2], "not an ONNX model")
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(DIGITS_QDQ.read_bytes()[:3000])
    _one_line_error(*_vtasim(cut)[::2], "cut.onnx")
    _one_line_error(*_vtasim(tmp_path / "missing.onnx")[::2], "missing.onnx")


def test_unsupported_model_lists_ops(tmp_path):
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("LSTM", ["a", "w", "r"], ["y"], name="rnn"),
             helper.make_node("TopK", ["y", "k"], ["z", "i"], name="tk")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    p = tmp_path / "u.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    _one_line_error(*_vtasim(p)[::2], "node 1 'rnn' (LSTM)", "node 2 'tk' (TopK)")


def test_bad_inputs(tmp_path):
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((3, 5), np.float32))
    _one_line_error(*_vtasim(DIGITS_QDQ, "--input", wrong, "--engine", "reference")[::2], "shape (3, 5)")
    pickled = tmp_path / "obj.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _one_line_error(*_vtasim(DIGITS_QDQ, "--input", pickled, "--engine", "reference")[::2], "obj.npy")
    _one_line_error(*_vtasim(DIGITS_QDQ, "--input", tmp_path)[::2], "directory")


@pytest.mark.parametrize("fmt", ["qdq"])
def test_requant_shift_path_refuses_non_power_of_two_scales(fmt):
    # onnxruntime's calibrated scales are not powers of two: the shift path cannot represent them
    rc, out, err = _vtasim(DIGITS_QDQ, "--requant", "shift", "--engine", "reference", "--limit", "1")
    _one_line_error(rc, err, "power of two")


def _nonsquare_model(tmp_path):
    """conv 3x3 (packable) then conv 3x1 (not: conv2d_packed takes square kernels), int8 QDQ."""
    from vtasim.compiler.frontend.models._onnx import GraphBuilder, quantize
    rng = np.random.default_rng(0)
    g = GraphBuilder()
    t = g.op("Relu", [g.conv("x", rng.normal(0, 0.2, (16, 16, 3, 3)), np.zeros(16), pad=1)])
    t = g.conv(t, rng.normal(0, 0.2, (16, 16, 3, 1)), np.zeros(16))
    model = g.model("nonsquare", "x", (16, 8, 8), t, (16, 6, 8))
    return quantize(model, tmp_path / "ns.onnx", rng.random((8, 16, 8, 8), np.float32))


def test_strict_lists_layers_that_cannot_run_on_vta(tmp_path):
    path = _nonsquare_model(tmp_path)
    _one_line_error(*_vtasim(path, "--strict", "--all-convs", "--engine", "reference")[::2],
                    "1 layer(s) cannot run on VTA", "kernel 3x1 cannot be packed")
    rc, out, err = _vtasim(path, "--all-convs", "--engine", "reference")     # without --strict: on the host
    assert rc == 0, err
    assert "kernel 3x1 cannot be packed" in out and "1 VTA region(s)" in out


def test_report_and_saved_images_replay(tmp_path):
    rep, imgs = tmp_path / "rep", tmp_path / "imgs"
    rc, out, err = _vtasim(DIGITS_QDQ, "--dataset", "digits", "--limit", "20", "--report", rep, "--save-images",
                           imgs, "--all-convs")
    assert rc == 0, err
    assert "top-1 accuracy on 20 labelled inputs" in out and "vs onnxruntime int8" in out
    # the float32 model the int8 one was quantised from, on the same 20 held-out digits
    import onnxruntime as ort
    from vtasim.compiler.frontend.models import DIGITS_FLOAT
    from vtasim.compiler.frontend.models.digits import load_split
    _, _, x_te, y_te = load_split()
    sess = ort.InferenceSession(str(DIGITS_FLOAT), providers=["CPUExecutionProvider"])
    logits = sess.run(None, {sess.get_inputs()[0].name: x_te[:20]})[0]
    top1 = float((logits.argmax(1) == y_te[:20]).mean())
    assert f"float32 digits_float.onnx (onnxruntime) {top1:.4f}" in out
    import csv
    rows = list(csv.DictReader(open(rep / "layers.csv")))
    vta = [r for r in rows if r["placement"] == "vta"]
    assert len(vta) == 3 and all(int(r["cycles"]) > 0 for r in vta)
    for png in ("cycles.png", "utilisation.png", "roofline.png"):
        assert (rep / png).stat().st_size > 5000
    saved = sorted(p for p in imgs.iterdir() if p.is_dir())
    assert len(saved) == 3
    for d in saved:                       # each region replays on its own and matches its expected output
        r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "run", str(d), "--engine", "cycle", "--check"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr


def test_held_out_top1_runs_the_model_it_is_given(tmp_path):
    """A model that always answers class 0 scores the share of zeros among the first N labels."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from vtasim.compiler.frontend.models.digits import held_out_top1, load_split
    w = numpy_helper.from_array(np.zeros((64, 10), np.float32), "w")
    b = numpy_helper.from_array(np.eye(10, dtype=np.float32)[0], "b")
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["image"], ["f"]), helper.make_node("Gemm", ["f", "w", "b"], ["logits"])],
        "zero", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], [w, b])
    path = tmp_path / "zero.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    _, _, _, y_te = load_split()
    for n in (50, None):
        assert held_out_top1(path, n) == pytest.approx(float(np.mean(y_te[:n] == 0)))
