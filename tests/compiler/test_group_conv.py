"""Grouped, depthwise, dilated and transposed conv2d compiled from their DSL schedules.

References, all independent of the compiled program:
* the image's expected output: the tensor expressions evaluated in numpy (``vtasim.compiler.dsl.reference``);
* ``host_reference``: the layer by its ONNX/PyTorch definition (``vtasim.compiler.qnn.grouped``), which is
  itself checked here against a brute-force loop over every output and tap;
* ``gemm_counter`` against an ideal count derived here from the shapes: the (output block, input
  block) pairs that hold any weight of a group, times pixels and taps; for the transposed conv the
  taps that meet a real (not inserted) input row, counted by brute force.
Every case also asserts that its data are visible (few outputs clipped) and that flipping one weight
bit changes the output.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.knobs import check_knobs, fitting_knobs, knob_space
from vtasim.compiler.ops import compile_workload
from vtasim.compiler.ops.conv_layer import compile_conv_layer, host_reference, visible_inputs
from vtasim.compiler.qnn.grouped import conv2d_grouped_int32, conv2d_transpose_int32
from vtasim.compiler.tuning.workloads import Conv2dTranspose, parse_workload
from vtasim.hw.config import load_config

PRESETS = [None, "config/presets/1x16x16.json", "config/presets/2x16x16.json", "config/presets/1x32x32.json",
           "config/presets/1x8x8.json"]


def _cfg(preset):
    return load_config(preset)


def _names(cfg):
    """Reduced shapes sized to the config's blocks (the channels per group must fit them)."""
    b = cfg.block_in
    return [
        f"group_conv2d.6.6.{4 * b}.{4 * b}.3.1.1.2",        # 2 groups of 2 whole blocks each
        f"group_conv2d.6.6.{2 * b}.{2 * b}.3.1.2.{b // 2}",  # groups of 4 channels: 4 share a block (b=16)
        f"depthwise_conv2d.7.7.{2 * b}.3.1.1",
        f"depthwise_conv2d.8.8.{2 * b}.3.1.2",
        f"dilated_conv2d.9.9.{b}.{2 * b}.3.2.1.2",
        f"conv2d_transpose.4.4.{2 * b}.{b}.4.1.2",          # the DCGAN generator's layer shape, reduced
        f"conv2d_transpose.5.5.{b}.{b}.3.1.1",
    ]


