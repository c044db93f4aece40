"""The four edge networks users bring, end to end, against onnxruntime.

MobileNetV2-shaped (depthwise convs, inverted residuals, ReLU6), YOLO-tiny-shaped (LeakyReLU,
MaxPool, nearest Resize, Concat), BERT-tiny-shaped (embeddings, LayerNormalization, attention with
Softmax, Gelu as Erf, its linear layers as dense layers on VTA) and a DCGAN-style generator
(ConvTranspose, all four on VTA with non-zero input zero points), with random He-initialised weights, quantised by onnxruntime's static quantisation
at test time (reduced sizes here; ``bench/edge_networks.py`` runs them at full size).

References: onnxruntime on the CPU for the network (top-1 of the flattened output over 32 inputs, the
relative error under the bound below), and the numpy execution of the same quantised graph for the
VTA regions on the cycle engine (bit for bit).

Top-1 agrees on every input for all four. Every VTA requantisation is exact (``plan_requant``'s
exact plan where the fixed-point one is not: equal to the host's rule on every accumulator the layer
can reach), so each network with its VTA regions equals the same network run entirely on the host
(``mode="host"``), bit for bit, on every input; the relative-error bounds are the measured figures
with a margin.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from vtasim.compiler.frontend.compare import OrtReference, agreement, output_lsb
from vtasim.compiler.frontend.models import edge
from vtasim.compiler.frontend.network import Network

SMALL = {"mobilenet_v2": dict(hw=32, width=0.5, classes=16), "yolo_tiny": dict(hw=64, classes=3),
         "bert_tiny": dict(), "dcgan": dict()}
# (relative error bound, least top-1 agreement, least regions on VTA) at these sizes
BOUNDS = {"mobilenet_v2": (0.15, 1.0, 50), "yolo_tiny": (0.08, 1.0, 10), "bert_tiny": (0.08, 1.0, 13),
          "dcgan": (0.02, 1.0, 4)}
# onnxruntime writes QOperator for the convolutional ones; those run in the slow set
CASES = [pytest.param((n, "qdq"), id=f"{n}-qdq") for n in SMALL]
CASES += [pytest.param((n, "qop"), id=f"{n}-qop", marks=pytest.mark.slow) for n in ("mobilenet_v2", "yolo_tiny")]


@pytest.fixture(scope="module", params=CASES)
def network(request, tmp_path_factory, cfg):
    name, fmt = request.param
    path = edge.make(name, tmp_path_factory.mktemp(name) / f"{name}_{fmt}.onnx", fmt=fmt, **SMALL[name])
    return name, path, Network.from_onnx(path, cfg)


def test_vta_regions_equal_the_host_execution_bit_for_bit(network, cfg):
    """Not within an LSB: the network with its VTA regions gives the very outputs of the same network
    with every layer on the host, on each of 32 inputs (DCGAN's transposed convs with the exact plan)."""
    name, path, net = network
    host = Network.from_onnx(path, cfg, mode="host")
    assert not host.regions and len(net.regions) >= BOUNDS[name][2]
    xs = edge.calibration(onnx.load(path), n=32, seed=7)
    ours = np.stack([net.run(x[None], engine="reference")[0].reshape(-1) for x in xs])
    theirs = np.stack([host.run(x[None], engine="reference")[0].reshape(-1) for x in xs])
    assert np.unique(theirs.argmax(1)).size > 1 and np.std(theirs, axis=0).mean() > 1e-3
    assert np.array_equal(ours, theirs), np.abs(ours - theirs).max()


def test_network_agrees_with_onnxruntime(network):
    name, path, net = network
    bound, top1, min_regions = BOUNDS[name]
    assert len(net.regions) >= min_regions, net.notes
    xs = edge.calibration(onnx.load(path), n=32, seed=7)
    ort = OrtReference(path)
    ours = np.stack([net.run(x[None], engine="reference")[0].reshape(-1) for x in xs])
    refs = np.stack([ort.run(x[None]).reshape(-1) for x in xs])
    m = agreement(ours, refs, output_lsb(net.graph))
    assert m["top1"] >= top1 and m["rel_err"] < bound, m
    assert np.unique(refs.argmax(1)).size > 1 or name == "dcgan", "one class for every input: top-1 cannot fail"
    assert np.std(refs, axis=0).mean() > 1e-3                   # the outputs move with the input


def test_dcgan_transposed_convs_on_vta_equal_their_host_execution(tmp_path_factory, cfg):
    """Every ConvTranspose of the quantised DCGAN runs on VTA (input zero points non-zero: onnxruntime's
    calibrated latent code, and -128 after each ReLU); fed the host execution's input, each region's
    output on the cycle engine equals the host's exact int32 accumulator (``qnn.qconv2d_transpose``,
    zero-point correction at the borders included) requantised by the region's plan, bit for bit, and
    the host's own requantisation bit for bit too: every layer takes the exact plan, and on at least one
    the fixed-point plan (``requant="fixed"``) is 1 LSB off the host on this input, so the equality
    is the exact plan's doing."""
    from vtasim.compiler.frontend.region import VtaRegion
    from vtasim.compiler.frontend.execute import execute
    from vtasim.compiler.frontend.host_ops import qconv_transpose_acc
    path = edge.make("dcgan", tmp_path_factory.mktemp("dcgan") / "dcgan.onnx", **SMALL["dcgan"])
    net = Network.from_onnx(path, cfg)
    host = Network.from_onnx(path, cfg, mode="host")
    convs = [n for n in net.graph.nodes if n.op == "qconv_transpose"]
    assert len(convs) == 4 and all(n.target == "vta" and n.name in net.regions for n in convs), net.notes
    # the int8 zero point VTA sees (a uint8 tensor is shifted by -128): non-zero for every layer
    assert all(n.attrs["x_zp"] - (128 if n.attrs["x_dtype"] == np.uint8 else 0) != 0 for n in convs)
    x = edge.calibration(onnx.load(path), n=1, seed=3)
    vals: dict = {}
    execute(host.graph, host.regions, {host.input_name: x}, engine="reference", values_out=vals)
    fixed_off = 0
    for n in convs:
        region, xin = net.regions[n.name], vals[n.inputs[0]]
        y, res = region.run(xin, engine="cycle")
        assert res.counters["gemm_counter"] == region.layer.geom.transpose_workload().ideal_gemm_uops(cfg)
        acc = qconv_transpose_acc(n, xin)
        shift = 128 if n.attrs["y_dtype"] == np.uint8 else 0
        assert np.array_equal(y.astype(np.int32), region.plan.apply(acc, axis=1) + shift), n.name
        assert region.plan.path == "exact", (n.name, region.plan.path)
        assert np.array_equal(y.astype(np.int32), vals[n.outputs[0]]), n.name
        assert ((y > np.iinfo(y.dtype).min) & (y < np.iinfo(y.dtype).max)).mean() > 0.25, n.name   # ReLU floor
        fixed = VtaRegion(n, cfg, path="fixed").check(n.attrs["x_dtype"])[1]
        fixed_off += int((fixed.apply(acc, axis=1) + shift != vals[n.outputs[0]]).any())
    assert fixed_off, "the fixed-point plan equals the host on every layer here: the test would not tell"


def test_vta_regions_on_the_cycle_engine_equal_their_numpy_execution(network):
    name, path, net = network
    x = edge.calibration(onnx.load(path), n=1, seed=3)
    y_cycle, records = net.run(x, engine="cycle")
    y_ref, _ = net.run(x, engine="reference")
    assert np.array_equal(y_cycle, y_ref)
    vta = [r for r in records if r.target == "vta"]
    assert len(vta) == len(net.regions) and all(r.cycles for r in vta)
