"""vtasim.compiler.qnn arithmetic against hand-checked values, direct loops, and onnxruntime."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from vtasim.compiler import qnn
from vtasim.compiler.errors import CompileError


# ---- fixed-point multiplier -------------------------------------------------------------------
@pytest.mark.parametrize("m, want", [
    (0.5, (1 << 30, 0)),                      # frexp(0.5) = (0.5, 0)
    (1.0, (1 << 30, 1)),
    (0.75, (1610612736, 0)),                  # 0.75 * 2^31
    (0.1, (1717986918, -3)),                  # 0.8 * 2^31 = 1717986918.4
    (3.0, (1610612736, 2)),
    (1 - 2.0 ** -40, (1 << 30, 1)),           # mantissa rounds to 2^31: halved, shift + 1
    (0.0, (0, 0)),
])
def test_fixed_point_multiplier_hand_values(m, want):
    assert qnn.fixed_point_multiplier(m) == want


def test_fixed_point_multiplier_per_channel_and_meaning():
    ms = np.array([0.5, 0.1, 1 - 2.0 ** -40, 0.0, 7.3e-5])
    sig, shift = qnn.fixed_point_multiplier(ms)
    for m, g, h in zip(ms, sig, shift):
        assert (int(g), int(h)) == qnn.fixed_point_multiplier(float(m))
        if m:
            assert 1 << 30 <= g < 1 << 31
            assert abs(Fraction(int(g)) * Fraction(2) ** (int(h) - 31) - Fraction(float(m))) <= \
                Fraction(2) ** (int(h) - 32)            # half a unit of the 31-bit mantissa


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf")])
def test_fixed_point_multiplier_rejects(bad):
    with pytest.raises(qnn.QnnError, match="multiplier"):
        qnn.fixed_point_multiplier(bad)
    assert issubclass(qnn.QnnError, CompileError)


# ---- multiply_shift and requantize: rounding on ties ------------------------------------------
@pytest.mark.parametrize("x, m, upward, nearest", [
    (-6, 0.25, -1, -2), (6, 0.25, 2, 2), (-2, 0.25, 0, -1), (2, 0.25, 1, 1), (-3, 1.5, -4, -5),
    (7, 3.0, 21, 21), (-7, 3.0, -21, -21), (5, 0.5, 3, 3), (-5, 0.5, -2, -3), (-1, 2.0 ** -20, 0, 0),
])
def test_multiply_shift_ties(x, m, upward, nearest):
    sig, shift = qnn.fixed_point_multiplier(m)
    assert int(qnn.multiply_shift(np.array([x]), sig, shift, "UPWARD")[0]) == upward
    assert int(qnn.multiply_shift(np.array([x]), sig, shift, "TONEAREST")[0]) == nearest


def _round_exact(num: Fraction, rounding: str) -> int:
    f = math.floor(num)
    frac = num - f
    if frac != Fraction(1, 2):
        return math.floor(num + Fraction(1, 2))
    return f + 1 if (rounding == "UPWARD" or num > 0) else f


def test_multiply_shift_matches_exact_fractions():
    rng = np.random.default_rng(1)
    x = rng.integers(-(1 << 31), 1 << 31, size=300)
    for m in (0.3, 1.7e-4, 0.5, 2.75, 1 - 2.0 ** -40):
        sig, shift = qnn.fixed_point_multiplier(m)
        mt = Fraction(sig) * Fraction(2) ** (shift - 31)
        for rounding in qnn.ROUNDINGS:
            got = qnn.multiply_shift(x, sig, shift, rounding)
            want = [_round_exact(int(v) * mt, rounding) for v in x]
            assert [int(v) for v in got] == want


def test_requantize_ties_saturation_and_per_channel():
    acc = np.array([[-6, -2, 2, 6, 100000, -100000]], dtype=np.int32)
    # in_scale / out_scale = 0.25: the ties of the table above, then +zp and the int8 clip
    y = qnn.requantize(acc, 0.5, 0, 2.0, 3, "int8", rounding="UPWARD")
    assert y.tolist() == [[2, 3, 4, 5, 127, -128]]
    y = qnn.requantize(acc, 0.5, 0, 2.0, 3, "int8", rounding="TONEAREST")
    assert y.tolist() == [[1, 2, 4, 5, 127, -128]]
    assert qnn.requantize(acc, 0.5, 0, 2.0, 0, "uint8").tolist() == [[0, 0, 1, 2, 255, 0]]
    rng = np.random.default_rng(2)
    x = rng.integers(-50000, 50000, size=(2, 3, 4), dtype=np.int32)
    s_in = np.array([0.01, 0.002, 0.3])
    per = qnn.requantize(x, s_in, 4, 0.7, -5, axis=1)
    for c in range(3):
        assert np.array_equal(per[:, c], qnn.requantize(x[:, c], s_in[c], 4, 0.7, -5))


@pytest.mark.parametrize("kwargs, match", [
    ({"in_scale": 0.0}, "input scale = 0.0 must be a finite number > 0"),
    ({"out_scale": float("nan")}, "output scale = nan"),
    ({"out_zp": 300}, "zero point = 300 is outside the int8 range"),
    ({"in_scale": [0.1, 0.2]}, "2 input scales for axis 1 of extent 3"),
])
def test_requantize_rejects(kwargs, match):
    args = {"x": np.zeros((2, 3), np.int32), "in_scale": 0.1, "in_zp": 0, "out_scale": 0.2, "out_zp": 0}
    args.update(kwargs)
    with pytest.raises(qnn.QnnError, match=match):
        qnn.requantize(**args)


# ---- quantize / dequantize against onnxruntime ------------------------------------------------
def _ort_run(node_type, x, scale, zp, axis=None):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    zp = np.asarray(zp)
    inits = [numpy_helper.from_array(np.asarray(scale, np.float32), "s"), numpy_helper.from_array(zp, "z")]
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node(node_type, ["x", "s", "z"], ["y"], **attrs)
    in_type = TensorProto.FLOAT if x.dtype == np.float32 else helper.np_dtype_to_tensor_dtype(x.dtype)
    out_type = helper.np_dtype_to_tensor_dtype(zp.dtype) if node_type == "QuantizeLinear" else TensorProto.FLOAT
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", in_type, x.shape)],
                          [helper.make_tensor_value_info("y", out_type, x.shape)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_quantize_dequantize_match_onnxruntime():
    rng = np.random.default_rng(3)
    scale = np.float32(0.037)
    ties = (np.arange(-40, 40) + 0.5).astype(np.float32) * scale      # x / scale near .5
    x = np.concatenate([rng.normal(0, 3, 500).astype(np.float32), ties, np.float32([1e6, -1e6, 0])])
    for zp in (np.int8(-7), np.uint8(131)):
        want = _ort_run("QuantizeLinear", x, scale, zp)
        got = qnn.quantize(x, scale, int(zp), zp.dtype.name)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        back = qnn.dequantize(got, scale, int(zp))
        assert np.array_equal(back, _ort_run("DequantizeLinear", want, scale, zp))
    # per-channel dequantize along axis 1
    q = rng.integers(-128, 128, size=(2, 3, 4), dtype=np.int8)
    s = np.float32([0.1, 0.02, 0.5])
    z = np.int8([0, -3, 9])
    assert np.array_equal(qnn.dequantize(q, s, z, axis=1), _ort_run("DequantizeLinear", q, s, z, axis=1))


def test_quantize_half_away_and_rejects():
    x = np.array([0.5, 1.5, -0.5, -1.5, 2.5, 0.49999997], np.float32)
    assert qnn.quantize(x, 1.0, 0, "int8", rounding="half_away").tolist() == [1, 2, -1, -2, 3, 0]
    assert qnn.quantize(x, 1.0, 0, "int8").tolist() == [0, 2, 0, -2, 2, 0]
    with pytest.raises(qnn.QnnError, match="quantize scale = -1.0 must be a finite number > 0"):
        qnn.quantize(x, -1.0, 0)
    with pytest.raises(qnn.QnnError, match="NaN"):
        qnn.quantize(np.array([np.nan]), 1.0, 0)


# ---- conv / dense: four terms == direct ------------------------------------------------------
def _naive_conv(a, w, strides, pads, pad_value=0):
    n, c, h, wd = a.shape
    o, _, kh, kw = w.shape
    top, left, bottom, right = pads
    sh, sw = strides
    oh = (h + top + bottom - kh) // sh + 1
    ow = (wd + left + right - kw) // sw + 1
    out = np.zeros((n, o, oh, ow), dtype=np.int64)
    for b in range(n):
        for y in range(oh):
            for x in range(ow):
                total = np.zeros(o, dtype=np.int64)
                for r in range(kh):
                    for s in range(kw):
                        iy, ix = y * sh + r - top, x * sw + s - left
                        col = a[b, :, iy, ix].astype(np.int64) if 0 <= iy < h and 0 <= ix < wd else \
                            np.full(c, pad_value, np.int64)
                        total += w[:, :, r, s].astype(np.int64) @ col
                out[b, :, y, x] = total
    return out


def test_conv2d_int32_equals_naive_loops():
    rng = np.random.default_rng(4)
    for _ in range(6):
        n, c, o = rng.integers(1, 3), rng.integers(1, 5), rng.integers(1, 5)
        kh, kw = rng.integers(1, 4, size=2)
        h, w = rng.integers(kh, 8), rng.integers(kw, 8)
        strides = tuple(int(v) for v in rng.integers(1, 3, size=2))
        pads = tuple(int(v) for v in rng.integers(0, 3, size=4))
        a = rng.integers(-128, 128, size=(n, c, h, w)).astype(np.int8)
        wt = rng.integers(-128, 128, size=(o, c, kh, kw)).astype(np.int8)
        assert np.array_equal(qnn.conv2d_int32(a, wt, strides, pads), _naive_conv(a, wt, strides, pads))


@pytest.mark.parametrize("seed", range(8))
def test_qconv2d_four_terms_equal_direct_conv(seed):
    rng = np.random.default_rng(10 + seed)
    n, c, o = rng.integers(1, 3), rng.integers(1, 6), rng.integers(1, 6)
    kh, kw = rng.integers(1, 4, size=2)
    h, w = rng.integers(kh, 9), rng.integers(kw, 9)
    strides = tuple(int(v) for v in rng.integers(1, 3, size=2))
    pads = tuple(int(v) for v in rng.integers(0, 3, size=4))
    dt = "uint8" if seed % 2 else "int8"
    lo, hi = qnn.dtype_range(dt)
    qa = rng.integers(lo, hi + 1, size=(n, c, h, w)).astype(dt)
    qw = rng.integers(-128, 128, size=(o, c, kh, kw)).astype(np.int8)
    za = int(rng.integers(lo, hi + 1))
    zw = rng.integers(-20, 21, size=o) if seed % 3 == 0 else int(rng.integers(-20, 21))
    got = qnn.qconv2d(qa, qw, za, zw, strides, pads)
    zwb = np.reshape(zw, (-1, 1, 1, 1)) if np.ndim(zw) else zw
    want = _naive_conv(qa.astype(np.int64) - za, qw.astype(np.int64) - zwb, strides, pads)
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_qdense_four_terms_and_acc_bound():
    rng = np.random.default_rng(5)
    for zw in (0, 7, rng.integers(-9, 9, size=6)):
        qa = rng.integers(-128, 128, size=(4, 11)).astype(np.int8)
        qw = rng.integers(-128, 128, size=(6, 11)).astype(np.int8)
        za = int(rng.integers(-128, 128))
        want = (qa.astype(np.int64) - za) @ (qw.astype(np.int64) - np.reshape(zw, (-1, 1))).T
        assert np.array_equal(qnn.qdense(qa, qw, za, zw), want)
    # the bound is attained by an extreme input (row o of `hi` maximises channel o) and never exceeded
    qw = rng.integers(-128, 128, size=(3, 20)).astype(np.int8)
    bias = np.array([100, -5000, 0])
    bound = qnn.dense_acc_bound(qw, bias, za=-3)
    hi = np.where(qw > 0, 127, -128).astype(np.int8)
    lo = np.where(qw > 0, -128, 127).astype(np.int8)
    extremes = [np.diagonal(qnn.qdense(a, qw, -3, 0) + bias) for a in (hi, lo)]
    assert bound == max(int(np.abs(e).max()) for e in extremes)
    rand = rng.integers(-128, 128, size=(500, 20)).astype(np.int8)
    assert np.abs(qnn.qdense(rand, qw, -3, 0) + bias).max() <= bound


def test_conv_rejects_bad_shapes():
    with pytest.raises(qnn.QnnError, match="3 channels, the weight expects 2"):
        qnn.conv2d_int32(np.zeros((1, 3, 4, 4), np.int8), np.zeros((1, 2, 1, 1), np.int8))
    with pytest.raises(qnn.QnnError, match="kernel 5x5 is larger than the padded input 4x4"):
        qnn.conv2d_int32(np.zeros((1, 1, 4, 4), np.int8), np.zeros((1, 1, 5, 5), np.int8))
    with pytest.raises(qnn.QnnError, match="pads"):
        qnn.qconv2d(np.zeros((1, 1, 4, 4), np.int8), np.zeros((1, 1, 1, 1), np.int8), 0, 0, pads=(-1, 0, 0, 0))


# ---- LUT activations --------------------------------------------------------------------------
@pytest.mark.parametrize("fn, ref", [
    ("tanh", math.tanh), ("sigmoid", lambda v: 1 / (1 + math.exp(-v))),
    ("silu", lambda v: v / (1 + math.exp(-v))), (lambda x: np.abs(x), abs)])
def test_lut_matches_scalar_math(fn, ref):
    in_scale, in_zp, out_scale, out_zp = 0.043, -5, 0.0117, 3
    table = qnn.lut_table(fn, in_scale, in_zp, out_scale, out_zp)
    x = np.arange(-128, 128, dtype=np.int8)
    got = qnn.apply_lut(x, table)
    for q, y in zip(x, got):
        v = ref(float(np.float32(np.float32(int(q) - in_zp) * np.float32(in_scale))))
        r = v / float(np.float32(out_scale))
        k = math.floor(abs(r) + 0.5) * (1 if r >= 0 else -1) + out_zp       # half away from zero
        assert int(y) == min(127, max(-128, k))


def test_lut_uint8_and_rejects():
    t = qnn.lut_table("sigmoid", 0.1, 128, 1 / 256, 0, in_dtype="uint8", out_dtype="uint8")
    assert t.dtype == np.uint8 and t[128] == 128 and t[255] > t[0]
    with pytest.raises(qnn.QnnError, match="'gelu' is not one of tanh, sigmoid, silu"):
        qnn.lut_table("gelu", 0.1, 0, 0.1, 0)
    with pytest.raises(qnn.QnnError, match="per-tensor"):
        qnn.lut_table("tanh", np.array([0.1, 0.2]), 0, 0.1, 0)


# ---- passive ops ------------------------------------------------------------------------------
def test_passive_ops_commute_with_dequantize():
    rng = np.random.default_rng(6)
    scale, zp = np.float32(0.05), -9
    x = rng.integers(-128, 128, size=(2, 3, 5, 6)).astype(np.int8)
    real = qnn.dequantize(x, scale, zp)
    assert np.array_equal(qnn.relu_q(x, zp), qnn.quantize(np.maximum(real, 0), scale, zp))
    assert np.array_equal(qnn.clip_q(x, 0.0, 3.0, scale, zp), qnn.quantize(np.clip(real, 0, 3), scale, zp))
    padded = qnn.pad_q(x, (1, 2, 0, 1), zp)
    assert padded.shape == (2, 3, 6, 9) and np.all(qnn.dequantize(padded, scale, zp)[:, :, 0] == 0)
    pooled = qnn.maxpool_q(x, 3, 2, (1, 1, 1, 1))
    want = np.full((2, 3, 3, 3), -999)
    for y in range(3):
        for z in range(3):
            win = x[:, :, max(0, 2 * y - 1):2 * y + 2, max(0, 2 * z - 1):2 * z + 2]
            want[:, :, y, z] = win.max(axis=(2, 3))
    assert np.array_equal(pooled, want) and pooled.dtype == np.int8