# ---- the host references against brute force ----------------------------------------------------
def _brute_grouped(x, w, stride, pad, groups, dil):
    n, c, h, wd = x.shape
    o, cpg, k, _ = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (k - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    opg = o // groups
    for oc in range(o):
        g = oc // opg
        for y in range(oh):
            for xx in range(ow):
                for ci in range(cpg):
                    for r in range(k):
                        for s in range(k):
                            out[:, oc, y, xx] += xp[:, g * cpg + ci, y * stride + r * dil, xx * stride + s * dil] * \
                                int(w[oc, ci, r, s])
    return out


def _brute_transpose(x, w, stride, pad):
    n, c, h, wd = x.shape
    _, o, k, _ = w.shape
    oh, ow = (h - 1) * stride - 2 * pad + k, (wd - 1) * stride - 2 * pad + k
    out = np.zeros((n, o, oh, ow), np.int64)
    for i in range(h):
        for j in range(wd):
            for r in range(k):
                for s in range(k):
                    y, xx = i * stride + r - pad, j * stride + s - pad
                    if 0 <= y < oh and 0 <= xx < ow:
                        out[:, :, y, xx] += x[:, :, i, j].astype(np.int64) @ w[:, :, r, s].astype(np.int64)
    return out


@pytest.mark.parametrize("groups,dil,stride", [(1, 1, 1), (2, 1, 2), (4, 2, 1), (8, 1, 1)])
def test_grouped_host_reference_is_the_definition(groups, dil, stride):
    rng = np.random.default_rng(groups)
    x = rng.integers(-128, 128, (2, 8, 7, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (8, 8 // groups, 3, 3)).astype(np.int8)
    got = conv2d_grouped_int32(x, w, stride, 1, groups, dil)
    assert (got == _brute_grouped(x, w, stride, 1, groups, dil)).all()


@pytest.mark.parametrize("k,stride,pad", [(4, 2, 1), (3, 1, 1), (4, 2, 0), (2, 2, 0)])
def test_transpose_host_reference_is_the_definition(k, stride, pad):
    rng = np.random.default_rng(k + stride)
    x = rng.integers(-128, 128, (1, 3, 4, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 2, k, k)).astype(np.int8)
    assert (conv2d_transpose_int32(x, w, stride, pad) == _brute_transpose(x, w, stride, pad)).all()


# ---- ideal GEMM counts, from the shapes -----------------------------------------------------------
def _ideal_gemm(wl, cfg):
    nb = wl.batch // cfg.batch
    if isinstance(wl, Conv2dTranspose):
        taps_y = sum(sum((y + wl.pad - r) % wl.stride == 0 for r in range(wl.k)) for y in range(wl.oh))
        taps_x = sum(sum((x + wl.pad - s) % wl.stride == 0 for s in range(wl.k)) for x in range(wl.ow))
        return nb * taps_y * taps_x * (wl.cin // cfg.block_in) * (wl.cout // cfg.block_out)
    cpg, opg = wl.cin // wl.groups, wl.cout // wl.groups
    pairs = {(oc // cfg.block_out, (oc // opg * cpg + c) // cfg.block_in)
             for oc in range(wl.cout) for c in range(cpg)}
    return nb * wl.oh * wl.ow * wl.k * wl.k * len(pairs)


# ---- compiled on VTA ------------------------------------------------------------------------------
def _run_both(image):
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.engines import check_result
    from vtasim.sim.functional import run_image as functional_run
    out = {}
    for name, run in (("functional", functional_run), ("cycle", cycle_run)):
        res = run(image)
        assert check_result(image, res) == [], name
        out[name] = res
    assert out["functional"].counters == out["cycle"].counters
    return out


def _check_layer(cfg, name, knobs=None, seed=0, flip=True):
    wl = parse_workload(name, cfg)
    x, w, bias = visible_inputs(cfg, wl, seed)
    layer = compile_conv_layer(cfg, wl, x, w, bias, knobs=knobs)
    res = _run_both(layer.built.image)
    want = host_reference(wl, x, w, bias)
    for engine, r in res.items():
        assert (layer.output(r) == want).all(), engine
    counters = res["functional"].counters
    if layer.knobs.get("dw_alu"):
        # per output element: K*K MULs, K*K - 1 ADDs, then SHR, bias ADD, MIN, MAX; no GEMM
        elements = (wl.batch // cfg.batch) * wl.oh * wl.ow * (wl.cout // cfg.block_out)
        assert counters["gemm_counter"] == 0
        assert counters["alu_counter"] == elements * (2 * wl.k * wl.k - 1 + 4)
    else:
        assert counters["gemm_counter"] == _ideal_gemm(wl, cfg) == wl.ideal_gemm_uops(cfg)
    # visible data: few outputs at the upper clip bound, many strictly inside
    assert (want == 127).mean() <= 0.10, name
    assert ((want > 0) & (want < 127)).mean() >= 0.25, name
    if flip:
        w2 = w.copy()
        idx = np.unravel_index(np.argmax(np.abs(w2)), w2.shape)       # a weight that is not 0
        w2[idx] ^= np.int8(1 << 6)
        layer2 = compile_conv_layer(cfg, wl, x, w2, bias, knobs=layer.knobs)
        from vtasim.sim.functional import run_image
        y2 = layer2.output(run_image(layer2.built.image))
        assert (y2 == host_reference(wl, x, w2, bias)).all()
        assert (y2 != want).any(), f"{name}: flipping bit 6 of weight {idx} changed nothing"
    return layer, res


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: "default" if p is None else p.split("/")[-1][:-5])
@pytest.mark.parametrize("case", range(7))
def test_layer_exact_on_every_preset(preset, case):
    cfg = _cfg(preset)
    _check_layer(cfg, _names(cfg)[case], flip=preset is None)


@pytest.mark.parametrize("knobs", [
    {"oc_nthread": 2},
    {"h_nthread": 2, "tile_h": [2, 3]},
    {"tile_w": [2, 3], "tile_h": [3, 2], "tile_co": [2, 1]},
])
def test_group_conv_knobs_keep_it_exact(default_cfg, knobs):
    b = default_cfg.block_in
    layer, _ = _check_layer(default_cfg, f"group_conv2d.6.6.{4 * b}.{4 * b}.3.1.1.2", knobs=knobs, flip=False)
    assert all(layer.knobs[k] == v for k, v in knobs.items())


@pytest.mark.parametrize("knobs", [{"oc_nthread": 2, "tile_co": [2, 1]}, {"h_nthread": 2, "tile_h": [2, 2]},
                                   {"tile_w": [2, 2], "tile_ci": [2, 1]}])
def test_transpose_knobs_keep_it_exact(default_cfg, knobs):
    b = default_cfg.block_in
    _check_layer(default_cfg, f"conv2d_transpose.4.4.{2 * b}.{2 * b}.4.1.2", knobs=knobs, flip=False)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: "default" if p is None else p.split("/")[-1][:-5])
@pytest.mark.parametrize("shape", ["7.7.{c}.3.1.1", "6.6.{c}.3.0.1", "9.9.{c}.3.2.1"])
def test_depthwise_on_the_alu_exact_on_every_preset(preset, shape):
    from vtasim.compiler.ops.depthwise_alu import alu_fitting_knobs
    cfg = _cfg(preset)
    name = "depthwise_conv2d." + shape.format(c=2 * cfg.block_in)
    layer, _ = _check_layer(cfg, name, knobs=alu_fitting_knobs(parse_workload(name, cfg), cfg), flip=preset is None)
    assert layer.knobs["dw_alu"] == 1


def test_depthwise_alu_knob_only_where_it_applies(default_cfg):
    s1 = knob_space(parse_workload("depthwise_conv2d.8.8.32.3.1.1", default_cfg), default_cfg)
    assert s1["dw_alu"] == [0, 1]
    s2 = parse_workload("depthwise_conv2d.8.8.32.3.1.2", default_cfg)
    with pytest.raises(CompileError, match="unknown knob.*dw_alu"):
        check_knobs(s2, default_cfg, {"dw_alu": 1})
    assert "dw_alu" not in knob_space(parse_workload("group_conv2d.6.6.64.64.3.1.1.2", default_cfg), default_cfg)


def test_depthwise_is_block_diagonal(default_cfg):
    """A depthwise layer runs one GEMM uop per channel block, pixel and tap (BLOCK_IN useful MACs
    of each), and its packed kernel is zero off the diagonal of every block."""
    wl = parse_workload("depthwise_conv2d.7.7.32.3.1.1", default_cfg)
    x, w, bias = visible_inputs(default_cfg, wl)
    layer = compile_conv_layer(default_cfg, wl, x, w, bias)
    addr = layer.built.buffers["kernel"].addr
    (seg,) = [s for s in layer.built.image.segments if s.addr == addr]
    k = np.frombuffer(bytes(seg.data), np.int8).reshape(2, 1, 1, 3, 3, 16, 16)     # what VTA loads
    for c in range(32):                                                           # w[c] on the diagonal
        assert (k[c // 16, 0, 0, :, :, c % 16, c % 16] == w[c, 0]).all()
    eye = np.eye(16, dtype=bool)
    assert (k[..., ~eye] == 0).all()
    assert (k[..., eye] != 0).mean() > 0.9
    assert wl.ideal_gemm_uops(default_cfg) == 7 * 7 * 9 * 2


def test_catalogue_names_compile(default_cfg):
    for name in _names(default_cfg):
        c = compile_workload(name, default_cfg)
        assert c.image.insn_count > 0
        assert knob_space(c.workload, default_cfg)["tile_ci"]


def test_tuner_space_and_fitting_knobs(default_cfg):
    wl = parse_workload("depthwise_conv2d.56.56.64.3.1.1", default_cfg)
    space = knob_space(wl, default_cfg)
    assert space["tile_ci"] == [[1, 1]] and space["tile_co"] == [[1, 1]]      # one block per super-group
    assert [56 // 8, 8] in space["tile_h"] and space["oc_nthread"] == [1, 2]
    k = fitting_knobs(wl, default_cfg)
    assert wl.tile_fits(default_cfg, 1, k["tile_h"][1], k["tile_w"][1], 1, 1, 1)
    with pytest.raises(CompileError, match="oc_nthread = 2 must divide the super-groups"):
        check_knobs(parse_workload("group_conv2d.6.6.48.48.3.1.1.3", default_cfg), default_cfg, {"oc_nthread": 2})


def test_tune_measures_group_conv(default_cfg):
    from vtasim.compiler.tuning.tune import tune
    from vtasim.compiler.tuning.tune import measure
    name = "depthwise_conv2d.8.8.32.3.1.1"
    res = tune(name, default_cfg, trials=3, jobs=0, progress=None)
    best = res.best()
    assert res.records[0]["knobs"] == fitting_knobs(parse_workload(name, default_cfg), default_cfg)   # the seed
    fit = measure(name, 1, default_cfg.to_dict(), res.records[0]["knobs"])
    assert best is not None and best["cycles"] <= fit["cycles"]
    assert best["gemm_uops"] in (8 * 8 * 9 * 2, 0)                  # the GEMM form, or dw_alu = 1


@pytest.mark.parametrize("name,rule", [
    ("group_conv2d.6.6.32.32.3.1.1.3", "groups = 3 must divide"),
    ("group_conv2d.6.6.48.48.3.1.1.2", "24 input and 24 output channels per group fit neither"),
    ("conv2d_transpose.4.4.16.16.3.1.2", "kernel = 3 must be a multiple of the stride 2"),
    ("conv2d_transpose.4.4.16.16.4.4.2", "pad = 4 must be at most K - 1"),
    ("dilated_conv2d.4.4.16.16.3.0.1.3", "kernel span = 7"),
    ("depthwise_conv2d.6.6.8.3.1.1", "groups = 8 must be a multiple of 16"),
])
def test_bad_shapes_name_the_rule(default_cfg, name, rule):
    with pytest.raises(CompileError, match=rule):
        parse_workload(name, default_cfg)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["depthwise_conv2d.56.56.64.3.1.1", "depthwise_conv2d.56.56.64.3.1.2",
                                  "depthwise_conv2d.14.14.256.3.1.1", "depthwise_conv2d.14.14.256.3.1.2",
                                  "group_conv2d.28.28.128.128.3.1.1.4", "conv2d_transpose.8.8.256.128.4.1.2",
                                  "conv2d_transpose.16.16.128.64.4.1.2", "dilated_conv2d.28.28.64.64.3.2.1.2"])
def test_full_size_layers(default_cfg, name):
    _check_layer(default_cfg, name, flip=False)


@pytest.mark.parametrize("name", ["depthwise_conv2d.8.8.32.3.1.1", "conv2d_transpose.4.4.32.16.4.1.2"])
def test_vtasim_compile_then_run_check(tmp_path, capsys, name):
    from vtasim.sim.cli import main
    out = tmp_path / "img"
    assert main(["compile", name, "--out", str(out)]) == 0
    assert "the largest tiles that fit" in capsys.readouterr().out
    assert main(["run", str(out), "--engine", "cycle", "--check"]) == 0
    assert main(["run", str(out), "--engine", "functional", "--check"]) == 0


def test_vtasim_compile_bad_group_is_one_line_exit_2(tmp_path, capsys):
    from vtasim.sim.cli import main
    rc = main(["compile", "group_conv2d.6.6.32.32.3.1.1.3", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "groups = 3 must divide" in err
    rc = main(["compile", "depthwise_conv2d.8.8.32.3.1.2", "--knobs", '{"dw_alu": 1}', "--out", str(tmp_path / "y")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "unknown knob(s) dw_alu" in err
