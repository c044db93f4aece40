"""Host fallback instead of refusal, and models with several inputs.

The edge network (``vtasim.compiler.frontend.models.edge``: a depthwise conv, LeakyReLU, Resize, Concat
between convs VTA runs) is quantised by onnxruntime in both formats.  References: onnxruntime on
the CPU for the network, and the numpy execution of each VTA region (``engine="reference"``) for
the cycle engine's regions, bit for bit.  The placement is checked node by node, and ``--strict``
must refuse the same model in one line.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vtasim.compiler.frontend.compare import agreement, output_lsb
from vtasim.compiler.frontend.models._onnx import run as ort_run
from vtasim.compiler.frontend.models.edge import make_edge_net
from vtasim.compiler.frontend.network import Network


@pytest.fixture(scope="module", params=["qdq", "qop"])
def edge(request, tmp_path_factory):
    # c=12: the depthwise conv has 24 channels, which do not pack into 16-lane blocks (it stays on the host)
    return make_edge_net(tmp_path_factory.mktemp("edge") / f"edge_{request.param}.onnx", c=12, fmt=request.param)


def _inputs(n, seed=11):
    """Images of differing brightness and contrast, so the classes differ between inputs."""
    r = np.random.default_rng(seed)
    return (r.random((n, 1, 3, 16, 16)) * r.uniform(0.2, 2.0, (n, 1, 3, 1, 1))).astype(np.float32)


def test_unsupported_on_vta_runs_on_the_host_with_a_note(edge, cfg):
    net = Network.from_onnx(edge, cfg)
    convs = [n for n in net.graph.nodes if n.op == "qconv"]
    placed = [(n.attrs["group"], n.target) for n in convs]
    # first conv (skip_first_conv) and the depthwise conv on the host, the other three convs on VTA
    assert placed == [(1, "host"), (1, "vta"), (24, "host"), (1, "vta"), (1, "vta")], placed
    assert [n.target for n in net.graph.nodes if n.op == "qdense"] == ["vta"]
    notes = [s for s in net.notes if "groups = 24" in s]
    assert len(notes) == 1 and "on the host" in notes[0], net.notes
    assert any(n.op == "Resize" for n in net.graph.nodes)
    ours = np.concatenate([net.run(x, engine="reference")[0] for x in _inputs(32)])
    refs = np.concatenate([ort_run(edge, x) for x in _inputs(32)])
    m = agreement(ours, refs, output_lsb(net.graph))
    assert m["top1"] == 1.0 and m["max_lsb"] <= 1, m
    assert np.unique(np.round(refs, 4)).size > 50         # the logits vary: a wrong host rule would show
    assert np.unique(refs.argmax(1)).size > 1, "every input gives the same class: top-1 could not fail"


def test_cycle_engine_regions_equal_their_numpy_execution(edge, cfg):
    net = Network.from_onnx(edge, cfg)
    for x in _inputs(2, seed=3):
        y_cycle, rec = net.run(x, engine="cycle")
        y_ref, _ = net.run(x, engine="reference")
        assert np.array_equal(y_cycle, y_ref)
        assert sum(r.cycles or 0 for r in rec) > 0 and sum(r.target == "vta" for r in rec) == 4


def _vtasim(*args):
    r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "onnx", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    return r.returncode, r.stdout, r.stderr


def test_strict_refuses_the_mixed_model_in_one_line(edge):
    rc, out, err = _vtasim(edge, "--strict", "--engine", "reference")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "--strict" in lines[0] and "groups = 24" in lines[0], lines[0]


def _two_input_model(path):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Div", ["a", "b"], ["d"]), helper.make_node("Sub", ["d", "a"], ["y"])],
                          "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 6]),
                                  helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_multi_input_model_takes_named_inputs(tmp_path):
    model = _two_input_model(tmp_path / "two.onnx")
    r = np.random.default_rng(1)
    np.save(tmp_path / "a.npy", r.random((5, 6), np.float32))        # a stack of 5 batch-1 inputs
    np.save(tmp_path / "b.npy", r.random((5, 6), np.float32) + 1)
    rc, out, err = _vtasim(model, "--input", f"a={tmp_path / 'a.npy'}", "--input", f"b={tmp_path / 'b.npy'}")
    assert rc == 0, err
    assert "5 input(s)" in out and "max abs error 0" in out, out
    rc, out, err = _vtasim(model, "--input", f"a={tmp_path / 'a.npy'}")
    assert rc == 2 and err.count("\n") == 1 and "'b'" not in err and "b" in err and "NAME=FILE" in err, err
    rc, out, err = _vtasim(model, "--input", str(tmp_path / "a.npy"))
    assert rc == 2 and err.count("\n") == 1 and "2 inputs" in err, err
    rc, out, err = _vtasim(model, "--input", f"c={tmp_path / 'a.npy'}", "--input", f"b={tmp_path / 'b.npy'}")
    assert rc == 2 and err.count("\n") == 1 and "no input 'c'" in err, err


def test_a_depthwise_conv_that_packs_runs_on_vta(tmp_path, cfg):
    """c=16: the 32-channel depthwise conv packs block-diagonally and runs on VTA, bit-exact."""
    path = make_edge_net(tmp_path / "edge16.onnx", c=16)
    net = Network.from_onnx(path, cfg)
    assert [(n.attrs["group"], n.target) for n in net.graph.nodes if n.op == "qconv"] == \
        [(1, "host"), (1, "vta"), (32, "vta"), (1, "vta"), (1, "vta")]
    x = _inputs(1, seed=5)[0]
    y_cycle, rec = net.run(x, engine="cycle")
    y_ref, _ = net.run(x, engine="reference")
    assert np.array_equal(y_cycle, y_ref) and sum(r.target == "vta" for r in rec) == 5
    assert np.array_equal(net.run(x, engine="reference")[0].argmax(), ort_run(path, x).argmax())
