"""Multi-op VTA regions: residual blocks and a reduced ResNet-18 body as one memory image each.

References: the host's quantised add (``host_ops``, float64 as onnxruntime), each region's numpy
execution of the same integers (``engine="reference"``), the same network with one region per
convolution and the adds on the host (``region_mode="single"``, which must give the same bytes: the
VTA add equals the host's add), onnxruntime, and the image's numpy oracle (``check_result``)."""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.compiler.frontend.compare import OrtReference, agreement, output_lsb
from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.network import Network
from vtasim.compiler.frontend.region_chain import VtaChainRegion
from vtasim.sim.engines import check_result, run_engine

# Worst relative error of the network output against onnxruntime (the documented bound of the existing
# per-layer path: the layers' 1-LSB requantisation differences compound; the adds add none).
BLOCK_REL_ERR = 0.02
RESNET_REL_ERR = 0.1


def _chains(net) -> list:
    return list({id(r): r for r in net.regions.values() if isinstance(r, VtaChainRegion)}.values())


def _block(kind, tmp_path, fmt="qdq"):
    from vtasim.compiler.frontend.models import blocks
    if kind == "residual":
        return blocks.residual_block(tmp_path / "res.onnx", c=32, hw=8, format=fmt)
    return blocks.downsample_block(tmp_path / "down.onnx", cin=32, cout=64, hw=8, format=fmt)


def _input(net, seed=11):
    return np.random.default_rng(seed).random(net.graph.inputs[net.input_name][0], np.float32)


def test_qadd_plan_equals_the_host_add_on_every_pair():
    """The ALU plan against the host's add (host_ops, the float rule onnxruntime uses) on all 2^16
    int8 pairs, for random scales and zero points; outputs cover the range (not saturated)."""
    from vtasim.compiler.frontend.composite import qadd_node
    from vtasim.compiler.frontend.host_ops import run_host
    from vtasim.compiler.qnn.qadd import plan_qadd
    rng = np.random.default_rng(3)
    grid = np.arange(-128, 128)
    a, b = (v.astype(np.int8) for v in np.meshgrid(grid, grid, indexing="ij"))
    for _ in range(6):
        sa, sb = rng.uniform(0.005, 0.1, 2)
        sy = (sa + sb) * rng.uniform(0.8, 1.6)         # the sum's range spans most of int8
        za, zb = (int(v) for v in rng.integers(-128, 128, 2))
        zy = int(rng.integers(-20, 21))
        act = "relu" if rng.random() < 0.5 else None
        node = qadd_node("add", "add", "a", "b", "y", sa, za, sb, zb, sy, zy, np.int8, act)
        host = run_host(node, [a, b])[0].astype(np.int64)
        lo = zy if act == "relu" else -128
        for one in (True, False):                     # both plan shapes
            plan = plan_qadd(sa, za, sb, zb, sy, zy, lo, 127, one_multiplier=one)
            assert np.array_equal(plan.apply(a, b), host)
        assert len(np.unique(host)) >= 40 and np.mean((host > lo) & (host < 127)) > 0.2


def test_split_plan_on_the_alu_equals_the_host(cfg):
    """The seventeen-stage split plan (each input loaded twice) compiled and run on the cycle engine."""
    from vtasim.compiler.ops.residual import build_qadd
    from vtasim.compiler.qnn.qadd import plan_qadd, qadd_float
    args = (0.06724012643098831, -8, 0.014712294563651085, -128, 0.0440719909965992, -128, -128, 127)   # a block's add
    plan = plan_qadd(*args, one_multiplier=False)
    assert len(plan.stages) > 10
    layer = build_qadd(cfg, (1, 32, 8, 8), plan)
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-128, 128, (1, 32, 8, 8)).astype(np.int8) for _ in range(2))
    y, _ = layer.run(a, b, engine="cycle")
    assert np.array_equal(y, qadd_float(a, b, *args)) and len(np.unique(y)) > 64
    image = layer.image(a, b)
    assert check_result(image, run_engine("cycle", image)) == []


