"""Quantised grouped, depthwise and dilated layers through ``build_qconv(..., groups=, dilations=)`` (the
entry point the ONNX front end calls): the compiled program on the functional and cycle engines equals
``layer.reference`` bit for bit, and that reference equals an independent one — each group as its own
groups = 1 layer through ``qnn.qconv2d`` (dilation: the kernel spread out with zeros), requantised by
the same plan."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from vtasim.compiler import qnn
from vtasim.compiler.ops.quantized import build_qconv
from vtasim.sim.engines import check_result

CASES = [
    # (C, H, W, O, k, stride, pad, groups, dilation, za)
    (32, 7, 7, 32, 3, 1, 1, 32, 1, 0),          # depthwise, DMA padding
    (32, 8, 8, 32, 3, 2, 1, 32, 1, -5),         # depthwise stride 2, host padding with za
    (64, 6, 6, 64, 3, 1, 1, 2, 1, 3),           # two groups of two blocks
    (16, 9, 9, 32, 3, 1, 2, 1, 2, 0),           # dilated
    (32, 6, 6, 32, 3, 1, 1, 8, 1, 0),           # groups of 4 channels sharing blocks
]


def _independent(x, w, bias, za, stride, pad, groups, dil, plan):
    """Per group, a groups = 1 conv of the group's channels with the dilated (zero-spread) kernel."""
    o, cpg, k, _ = w.shape
    kd = np.zeros((o, cpg, dil * (k - 1) + 1, dil * (k - 1) + 1), np.int8)
    kd[:, :, ::dil, ::dil] = w
    opg = o // groups
    parts = [qnn.qconv2d(x[:, g * cpg:(g + 1) * cpg], kd[g * opg:(g + 1) * opg], za, 0, stride, pad)
             for g in range(groups)]
    acc = np.concatenate(parts, axis=1).astype(np.int64) + bias.reshape(1, -1, 1, 1)
    return plan.apply(acc, axis=1).astype(np.int8)


@pytest.mark.parametrize("case", CASES)
def test_grouped_qconv_engines_equal_reference(default_cfg, case):
    c, h, w, o, k, stride, pad, groups, dil, za = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    weight = rng.integers(-128, 128, (o, c // groups, k, k)).astype(np.int8)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    plan = qnn.plan_requant(0.004, qnn.conv_acc_bound(weight, bias, za), 1, -128, 127, default_cfg)
    layer = build_qconv(default_cfg, (1, c, h, w), weight, bias, stride, pad, za, plan, groups=groups,
                        dilations=dil)
    x = rng.integers(-128, 128, (1, c, h, w)).astype(np.int8)
    want = layer.reference(x)
    assert np.array_equal(want, _independent(x, weight, bias, za, stride, pad, groups, dil, plan))
    assert 0.25 <= ((want > -128) & (want < 127)).mean(), "outputs mostly clipped: the check would be blind"
    for engine in ("functional", "cycle"):
        y, result = layer.run(x, engine=engine)
        assert np.array_equal(y, want), engine
    assert check_result(layer.image(x), result) == []
    assert layer.macs == o * want.shape[2] * want.shape[3] * (c // groups) * k * k


def test_grouped_qconv_bad_groups(default_cfg):
    w = np.zeros((24, 1, 3, 3), np.int8)
    plan = qnn.plan_requant(0.004, 1 << 16, 0, -128, 127, default_cfg)
    with pytest.raises(qnn.QnnError, match="groups = 5 must be a positive integer dividing the 24 output"):
        build_qconv(default_cfg, (1, 24, 6, 6), w, None, 1, 1, 0, plan, groups=5)
    with pytest.raises(qnn.QnnError, match="input has 24 channels, the weight expects 1 per group x groups = 12"):
        build_qconv(default_cfg, (1, 24, 6, 6), w, None, 1, 1, 0, plan, groups=12)
    with pytest.raises(qnn.QnnError, match="groups = 24 must be a multiple of 16"):
        build_qconv(default_cfg, (1, 24, 6, 6), w, None, 1, 1, 0, plan, groups=24)
