"""Quantised transposed conv2d with a non-zero input zero point through ``build_qconv_transpose`` (the
entry point the ONNX front end calls for ``ConvTranspose``), on every preset.

References, independent of the compiled program:
* a plain numpy scatter written here: every input pixel times every kernel tap onto the full output,
  ``(x - za) * w`` summed, cropped by the pads, the bias added, requantised by the layer's plan;
* ``gemm_counter`` against the ideal count of the phase schedule derived here from the shapes.
The data are drawn so that the outputs are visible (the plan's multiplier from the accumulators'
spread; the fraction clipped is asserted small) and so that the border correction matters: the
answer with the interior's correction at every position differs at the borders, and a program whose
halo holds 0 instead of the zero point is caught.

With the exact requantisation plan (``auto``'s choice where the fixed-point plan is not exact) the
reference is the host's integer execution: the scatter's accumulator (equal to
``qnn.qconv2d_transpose``'s) and the exact integer rule (``plan.exact``), on multipliers where the
fixed-point plan's VTA output is 1 LSB off on the same data; a dropped rounding stage and a perturbed
per-channel vector are caught, and the knob sets tried hold the plan's second accumulator tile.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from vtasim.compiler import qnn
from vtasim.compiler.ops.qconv_transpose import CORRECTIONS, build_qconv_transpose
from vtasim.hw.config import load_config

PRESETS = ["config/presets/1x16x16.json", "config/presets/2x16x16.json", "config/presets/1x32x32.json",
           "config/presets/1x8x8.json"]


def _cases(cfg):
    b = cfg.block_in
    return [  # (C, H, W, O, K, stride, pad, za)
        (2 * b, 4, 4, b, 4, 2, 1, -128),         # DCGAN's upsampling layer, reduced; uint8 zp 0 as int8
        (b, 1, 1, 2 * b, 4, 1, 0, 37),           # DCGAN's first layer: 1x1 -> 4x4, every output a border
        (b, 5, 4, b, 3, 1, 1, -20),              # 3x3 stride 1, not square
        (3, 3, 3, 3, 4, 2, 1, 100),              # channels padded to the blocks (DCGAN's last layer: 3)
    ]


def _scatter(x, w, za, stride, pad):
    """``sum (x - za) w`` of ONNX ConvTranspose by its definition (int64)."""
    n, c, h, wd = x.shape
    _, o, k, _ = w.shape
    full = np.zeros((n, o, (h - 1) * stride + k, (wd - 1) * stride + k), np.int64)
    xs = x.astype(np.int64) - za
    for r in range(k):
        for s in range(k):
            full[:, :, r:r + (h - 1) * stride + 1:stride, s:s + (wd - 1) * stride + 1:stride] += \
                np.einsum("nchw,co->nohw", xs, w[:, :, r, s].astype(np.int64))
    return full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]


def _interior_only(x, w, za, stride, pad):
    """The same with the interior's correction everywhere: ``sum x w`` minus ``za`` times the sum over
    all the taps of the output's phase (what a program without the border correction computes)."""
    t1 = _scatter(x, w, 0, stride, pad)
    k = w.shape[2]
    oh, ow = t1.shape[2:]
    corr = np.zeros((w.shape[1], oh, ow), np.int64)
    for y in range(oh):
        for xx in range(ow):
            rows, cols = range((y + pad) % stride, k, stride), range((xx + pad) % stride, k, stride)
            corr[:, y, xx] = w[:, :, list(rows)][:, :, :, list(cols)].astype(np.int64).sum(axis=(0, 2, 3))
    return t1 - za * corr


def _layer_data(cfg, case):
    c, h, w, o, k, s, p, za = case
    rng = np.random.default_rng(zlib.crc32(repr((case, cfg.batch)).encode()))
    weight = rng.integers(-128, 128, (c, o, k, k)).astype(np.int8)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    x = rng.integers(-128, 128, (cfg.batch, c, h, w)).astype(np.int8)
    acc = _scatter(x, weight, za, s, p) + bias.reshape(1, -1, 1, 1)
    mult = 40.0 / max(float(acc.std()), 1.0)          # outputs spread over about +-100 LSB
    plan = qnn.plan_requant(mult, qnn.conv_transpose_acc_bound(weight, bias, za, s), 3, -128, 127, cfg, path="fixed")
    return x, weight, bias, plan, acc