@pytest.mark.parametrize("fuse", [True, False], ids=["add-fused", "add-kernel"])
@pytest.mark.parametrize("kind", ["residual", "downsample"])
def test_blocks_run_as_one_region_with_the_add_on_vta(kind, fuse, cfg, tmp_path):
    """The add fused into the second convolution's epilogue, or a kernel of its own."""
    path = _block(kind, tmp_path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False, fuse_adds=fuse)
    (chain,) = _chains(net)
    ops = [n.op for n in chain.nodes]
    assert ops.count("qadd") == 1 and ops.count("qconv") == (2 if kind == "residual" else 3)
    assert all(n.target == "vta" for n in net.graph.nodes if n.op in ("qconv", "qadd"))
    assert len(chain.inputs) == 1 and len(chain.outputs) == 1     # one pack in, one unpack out
    x = _input(net)
    vals = {}
    y, records = execute(net.graph, net.regions, {net.input_name: x}, engine="cycle", values_out=vals)
    y = y[net.graph.outputs[0]]
    # the region against its numpy execution, on the input it got
    ref = chain.reference({v: vals[v] for v in chain.inputs})
    out = chain.outputs[0]
    assert np.array_equal(vals[out], ref[out])
    assert len(np.unique(vals[out])) > 16                          # not saturated
    # the same network with the adds on the host: the same bytes
    single = Network.from_onnx(path, cfg, skip_first_conv=False, region_mode="single")
    assert not _chains(single) and any(n.op == "qadd" and n.target == "host" for n in single.graph.nodes)
    y_single, rec_single = single.run(x, engine="cycle")
    assert np.array_equal(y, y_single)
    # per-member shares add up to the launch; the image's oracle holds on both engines
    vta = [r for r in records if r.target == "vta"]
    assert len(vta) == len(chain.nodes)
    assert all(r.cycles > 0 and r.dram_bytes > 0 for r in vta if r.op == "qconv")
    add = next(r for r in vta if r.op == "qadd")             # a fused add's work is in its convolution's row
    assert (add.cycles, add.dram_bytes) == (0, 0) if fuse else add.cycles > 0 and add.dram_bytes > 0
    kernels = chain.compile({v: vals[v].shape for v in chain.inputs})["members"]
    assert len(kernels) == len(chain.nodes) - (1 if fuse else 0)
    feeds = {v: vals[v] for v in chain.inputs}
    (image,) = chain.images(feeds)
    res = run_engine("cycle", image)
    assert sum(r.cycles for r in vta) == res.cycles
    assert check_result(image, res) == [] and check_result(image, run_engine("functional", image)) == []
    m = agreement(y, OrtReference(path).run(x), output_lsb(net.graph))
    assert m["rel_err"] < BLOCK_REL_ERR, m


def test_reduced_resnet_body_is_one_region(resnet_small, cfg):
    """graph_pack's span: from after the max-pool to the global average pool, one image."""
    net = Network.from_onnx(resnet_small, cfg)
    (chain,) = _chains(net)
    ops = [n.op for n in chain.nodes]
    assert ops.count("qconv") == 19 and ops.count("qadd") == 8
    prod = net.graph.producers()
    assert [prod[v].op for v in chain.inputs] == ["MaxPool"]
    assert [c.op for v in chain.outputs for c in net.graph.consumers()[v]] == ["qgap"]
    x = _input(net, 5)
    vals = {}
    y, records = execute(net.graph, net.regions, {net.input_name: x}, engine="cycle", values_out=vals)
    y = y[net.graph.outputs[0]]
    ref = chain.reference({v: vals[v] for v in chain.inputs})
    assert np.array_equal(vals[chain.outputs[0]], ref[chain.outputs[0]])
    y_single, _ = Network.from_onnx(resnet_small, cfg, region_mode="single").run(x, engine="cycle")
    assert np.array_equal(y, y_single)
    m = agreement(y, OrtReference(resnet_small).run(x), output_lsb(net.graph))
    assert m["rel_err"] < RESNET_REL_ERR, m
    edge = chain.edge_bytes({v: vals[v].shape for v in chain.inputs})
    info = chain.edge_info()
    assert edge["in"] == sum(e["nbytes"] for e in info.values() if e["role"] == "input") > 0
    assert edge["out"] == sum(e["nbytes"] for e in info.values() if e["role"] == "output") > 0
    # the edge info alone packs the input into the image and reads the output back
    from vtasim.compiler.ops.layout import pack_nchw, unpack_nchw
    from vtasim.sim.image import MemoryImage, Segment
    (image,) = chain.images({v: vals[v] for v in chain.inputs})
    (e_in,) = (e for e in info.values() if e["role"] == "input")
    (out_v, e_out), = ((v, e) for v, e in info.items() if e["role"] == "output")
    t, left, _, _ = e_in["pads"]
    phys = np.full(e_in["packed"], e_in["fill"], np.int8)
    xv = vals[chain.inputs[0]]
    phys[:, :, t:t + xv.shape[2], left:left + xv.shape[3]] = pack_nchw(xv, cfg.batch, cfg.block_in)
    segs = [Segment(s.addr, phys.tobytes()) if s.addr == e_in["addr"] else s for s in image.segments]
    res = run_engine("cycle", MemoryImage(image.cfg, image.insn_addr, image.insn_count, segs, image.outputs, {}))
    raw = np.frombuffer(res.outputs[e_out["buffer"]], np.int8).reshape(e_out["packed"])
    t, left, _, _ = e_out["pads"]
    got = unpack_nchw(raw[:, :, t:t + e_out["shape"][2], left:left + e_out["shape"][3]])
    assert np.array_equal(got, vals[out_v])


