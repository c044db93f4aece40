"""Quantised VTA layers (vtasim.compiler.ops.quantized): the compiled program on the functional and cycle
engines equals the numpy integer execution through vtasim.compiler.qnn bit for bit, and that execution is
within the plan's proved bound of TVM's qnn.requantize; one layer on the RTL."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from vtasim.compiler import qnn
from vtasim.compiler.errors import CompileError
from vtasim.compiler.ops.quantized import build_qconv, build_qdense
from vtasim.sim.engines import check_result


def _plan(cfg, rng, m_scale, weight, bias, za, zp, path, per_channel, relu):
    o = weight.shape[0]
    if path == "shift":
        m = 2.0 ** -int(np.log2(1 / m_scale))
    else:
        m = m_scale * rng.uniform(0.6, 1.6, o) if per_channel else m_scale
    bound = qnn.conv_acc_bound(weight if weight.ndim == 4 else weight[:, :, None, None], bias, za)
    return qnn.plan_requant(m, bound, zp, -128, 127, cfg, path=path, relu=relu)


def _requantize_float_free(layer, x):
    """TVM's integer qnn.requantize of the layer's int32 accumulator (in_scale = m, out_scale = 1)."""
    g, plan = layer.geom, layer.plan
    acc = (qnn.qdense(x, layer.weight[:, :, 0, 0], layer.za, 0) if g.dense else
           qnn.qconv2d(x, layer.weight, layer.za, 0, g.strides, g.pads))
    acc = acc.astype(np.int64) + layer.bias.reshape((1, -1) + (1,) * (acc.ndim - 2))
    y = qnn.requantize(acc, plan.multiplier, 0, 1.0, plan.out_zp, "int8", axis=1)
    return np.clip(y, plan.out_lo, plan.out_hi)


CONV_CASES = [
    # (N, C, H, W, O, kh, kw, strides, pads, path, per_channel, relu)
    (1, 16, 6, 6, 16, 3, 3, (1, 1), (1, 1, 1, 1), "shift", False, True),
    (1, 20, 7, 5, 24, 3, 3, (2, 2), (1, 1, 1, 1), "fixed", False, False),
    (2, 9, 5, 6, 18, 1, 1, (1, 1), (0, 0, 0, 0), "fixed", True, True),
    (1, 32, 6, 7, 16, 3, 2, (1, 2), (0, 1, 2, 0), "fixed", True, False),
    (1, 5, 9, 9, 7, 5, 5, (2, 1), (2, 2, 2, 2), "shift", False, False),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("za_kind", ["zero", "random"])
def test_qconv_engines_equal_reference(default_cfg, case, za_kind):
    n, c, h, w, o, kh, kw, strides, pads, path, per_channel, relu = case
    rng = np.random.default_rng(zlib.crc32(repr((case, za_kind)).encode()))
    weight = rng.integers(-128, 128, (o, c, kh, kw)).astype(np.int8)
    bias = rng.integers(-20000, 20000, o).astype(np.int32)
    za = 0 if za_kind == "zero" else int(rng.integers(-128, 128))
    zp = int(rng.integers(-10, 10))
    plan = _plan(default_cfg, rng, 10 ** rng.uniform(-4.3, -3), weight, bias, za, zp, path, per_channel, relu)
    layer = build_qconv(default_cfg, (n, c, h, w), weight, bias, strides, pads, za, plan)
    assert layer.geom.host_pad == (za != 0 and any(pads) or pads[0] != pads[2] or pads[1] != pads[3])
    x = rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)
    want = layer.reference(x)
    assert want.shape == layer.out_shape == (n, o) + qnn.conv_out_hw(h, w, kh, kw, strides, pads)
    for engine in ("functional", "cycle"):
        y, result = layer.run(x, engine=engine)
        assert y.dtype == np.int8 and np.array_equal(y, want), engine
    assert check_result(layer.image(x), result) == []
    assert result.cycles > 0 and result.counters["gemm_counter"] > 0
    err = np.abs(want.astype(np.int64) - _requantize_float_free(layer, x))
    assert err.max() <= plan.max_error_lsb
    assert layer.macs == n * o * want.shape[2] * want.shape[3] * c * kh * kw
    assert layer.dram_bytes >= x.nbytes + weight.nbytes + want.nbytes


def test_qconv_one_program_many_inputs(default_cfg):
    """The program is compiled once; only the input segment changes between runs."""
    rng = np.random.default_rng(3)
    weight = rng.integers(-128, 128, (16, 16, 3, 3)).astype(np.int8)
    plan = qnn.plan_requant(0.0007, qnn.conv_acc_bound(weight, None, -3), 2, -128, 127, default_cfg)
    layer = build_qconv(default_cfg, (1, 16, 5, 5), weight, None, 1, 1, -3, plan)
    images = [layer.image(rng.integers(-128, 128, (1, 16, 5, 5)).astype(np.int8)) for _ in range(3)]
    assert all(im.insn_bytes() == images[0].insn_bytes() for im in images)
    assert len({next(iter(im.expected.values())) for im in images}) == 3
    for _ in range(2):
        x = rng.integers(-128, 128, (1, 16, 5, 5)).astype(np.int8)
        assert np.array_equal(layer.run(x, engine="functional")[0], layer.reference(x))


def test_qconv_resnet_shape_uses_tophub(default_cfg):
    """ResNet-18 C10 (14x14, 256 -> 512, 1x1, stride 2) has a TopHub record; the extra accumulator vector
    of a per-channel plan still fits its tiles."""
    rng = np.random.default_rng(10)
    w = rng.integers(-128, 128, (512, 256, 1, 1)).astype(np.int8)
    bias = rng.integers(-5000, 5000, 512).astype(np.int32)
    plan = qnn.plan_requant(rng.uniform(1e-5, 5e-5, 512), qnn.conv_acc_bound(w, bias, 6), -2, -128, 127,
                            default_cfg, relu=True)
    layer = build_qconv(default_cfg, (1, 256, 14, 14), w, bias, 2, 0, 6, plan)
    assert layer.knob_source == "tophub" and layer.knobs["tile_co"] == [2, 16]
    x = rng.integers(-128, 128, (1, 256, 14, 14)).astype(np.int8)
    y, result = layer.run(x, engine="cycle")
    assert np.array_equal(y, layer.reference(x))
    assert result.counters["gemm_counter"] == 7 * 7 * (256 // 16) * (512 // 16)


@pytest.mark.parametrize("preset", ["1x8x8", "2x16x16", "1x32x32"])
def test_qconv_other_configs(preset):
    from vtasim.hw.config import load_preset
    cfg = load_preset(preset)
    rng = np.random.default_rng(11)
    w = rng.integers(-128, 128, (12, 10, 3, 3)).astype(np.int8)
    plan = qnn.plan_requant(rng.uniform(3e-4, 9e-4, 12), qnn.conv_acc_bound(w, None, 3), 0, -128, 127, cfg)
    layer = build_qconv(cfg, (3, 10, 5, 6), w, None, 1, 1, 3, plan)
    assert layer.geom.n_pad % cfg.batch == 0 and layer.geom.c_pad % cfg.block_in == 0
    x = rng.integers(-128, 128, (3, 10, 5, 6)).astype(np.int8)
    for engine in ("functional", "cycle"):
        assert np.array_equal(layer.run(x, engine=engine)[0], layer.reference(x)), engine


@pytest.mark.parametrize("n, k, o, za, path, per_channel", [
    (1, 64, 10, 0, "shift", False), (3, 40, 24, -9, "fixed", False), (2, 100, 33, 17, "fixed", True)])
def test_qdense_engines_equal_reference(default_cfg, n, k, o, za, path, per_channel):
    rng = np.random.default_rng(n * 1000 + k)
    weight = rng.integers(-128, 128, (o, k)).astype(np.int8)
    bias = rng.integers(-9000, 9000, o).astype(np.int32)
    plan = _plan(default_cfg, rng, 10 ** rng.uniform(-3.8, -3), weight, bias, za, 4, path, per_channel, True)
    layer = build_qdense(default_cfg, (n, k), weight, bias, za, plan)
    x = rng.integers(-128, 128, (n, k)).astype(np.int8)
    want = layer.reference(x)
    assert want.shape == (n, o)
    for engine in ("functional", "cycle"):
        y, _ = layer.run(x, engine=engine)
        assert np.array_equal(y, want), engine
    assert np.abs(want.astype(np.int64) - _requantize_float_free(layer, x)).max() <= plan.max_error_lsb


def test_qconv_rejects(default_cfg):
    rng = np.random.default_rng(4)
    w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
    plan = qnn.plan_requant(0.001, qnn.conv_acc_bound(w, None, 0), 0, -128, 127, default_cfg)
    small = qnn.plan_requant(0.001, 1000, 0, -128, 127, default_cfg)
    with pytest.raises(qnn.RequantError, match=r"the accumulator reaches \d+ but the plan was made for acc_bound = 1000"):
        build_qconv(default_cfg, (1, 4, 5, 5), w, None, 1, 1, 0, small)
    with pytest.raises(qnn.QnnError, match="weight zero point 3 is not 0"):
        build_qconv(default_cfg, (1, 4, 5, 5), w, None, 1, 1, 0, plan, zw=3)
    with pytest.raises(qnn.QnnError, match="input has 5 channels, the weight expects 4"):
        build_qconv(default_cfg, (1, 5, 5, 5), w, None, 1, 1, 0, plan)
    per = qnn.plan_requant(np.full(3, 0.001) * [1, 2, 3], qnn.conv_acc_bound(w, None, 0), 0, -128, 127, default_cfg)
    with pytest.raises(qnn.QnnError, match="the plan has 3 per-channel multipliers, the layer 8"):
        build_qconv(default_cfg, (1, 4, 5, 5), w, None, 1, 1, 0, per)
    with pytest.raises(qnn.QnnError, match=r"input zero point = 200 is outside the int8 range"):
        build_qconv(default_cfg, (1, 4, 5, 5), w, None, 1, 1, 200, plan)
    with pytest.raises(qnn.QnnError, match="kernel 3x3 is larger than the padded input 2x2"):
        build_qconv(default_cfg, (1, 4, 2, 2), w, None, 1, 0, 0, plan)
    layer = build_qconv(default_cfg, (1, 4, 5, 5), w, None, 1, 1, 0, plan)
    with pytest.raises(qnn.QnnError, match=r"input shape \(1, 4, 5, 6\) is not the layer's \(1, 4, 5, 5\)"):
        layer.run(np.zeros((1, 4, 5, 6), np.int8))
    with pytest.raises(qnn.QnnError, match="input dtype uint8 must be int8"):
        layer.reference(np.zeros((1, 4, 5, 5), np.uint8))
    with pytest.raises(CompileError, match=r"knob tile_h = \[1, 7\] is not a split"):
        build_qconv(default_cfg, (1, 4, 5, 5), w, None, 1, 1, 0, plan, knobs={"tile_h": [1, 7]})


@pytest.mark.rtl
def test_qconv_on_the_rtl_matches_cycle_engine(default_cfg, same_run):
    from vtasim.sim.cycle import run_image
    rng = np.random.default_rng(8)
    w = rng.integers(-128, 128, (16, 16, 3, 3)).astype(np.int8)
    bias = rng.integers(-3000, 3000, 16).astype(np.int32)
    plan = qnn.plan_requant(rng.uniform(2e-4, 6e-4, 16), qnn.conv_acc_bound(w, bias, -5), 1, -128, 127,
                            default_cfg, relu=True)
    layer = build_qconv(default_cfg, (1, 16, 4, 4), w, bias, 1, 1, -5, plan)
    x = rng.integers(-128, 128, (1, 16, 4, 4)).astype(np.int8)
    y, result = layer.run(x, engine="rtl")
    assert np.array_equal(y, layer.reference(x))
    image = layer.image(x)
    same_run(image, run_image(image), result)            # bytes, retire records and cycles