@pytest.fixture(scope="module", params=PRESETS, ids=lambda p: p.split("/")[-1][:-5])
def preset(request):
    return load_config(request.param)


def _both_engines_give(layer, x, want, case, cfg):
    """The functional and cycle engines give ``want`` and the GEMM count is the phase schedule's ideal one:
    every output position, every tap that meets the input (``K / S`` per axis), every channel block pair."""
    c, o, k, s = case[0], case[3], case[4], case[5]
    for engine in ("functional", "cycle"):
        y, result = layer.run(x, engine=engine)
        assert np.array_equal(y, want), (case, engine, np.argwhere(y != want)[:4])
    taps = k // s
    ideal = (x.shape[0] // cfg.batch) * want.shape[2] * want.shape[3] * taps * taps * \
        (-(-c // cfg.block_in)) * (-(-o // cfg.block_out))
    assert result.counters["gemm_counter"] == ideal, case


@pytest.mark.parametrize("correction", list(CORRECTIONS))
def test_qconv_transpose_engines_equal_numpy(preset, correction):
    cfg = preset
    for case in _cases(cfg):
        c, h, w, o, k, s, p, za = case
        x, weight, bias, plan, acc = _layer_data(cfg, case)
        want = plan.apply(acc, axis=1).astype(np.int8)
        inside = ((want > -128) & (want < 127)).mean()
        assert inside >= 0.97, f"{case}: only {inside:.1%} of the outputs unclipped: the check would be blind"
        border = want != plan.apply(_interior_only(x, weight, za, s, p) + bias.reshape(1, -1, 1, 1), axis=1)
        assert border.any(), f"{case}: the border correction changes no output: a program without it would pass"
        layer = build_qconv_transpose(cfg, x.shape, weight, bias, s, p, za, plan, correction=correction)
        assert np.array_equal(layer.reference(x), want)
        _both_engines_give(layer, x, want, case, cfg)
        assert layer.macs == x.shape[0] * o * want.shape[2] * want.shape[3] * c * (k // s) ** 2


def test_a_halo_of_zeros_is_caught(default_cfg):
    """The mutation: the program's input halo holding 0 (the DMA's padding) instead of the zero point,
    the rest unchanged.  The outputs then differ, and only at the borders."""
    case = (2 * default_cfg.block_in, 4, 4, default_cfg.block_in, 4, 2, 1, -128)
    x, weight, bias, plan, acc = _layer_data(default_cfg, case)
    layer = build_qconv_transpose(default_cfg, x.shape, weight, bias, 2, 1, -128, plan, correction="phase")
    assert layer.geom.host_pad
    want = layer.reference(x)
    za, layer.za = layer.za, 0                 # pack_input now pads the halo with 0
    y, _ = layer.run(x, engine="functional")
    layer.za = za
    wrong = y != want
    assert wrong.any()
    assert not wrong[:, :, 1:-1, 1:-1].any(), "the halo reaches the border rows and columns only"


def test_zero_point_zero_needs_no_host_padding(default_cfg):
    """With za = 0 the DMA pads (the input segment is the plain packed input) and the result is exact."""
    case = (default_cfg.block_in, 4, 4, default_cfg.block_in, 4, 2, 1, 0)
    x, weight, bias, plan, acc = _layer_data(default_cfg, case)
    layer = build_qconv_transpose(default_cfg, x.shape, weight, bias, 2, 1, 0, plan)
    assert not layer.geom.host_pad and layer.built.buffers["data"].nbytes == x.size
    y, _ = layer.run(x, engine="cycle")
    assert np.array_equal(y, plan.apply(acc, axis=1).astype(np.int8))


@pytest.mark.parametrize("kw, message", [
    (dict(output_padding=1), r"output_padding = \[1, 1\] \(a transposed conv on VTA has none\)"),
    (dict(groups=2), r"group = 2 \(a transposed conv on VTA has one group\)"),
    (dict(dilations=2), r"dilations = 2 \(a transposed conv on VTA has dilation 1\)"),
    (dict(zw=3), r"weight zero point 3 is not 0"),
    (dict(correction="tensor"), r"correction = 'tensor' is not one of phase, position"),
])
def test_bad_transpose_arguments(default_cfg, kw, message):
    w = np.zeros((16, 16, 4, 4), np.int8)
    plan = qnn.plan_requant(0.004, 1 << 16, 0, -128, 127, default_cfg, path="fixed")
    with pytest.raises(qnn.QnnError, match=message):
        build_qconv_transpose(default_cfg, (1, 16, 4, 4), w, None, 2, 1, 5, plan, **kw)


def test_kernel_not_a_multiple_of_the_stride(default_cfg):
    w = np.zeros((16, 16, 3, 3), np.int8)
    plan = qnn.plan_requant(0.004, 1 << 16, 0, -128, 127, default_cfg, path="fixed")
    with pytest.raises(qnn.QnnError, match="kernel 3 is not a multiple of the stride 2"):
        build_qconv_transpose(default_cfg, (1, 16, 4, 4), w, None, 2, 1, 5, plan)


# ---- the exact requantisation plan -----------------------------------------------------------------
def _exact_cases(cfg):
    b = cfg.block_in
    return [  # (C, H, W, O, K, stride, pad, za, per-channel multipliers)
        (2 * b, 4, 4, b, 4, 2, 1, -128, False),  # DCGAN's upsampling layer, reduced
        (b, 1, 1, 2 * b, 4, 1, 0, 37, True),     # DCGAN's first layer, one multiplier per channel
        (3, 6, 6, 3, 4, 2, 1, 100, True),        # channels padded to the blocks (the vectors' padding)
    ]


def _exact_data(cfg, case):
    """Data, the host's accumulator (the scatter), the ``auto`` plan and the fixed-point plan of a
    multiplier (searched from the accumulators' spread) where the fixed-point plan's output differs from
    the host's exact rule on these data, so that only the exact plan can equal the host."""
    c, h, w, o, k, s, p, za, per_channel = case
    rng = np.random.default_rng(zlib.crc32(repr((case, cfg.batch, "exact")).encode()))
    weight = rng.integers(-128, 128, (c, o, k, k)).astype(np.int8)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    x = rng.integers(-128, 128, (cfg.batch, c, h, w)).astype(np.int8)
    acc = _scatter(x, weight, za, s, p) + bias.reshape(1, -1, 1, 1)
    assert np.array_equal(acc, qnn.qconv2d_transpose(x, weight, za, 0, s, p).astype(np.int64) +
                          bias.reshape(1, -1, 1, 1))
    bound = qnn.conv_transpose_acc_bound(weight, bias, za, s)
    spread = (1 + 0.2 * rng.random(o)) if per_channel else 1.0
    for j in range(400):
        mult = 40.0 / max(float(acc.std()), 1.0) * (1 + 0.005 * j) * spread
        fixed = qnn.plan_requant(mult, bound, 3, -128, 127, cfg, path="fixed")
        host = fixed.exact(acc, axis=1)
        if not np.array_equal(fixed.apply(acc, axis=1), host):
            plan = qnn.plan_requant(mult, bound, 3, -128, 127, cfg)
            return x, weight, bias, plan, fixed, host.astype(np.int8)
    raise AssertionError(f"{case}: no multiplier where the fixed-point plan is off the host on these data")


@pytest.mark.parametrize("correction", list(CORRECTIONS))
def test_exact_plan_equals_the_host_bit_for_bit(preset, correction):
    """``auto`` takes the exact plan where the fixed-point one is not exact, and the transposed conv with
    it gives the host's integer execution (the scatter's accumulator, then the exact integer rule) bit
    for bit on the functional and cycle engines, where the fixed-point plan's output differs on the
    same data; the GEMM count is still the phase schedule's ideal count."""
    cfg = preset
    for case in _exact_cases(cfg):
        c, h, w, o, k, s, p, za, _ = case
        x, weight, bias, plan, fixed, host = _exact_data(cfg, case)
        assert plan.path == "exact" and plan.stages and fixed.max_error_lsb == 1
        inside = ((host > -128) & (host < 127)).mean()
        assert inside >= 0.97 and np.unique(host).size >= 32, (case, inside, np.unique(host).size)
        layer = build_qconv_transpose(cfg, x.shape, weight, bias, s, p, za, plan, correction=correction)
        assert np.array_equal(layer.reference(x), host)
        _both_engines_give(layer, x, host, case, cfg)
        with_fixed = build_qconv_transpose(cfg, x.shape, weight, bias, s, p, za, fixed, correction=correction)
        y, _ = with_fixed.run(x, engine="functional")
        assert not np.array_equal(y, host) and np.abs(y.astype(int) - host).max() == 1, case


def _mutations(plan):
    """The exact plan with its rounding stage dropped (its readers read its operand), and with the
    rounding vector of the last real channel a quarter of an output LSB off (the outputs of that
    channel only then change)."""
    from dataclasses import replace
    k = next(i for i, st in enumerate(plan.stages) if st[1] == "add" and st[3] == ("vec", "rq_round"))
    out, _, lhs, _ = plan.stages[k]
    rename = lambda v: lhs if v == out else v                                       # noqa: E731
    dropped = [(o, kind, rename(a), (rk, rename(rv) if rk == "t" else rv))
               for o, kind, a, (rk, rv) in plan.stages[:k] + plan.stages[k + 1:]]
    yield "rounding stage dropped", replace(plan, stages=dropped)
    r = plan.stages[-1][3][1]                                                       # the last stage: >> r
    vec = np.array(plan.vectors["rq_round"], np.int32)
    vec[-1] += 1 << (r - 2)
    yield "rounding vector perturbed", replace(plan, vectors={**plan.vectors, "rq_round": vec})


@pytest.mark.parametrize("correction", list(CORRECTIONS))
def test_a_perturbed_exact_plan_is_caught(default_cfg, correction):
    """The mutations (:func:`_mutations`): the VTA output then differs from the host's integer execution,
    so the check above would fail."""
    case = _exact_cases(default_cfg)[1]
    x, weight, bias, plan, fixed, host = _exact_data(default_cfg, case)
    for what, bad in _mutations(plan):
        layer = build_qconv_transpose(default_cfg, x.shape, weight, bias, case[5], case[6], case[7], bad,
                                      correction=correction)
        y, _ = layer.run(x, engine="functional")
        assert not np.array_equal(y, host), what
        if what.startswith("rounding vector"):    # the vector reaches its own channel only
            assert np.array_equal(y[:, :-1], host[:, :-1]), what


def test_exact_plan_knobs_hold_two_accumulator_tiles(default_cfg):
    """DCGAN's last layer (16x16 -> 32x32, 64 -> 3): the fixed plan's first tile fills the accumulator
    once; every knob set tried for the exact plan holds two tiles (the zero tile, turned into the copy
    of A) with the bias and the plan's vectors, and the layer compiles with one of them."""
    from vtasim.compiler.ops.qconv_transpose import fitting_candidates, transpose_geometry
    cfg = default_cfg
    rng = np.random.default_rng(0)
    w = rng.integers(-12, 13, (64, 3, 4, 4)).astype(np.int8)
    b = rng.integers(-2000, 2000, 3).astype(np.int32)
    bound = qnn.conv_transpose_acc_bound(w, b, -128, 2)
    fixed, exact = (qnn.plan_requant(0.002, bound, 0, -128, 127, cfg, path=p) for p in ("fixed", "exact"))
    wl = transpose_geometry(cfg, (1, 64, 16, 16), w.shape, 2, 1).transpose_workload()

    def tiles_fit(ks, plan, tiles):
        return wl.tile_fits(cfg, 1, ks["tile_h"][1], ks["tile_w"][1], 1, ks["tile_co"][1], 1 + len(plan.vectors), tiles)
    first = fitting_candidates(wl, cfg, fixed)[0]
    assert tiles_fit(first, fixed, 1) and not tiles_fit(first, exact, 2)
    tried = fitting_candidates(wl, cfg, exact)
    assert tried and all(tiles_fit(ks, exact, 2) for ks in tried)
    layer = build_qconv_transpose(cfg, (1, 64, 16, 16), w, b, 2, 1, -128, exact)
    assert layer.knob_source == "fitting" and layer.knobs in tried
    x = rng.integers(-128, 128, (1, 64, 16, 16)).astype(np.int8)
    y, _ = layer.run(x, engine="functional")
    assert np.array_equal(y, layer.reference(x))
