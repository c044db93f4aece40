"""``vtasim quantize``: TVM's quantiser recipe on a float ONNX model, judged by onnxruntime.

References: onnxruntime running the written QDQ model and the float model on the digits held-out
split; the shift-only claim is checked on the VTA regions' requantisation plans and layer by layer
against onnxruntime's own tensors (every differing output must be a rounding tie); the KL
calibration against a brute-force scan of every threshold written from the definition.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest

from vtasim.compiler.frontend.calibrate import kl_threshold, power2_scale
from vtasim.compiler.frontend.models import DIGITS_FLOAT
from vtasim.compiler.frontend.models._onnx import run as ort_run
from vtasim.compiler.frontend.network import Network
from vtasim.compiler.frontend.quantizer import QuantizeOptions, layerwise_ties, quantize_model


@pytest.fixture(scope="module")
def float_model():
    return onnx.load(DIGITS_FLOAT)


def _top1(model, xs, ys):
    return float(np.mean(np.concatenate([ort_run(model, x[None]) for x in xs]).argmax(1) == ys))


@pytest.mark.parametrize("mode,weights", [("global", "power2"), ("minmax", "max"), ("kl", "max"),
                                          ("percentile", "max"), ("kl", "power2")])
def test_each_calibration_gives_a_model_onnxruntime_runs_near_the_float_accuracy(float_model, digits_split, mode,
                                                                                 weights):
    xtr, _, xte, yte = digits_split
    opts = QuantizeOptions(mode, 8.0, weights, ())
    q, scales = quantize_model(float_model, opts, [x[None] for x in xtr[:64]])
    onnx.checker.check_model(q)
    ops = [n.op_type for n in q.graph.node]
    assert ops.count("QuantizeLinear") == len(scales) and ops.count("DequantizeLinear") >= len(scales) + 3
    f32, i8 = _top1(float_model, xte, yte), _top1(q, xte, yte)
    print(f"{mode}/{weights}: float32 {f32:.4f}, int8 {i8:.4f}")
    assert i8 >= f32 - 0.03, (f32, i8)
    if mode == "global":
        assert set(scales.values()) == {8.0 / 128}
    else:
        assert len(set(scales.values())) > 2        # calibrated per tensor


def test_power2_weights_and_global_activations_requantise_by_shifts_only(float_model, digits_split, cfg, tmp_path):
    xtr, _, xte, _ = digits_split
    q, _ = quantize_model(float_model, QuantizeOptions("global", 8.0, "power2", ()))
    path = tmp_path / "pow2.onnx"
    onnx.save(q, path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False)
    plans = [r.requant_plan(r.node.attrs["x_dtype"])[1] for r in net.regions.values()]
    assert len(plans) == 3 and all(p.path == "shift" for p in plans)
    t = layerwise_ties(path, net, [{"image": x[None]} for x in xte[:20]])
    print(t)
    assert t["off_tie"] == 0 and t["differ"] > 0 and t["ties"] >= t["differ"], t   # ties there, and only ties differ


def test_max_weights_leave_fixed_point_plans_that_differ_off_ties(float_model, digits_split, cfg, tmp_path):
    """The counter-case: the same check sees differences that are not ties when the scales are not powers of two."""
    xtr, _, xte, _ = digits_split
    q, _ = quantize_model(float_model, QuantizeOptions("minmax", 8.0, "max", ()), [x[None] for x in xtr[:64]])
    path = tmp_path / "max.onnx"
    onnx.save(q, path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False)
    assert {r.requant_plan(r.node.attrs["x_dtype"])[1].path for r in net.regions.values()} == {"fixed"}
    assert layerwise_ties(path, net, [{"image": x[None]} for x in xte[:20]])["off_tie"] > 0


def test_weights_and_biases_dequantise_to_the_float_ones(float_model):
    """Each weight within half a step of its float value; each bias int32 in the accumulator's scale
    (input scale x weight scale), within half a step of the float bias."""
    from onnx import numpy_helper
    q, scales = quantize_model(float_model, QuantizeOptions("global", 8.0, "power2", ()))
    floats = {t.name: numpy_helper.to_array(t) for t in float_model.graph.initializer}
    ints = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    checked = 0
    for n in q.graph.node:
        if n.op_type not in ("Conv", "Gemm"):
            continue
        x_scale = scales[n.input[0][:-len("_dq")] if n.input[0] not in scales else n.input[0]]
        w_name, b_name = n.input[1][:-3], n.input[2][:-3]            # '<name>_dq'
        wq, ws = ints[f"{w_name}_q"], float(ints[f"{w_name}_scale"])
        bq, bs = ints[f"{b_name}_q"], float(ints[f"{b_name}_scale"])
        assert np.abs(wq * ws - floats[w_name]).max() <= ws / 2 + 1e-9
        assert bq.dtype == np.int32 and bs == pytest.approx(x_scale * ws, rel=1e-6)
        assert np.abs(bq * bs - floats[b_name]).max() <= bs / 2 + 1e-9
        checked += 1
    assert checked == 3


def test_skip_conv_layers_keeps_that_conv_in_float(float_model, cfg, tmp_path):
    q, _ = quantize_model(float_model, QuantizeOptions("global", 8.0, "power2", (0,)))
    convs = [n for n in q.graph.node if n.op_type == "Conv"]
    produced = {o: n.op_type for n in q.graph.node for o in n.output}
    assert produced.get(convs[0].input[1]) is None                     # float weight initializer
    assert produced[convs[1].input[1]] == "DequantizeLinear"
    path = tmp_path / "skip.onnx"
    onnx.save(q, path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False)
    assert [n.op for n in net.graph.nodes].count("Conv") == 1 and len(net.regions) == 2


def _kl_brute(x, num_bins, num_q):
    """Every threshold of the search, the divergence written out from its definition."""
    top = np.abs(x).max()
    hist, edges = np.histogram(x, bins=num_bins, range=(-top, top))
    zero = num_bins // 2
    best = (np.inf, None)
    for i in range(num_q // 2, zero + 1):
        p = hist[zero - i:zero + i + 1].astype(float)
        p[0] += hist[:zero - i].sum()
        p[-1] += hist[zero + i + 1:].sum()
        kept = hist[zero - i:zero + i + 1].astype(float)
        m = len(p) // num_q
        q = np.zeros_like(p)
        for j in range(num_q):
            a, b = j * m, (j + 1) * m if j < num_q - 1 else len(p)
            nz = p[a:b] != 0
            if nz.any():
                q[a:b][nz] = kept[a:b].sum() / nz.sum()
        if q.sum() == 0 or np.any(q[p > 0] == 0):
            continue
        pn, qn = p / p.sum(), q / q.sum()
        d = sum(pn[k] * np.log(pn[k] / qn[k]) for k in range(len(p)) if pn[k] > 0)
        if d < best[0]:
            best = (d, edges[zero + i + 1])
    return best[1]


@pytest.mark.parametrize("dist", ["normal", "relu", "heavy"])
def test_kl_threshold_equals_the_full_scan(dist):
    r = np.random.default_rng(4)
    x = {"normal": r.standard_normal(20000), "relu": np.maximum(r.standard_normal(20000), 0),
         "heavy": r.standard_t(3, 20000)}[dist]
    want = _kl_brute(x, 801, 63)
    assert kl_threshold(x, 801, 63) == pytest.approx(want)
    assert 0 < want < np.abs(x).max()              # it clips: min|max would not


def test_power2_scale_rule():
    assert power2_scale(1.0) == 1 / 128 and power2_scale(1.5) == 2 / 128 and power2_scale(0.3) == 0.5 / 128


def _vtasim(*args):
    r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "quantize", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    return r.returncode, r.stdout, r.stderr


def test_cli_reports_accuracies_and_refuses_calibration_without_data(tmp_path):
    rc, out, err = _vtasim(DIGITS_FLOAT, "--out", tmp_path / "d.onnx", "--dataset", "digits", "--limit", "60",
                           "--skip-conv-layers")
    assert rc == 0, err
    assert "float32 0." in out and "int8 (onnxruntime) 0." in out and "every one a shift" in out, out
    assert "0 of them off a rounding tie" in out
    onnx.checker.check_model(onnx.load(tmp_path / "d.onnx"))
    rc, out, err = _vtasim(DIGITS_FLOAT, "--out", tmp_path / "k.onnx", "--calibrate", "kl")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "needs calibration inputs" in lines[0], err
