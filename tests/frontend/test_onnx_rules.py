"""``vtasim onnx`` on models that break a graph rule (:mod:`vtasim.compiler.frontend.validate`): each is one
stderr line naming the node or value and the rule, exit 2, before onnxruntime sees the model; a
20,000-node Identity chain imports in time linear in its size; ``--report`` and ``--save-images``
follow the output-directory rule.

Each model is the bundled digits QDQ model with one thing broken.  The commands run in subprocesses
with a generous timeout as the hang detector."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cli_checks import one_line, vtasim
from vtasim.compiler.frontend.models import DIGITS_QDQ


def onnx_cli(*args):
    return vtasim("onnx", *args, timeout=600)


def _conv(m):
    return next(n for n in m.graph.node if n.op_type == "Conv")


def _set_ints(node, name, values):
    next(a for a in node.attribute if a.name == name).ints[:] = values


def _weight_scale(m, value):
    wdq = next(n for n in m.graph.node if n.output[0] == _conv(m).input[1])
    for t in m.graph.initializer:
        if t.name == wdq.input[1]:
            t.CopyFrom(numpy_helper.from_array(np.array(value, np.float32), t.name))


def _cycle(m):
    g = m.graph
    first_conv = next(k for k, n in enumerate(g.node) if n.op_type == "Conv")
    g.node[first_conv].input[0] = g.node[-1].output[0]       # the conv reads the network's last value


def _undefined(m):
    _conv(m).input[0] = "nowhere"


def _no_input(m):
    del m.graph.input[:]


def _no_output(m):
    del m.graph.output[:]


def _string_input(m):
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.STRING


MUTATIONS = {
    "opset 99": (lambda m: setattr(m.opset_import[0], "version", 99), ["opset 99", "outside 10.."]),
    "cyclic": (_cycle, ["produced by node", "acyclic", "topological order"]),
    "undefined value": (_undefined, ["'nowhere'", "nothing defines"]),
    "strides 0": (lambda m: _set_ints(_conv(m), "strides", [0, 0]), ["strides=[0, 0]", "strides value >= 1"]),
    "kernel_shape lies": (lambda m: _set_ints(_conv(m), "kernel_shape", [5, 5]),
                          ["kernel_shape=[5, 5]", "[16, 1, 3, 3]", "equals the weight's spatial shape"]),
    "no input": (_no_input, ["no input", "at least one graph input"]),
    "no output": (_no_output, ["no output", "at least one graph output"]),
    "weight scale 1e30": (lambda m: _weight_scale(m, 1e30), ["= 1e+30", "scales are finite and within"]),
    "weight scale inf": (lambda m: _weight_scale(m, np.inf), ["= inf", "scales are finite"]),
    "string input": (_string_input, ["tensor of string", "not numeric"]),
}


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_broken_graph_is_one_line(case, tmp_path):
    """Mutation caught: the corresponding check in validate.py removed (onnxruntime's multi-line or
    'internal error' failure, or an OverflowError, comes back)."""
    mutate, words = MUTATIONS[case]
    m = copy.deepcopy(onnx.load(DIGITS_QDQ))
    mutate(m)
    path = tmp_path / "bad.onnx"
    onnx.save(m, path)
    one_line(onnx_cli(path, "--engine", "reference", "--limit", "1"), str(path), *words, "rule:")


def test_limit_zero():
    one_line(onnx_cli(DIGITS_QDQ, "--limit", "0"), "--limit 0", "at least 1")


def test_identity_chain_is_linear(tmp_path, cfg):
    """20,000 Identity nodes: the import takes a few seconds (each removed Identity renamed its uses over
    the whole graph: minutes).  The result is the Relu alone; the hang detector is the timeout."""
    n = 20000
    nodes = [helper.make_node("Identity", [f"t{k}"], [f"t{k + 1}"], name=f"id{k}") for k in range(n)]
    nodes.append(helper.make_node("Relu", [f"t{n}"], ["y"], name="relu"))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "chain.onnx"
    onnx.save(m, path)
    proc = onnx_cli(path, "--engine", "reference", "--limit", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 ops after the passes" in proc.stdout and "max abs error 0" in proc.stdout


class _CountingList(list):
    """A node list that counts the walks over it."""
    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_simplify_inference_walks_the_graph_a_fixed_number_of_times():
    """The deterministic side of linear time: removing 2,000 Identity nodes walks the node list a few
    times, not once per removed node (the quadratic pass renamed each one's uses over the whole graph)."""
    from vtasim.compiler.frontend.graph import Graph, Node
    from vtasim.compiler.frontend.passes import simplify_inference
    n = 2000
    nodes = [Node("Identity", [f"t{k}"], [f"t{k + 1}"], {}, f"id{k}") for k in range(n)]
    nodes.append(Node("Relu", [f"t{n}"], ["y"], {}, "relu"))
    g = Graph(_CountingList(nodes), {"t0": ((1, 8), np.float32)}, ["y"], {})
    out = simplify_inference(g)
    assert [nd.op for nd in out.nodes] == ["Relu"] and out.nodes[0].inputs == ["t0"] and out.outputs == ["y"]
    assert _CountingList.walks <= 5, _CountingList.walks


def test_report_onto_an_existing_file_is_one_line(tmp_path):
    f = tmp_path / "report"
    f.write_text("mine\n")
    one_line(onnx_cli(DIGITS_QDQ, "--engine", "reference", "--limit", "1", "--report", f),
             str(f), "is a regular file, not a directory")
    assert f.read_text() == "mine\n"


@pytest.mark.parametrize("option, name", [("--report", "layers.csv"), ("--report", "roofline.png"),
                                          ("--save-images", "001_conv0")])
def test_report_and_images_never_write_through_links(option, name, tmp_path):
    """A link planted in the directory (to a file, or for a region's image directory to a directory)
    is refused; what it points to is unchanged."""
    secret, elsewhere = tmp_path / "outside.txt", tmp_path / "outside_dir"
    secret.write_text("keep\n")
    elsewhere.mkdir()
    d = tmp_path / "out"
    d.mkdir()
    (d / name).symlink_to(elsewhere if option == "--save-images" else secret)
    proc = onnx_cli(DIGITS_QDQ, "--engine", "reference", "--limit", "1", "--all-convs", option, d)
    one_line(proc, str(d / name), "symbolic link")
    assert secret.read_text() == "keep\n" and list(elsewhere.iterdir()) == []
