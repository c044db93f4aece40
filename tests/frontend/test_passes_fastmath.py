"""FastMath: each approximation within its stated bound (ERROR_BOUNDS) over a dense grid of float32
inputs, against numpy/scipy in float64; on a model, the rewritten graph equals onnxruntime within the
bound; the note lists what changed."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from scipy import special

from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.fastmath import ERROR_BOUNDS, fast_erf, fast_exp, fast_math, fast_tanh
from vtasim.compiler.frontend.onnx_import import from_onnx

GRIDS = {"Exp": (fast_exp, np.exp, (-87.3, 88.7)), "Tanh": (fast_tanh, np.tanh, (-12, 12)),
         "Erf": (fast_erf, special.erf, (-12, 12))}


def _errors(fn, ref, x):
    y, r = fn(x).astype(np.float64), ref(x.astype(np.float64))
    ab = np.abs(y - r)
    nz = r != 0
    return ab.max(), (ab[nz] / np.abs(r[nz])).max()


@pytest.mark.parametrize("op", sorted(GRIDS))
def test_within_the_stated_bound_on_a_dense_grid(op):
    fn, ref, (lo, hi) = GRIDS[op]
    ab_bound, rel_bound = ERROR_BOUNDS[op]
    grid = np.linspace(lo, hi, 2_000_001, dtype=np.float32)
    tiny = np.float32(2.0) ** np.arange(-120, 0, 0.125, dtype=np.float32)    # the small-|x| branches
    x = np.concatenate([grid, tiny, -tiny])
    ab, rel = _errors(fn, ref, x)
    assert rel <= rel_bound, (op, rel)
    if ab_bound is not None:
        assert ab <= ab_bound, (op, ab)
    assert rel > rel_bound / 100            # an approximation, not the exact function


def test_fast_softmax_within_its_bound_of_the_exact_op():
    from vtasim.compiler.frontend.host_ops import run_host
    from vtasim.compiler.frontend.graph import Node
    ab_bound, rel_bound = ERROR_BOUNDS["Softmax"]
    rng = np.random.default_rng(3)
    for scale in (0.5, 4.0, 30.0):                    # 30: most outputs far below the row's maximum
        x = (rng.standard_normal((500, 200)) * scale).astype(np.float32)
        exact = run_host(Node("Softmax", ["x"], ["y"], {"axis": -1}), [x])[0].astype(np.float64)
        fast = run_host(Node("fast_softmax", ["x"], ["y"], {"axis": -1}), [x])[0].astype(np.float64)
        assert np.abs(fast - exact).max() <= ab_bound
        big = exact >= 1e-30
        rel = (np.abs(fast - exact)[big] / exact[big]).max()
        assert 0 < rel <= rel_bound, (scale, rel)


def _model():
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Tanh", ["x"], ["t"]),
             helper.make_node("Erf", ["x"], ["f"]), helper.make_node("Softmax", ["x"], ["s"], axis=-1)]
    outs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [4, 64]) for v in "etfs"]
    g = helper.make_graph(nodes, "fm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])], outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def test_model_equals_onnxruntime_within_the_bound():
    import onnxruntime as ort
    model = _model()
    g = fast_math(from_onnx(model))
    assert g.counts() == {"fast_exp": 1, "fast_tanh": 1, "fast_erf": 1, "fast_softmax": 1}
    note = next(n for n in g.notes if n.startswith("fast_math"))
    for op in ("Exp -> fast_exp", "Tanh -> fast_tanh", "Erf -> fast_erf", "Softmax -> fast_softmax"):
        assert op in note
    x = (np.random.default_rng(0).standard_normal((4, 64)) * 4).astype(np.float32)
    ours, _ = execute(g, {}, {"x": x}, engine="reference")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = dict(zip("etfs", sess.run(None, {"x": x})))
    ulp = 2 ** -23                            # onnxruntime's own float32 rounding on top of the bound
    for v, op in zip("etfs", ("Exp", "Tanh", "Erf", "Softmax")):
        ab_bound, rel_bound = ERROR_BOUNDS[op]
        y, r = ours[v].astype(np.float64), refs[v].astype(np.float64)
        assert not np.array_equal(y, r)
        tol = (rel_bound + 2 * ulp) * np.abs(r) + (ab_bound if ab_bound is not None else 0)
        assert np.all(np.abs(y - r) <= tol), (op, np.max(np.abs(y - r) / np.maximum(np.abs(r), 1e-30)))


def test_off_by_default_in_the_network(cfg):
    from vtasim.compiler.frontend.network import Network
    net = Network(from_onnx(_model()), cfg)
    assert net.graph.counts() == {"Exp": 1, "Tanh": 1, "Erf": 1, "Softmax": 1}
    assert not any(n.startswith("fast_math") for n in net.notes)


def test_cli_fast_math_flag_prints_what_it_changed(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "fm.onnx"
    onnx.save(_model(), path)
    outs = {}
    for flag in ((), ("--fast-math",)):
        r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "onnx", str(path), *flag], capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        outs[flag] = r.stdout
    assert "fast_math: 1 Erf -> fast_erf" in outs[("--fast-math",)]
    assert "  fast_math:" not in outs[()]