def test_report_of_a_region_run(cfg, tmp_path):
    """The per-layer CSV lists every member; the plots (the roofline skips the MAC-less add) are written."""
    pytest.importorskip("matplotlib")
    import csv

    from vtasim.compiler.frontend.report import write_report
    path = _block("residual", tmp_path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False)
    _, records = net.run(_input(net), engine="cycle")
    paths = write_report(records, tmp_path / "rep", cfg)
    assert [p.name for p in paths] == ["layers.csv", "cycles.png", "utilisation.png", "roofline.png"]
    with open(paths[0], newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["placement"] == "vta"]
    assert [r["op"] for r in rows] == ["qconv", "qconv", "qadd"] and all(int(r["cycles"]) > 0 for r in rows[:2])


def test_saved_region_images_replay_with_check(cfg, tmp_path):
    """``--save-images`` writes the region's image; ``vtasim run --check`` replays it."""
    from cli_checks import vtasim
    path = _block("residual", tmp_path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False)
    out = tmp_path / "imgs"
    net.run(_input(net), engine="functional", save_images=out)
    dirs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(dirs) == 1
    proc = vtasim("run", dirs[0], "--engine", "cycle", "--check")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _short_shift(stages):
    """The stages with the add's final requantising shift one bit short."""
    last = max(k for k, st in enumerate(stages) if st[1] == "shr")
    return [(o, k, lhs, ("imm", rv - 1)) if j == last else (o, k, lhs, (rk, rv))
            for j, (o, k, lhs, (rk, rv)) in enumerate(stages)]


def test_a_dropped_requant_shift_is_caught(cfg, tmp_path, monkeypatch):
    """Mutation: the add's final shift one bit short.  plan_qadd's all-pairs proof refuses every such
    plan, and a region built with one anyway differs from the host's add."""
    from vtasim.compiler.qnn import RequantError
    from vtasim.compiler.qnn import qadd as qadd_mod
    real_plan = qadd_mod.plan_qadd

    def short_plan(*args):
        plan = real_plan(*args)
        plan.stages = _short_shift(plan.stages)
        return plan
    path = _block("residual", tmp_path)
    net = Network.from_onnx(path, cfg, skip_first_conv=False)
    a = next(n for n in net.graph.nodes if n.op == "qadd").attrs
    args = (a["a_scale"], a["a_zp"], a["b_scale"], a["b_zp"], a["y_scale"], a["y_zp"], -128, 127)
    grid = np.arange(-128, 128)
    pa, pb = (v.astype(np.int8) for v in np.meshgrid(grid, grid, indexing="ij"))
    assert not np.array_equal(short_plan(*args).apply(pa, pb), qadd_mod.qadd_float(pa, pb, *args))
    for maker in ("_one_multiplier", "_stages"):          # both plan shapes, each with its shift short
        real = getattr(qadd_mod, maker)
        monkeypatch.setattr(qadd_mod, maker, lambda *x, real=real: (_short_shift(real(*x)[0]),) + real(*x)[1:])
    with pytest.raises(RequantError):
        real_plan(*args)
    monkeypatch.undo()
    monkeypatch.setattr(qadd_mod, "plan_qadd", short_plan)
    bad = Network.from_onnx(path, cfg, skip_first_conv=False)
    assert _chains(bad)
    x = _input(net)
    y_bad, _ = bad.run(x, engine="cycle")
    y_good, _ = Network.from_onnx(path, cfg, skip_first_conv=False, region_mode="single").run(x, engine="cycle")
    assert not np.array_equal(y_bad, y_good)


def test_a_chain_of_adds_in_one_launch(cfg):
    """Three adds, each reading the one before (and the region input), as three kernels of one image: each
    value equals the host's add of the host's values, on both engines."""
    from vtasim.compiler.frontend.composite import qadd_node
    from vtasim.compiler.frontend.graph import Graph
    from vtasim.compiler.frontend.host_ops import run_host
    shape = (1, 32, 6, 6)
    nodes = [qadd_node("a0", "a0", "x", "x", "y0", 0.0213, 3, 0.0197, -5, 0.0311, 2, np.int8),
             qadd_node("a1", "a1", "y0", "x", "y1", 0.0311, 2, 0.0213, 3, 0.0517, -1, np.int8, "relu"),
             qadd_node("a2", "a2", "y1", "y0", "y2", 0.0517, -1, 0.0311, 2, 0.0613, 0, np.int8)]
    g = Graph(nodes, {"x": (shape, np.int8)}, ["y2"], {}, shapes={v: shape for v in ("x", "y0", "y1", "y2")})
    chain = VtaChainRegion(nodes, g, cfg)
    assert chain.inputs == ["x"] and chain.outputs == ["y2"]
    x = np.random.default_rng(2).integers(-128, 128, shape).astype(np.int8)
    host = {"x": x}
    for n in nodes:
        host[n.outputs[0]] = run_host(n, [host[v] for v in n.inputs])[0]
    assert len(np.unique(host["y2"])) > 32
    for engine in ("functional", "cycle"):
        outs, res, shares = chain.run({"x": x}, engine=engine)
        assert np.array_equal(outs["y2"], host["y2"]), engine
    assert sum(c for c, _ in shares) == res.cycles and all(c > 0 for c, _ in shares)
    (image,) = chain.images({"x": x})
    assert check_result(image, run_engine("cycle", image)) == []
