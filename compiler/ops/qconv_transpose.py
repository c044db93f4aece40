"""A quantised transposed conv2d (ONNX ``ConvTranspose`` between Dequantize/Quantize; DCGAN's upsampling
layers) on VTA, exact for any input zero point.

::

    plan = qnn.plan_requant(s_x * s_w / s_y, qnn.conv_transpose_acc_bound(w, b, za, 2), zy, -128, 127, cfg)
    layer = build_qconv_transpose(cfg, (1, 64, 8, 8), w, b, strides=2, pads=1, za=za, plan=plan)
    y, result = layer.run(x, engine="cycle")          # int8 NCHW (1, M, 16, 16)
    assert (y == layer.reference(x)).all()           # numpy: qnn.qconv2d_transpose + plan.apply

``w`` is ONNX's ``(C, M, K, K)`` int8 (symmetric).  The program is ``conv2d_transpose_packed``: ``S x S``
phase convolutions over the un-dilated input (no product with an inserted zero).  Output ``(Y, X)``
sums ``(x - za) * w`` over the taps that meet a real input pixel; near the borders fewer taps do, so
the zero-point term ``za * sum w`` over those taps depends on the position.  The compiled form::

    acc = sum_{c,a,a2} Wph[o, c, p, a, q, a2] * Xh[c, y + a + E(p), x + a2 + E(q)]        GEMM
        + (bias[o] - za * sum_{c,a,a2} Wph[o, c, p, a, q, a2])         one int32 vector per phase (p, q)
    y   = plan.steps(acc)                                                ALU, in the accumulator

``Xh`` is the input with its halo (:func:`~vtasim.compiler.ops.conv2d_transpose.input_halo`) holding ``za``, so a
tap past the border adds ``(za - za) * w = 0`` and the correction is the same at every position of a
phase: the whole-phase sum, folded into a bias of ``S x S`` vectors per channel block.  The DMA pads
with 0 only, so the host pads the halo when ``za != 0`` (when ``za == 0`` the DMA does); why this
and not a per-position correction tensor is measured in ``docs/compiler.md``
(``python bench/qconv_transpose.py``).  Channels are padded to the blocks and the batch to
``cfg.batch``; the padding is removed from the output.  Every requantisation plan runs: shift, fixed
and the exact plan (``auto``'s choice where the fixed-point plan is not exact), whose stages
(:func:`vtasim.compiler.ops.exact_epilogue.exact_epilogue`) read a zero tile laid out for the
phases (:func:`~vtasim.compiler.ops.exact_epilogue.zero_tile`: each output tile, its phases included,
one contiguous run) and its per-channel vectors (one int32 per channel, the same at every phase).
Knobs: the largest tiles that fit (:func:`vtasim.compiler.tuning.knobs.fitting_knobs`; with the exact
plan, two output tiles: :func:`fitting_candidates`) as :func:`candidate_knobs` adapts them, else the
fallback.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler import qnn
from vtasim.compiler.dsl import te
from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.knobs import check_knobs, fallback_knobs, fitting_knobs
from vtasim.compiler.ops.conv2d_transpose import ROLES, TRANSPOSE_TAG, conv2d_transpose_packed, pack_transpose_kernel
from vtasim.compiler.ops.conv_family import schedule_conv_family
from vtasim.compiler.ops.exact_epilogue import zero_tile
from vtasim.compiler.ops.layout import pack_channel_const
from vtasim.compiler.ops.quantized import Geometry, QLayer, check_acc_bound, check_layer_args, requant_epilogue
from vtasim.compiler.qnn.conv import norm_pads, norm_pair
from vtasim.compiler.qnn.conv_transpose import conv_transpose2d, conv_transpose_out_hw

__all__ = ["build_qconv_transpose", "transpose_problem", "transpose_geometry", "phase_weight_sums", "candidate_knobs",
           "fitting_candidates",
           "CORRECTIONS"]

# the folded bias (bias - za * sum w) is read at these output axes (conv_family's roles)
CORRECTIONS = {"phase": "cpxqBC",        # per channel, row phase and column: the halo holds za (host pad)
               "position": "cypxqBC"}    # per channel and output position: the halo holds 0 (DMA pad)


def transpose_problem(weight_shape, strides, pads, dilations=1, output_padding=0, groups: int = 1) -> str | None:
    """Why a ``ConvTranspose`` with these attributes has no VTA form (None when it has one; the sizes
    are checked by :func:`transpose_geometry`)."""
    c, m, kh, kw = (int(v) for v in weight_shape)
    sh, sw = norm_pair(strides, "strides")
    p = norm_pads(pads)
    op = (output_padding,) * 2 if np.isscalar(output_padding) else tuple(output_padding)
    if groups != 1:
        return f"group = {groups} (a transposed conv on VTA has one group)"
    if norm_pair(dilations, "dilations") != (1, 1):
        return f"dilations = {dilations} (a transposed conv on VTA has dilation 1)"
    if any(op):
        return f"output_padding = {list(op)} (a transposed conv on VTA has none)"
    if kh != kw or sh != sw or len(set(p)) != 1:
        return f"kernel {kh}x{kw}, strides {(sh, sw)}, pads {p} (square kernel, equal strides and equal pads needed)"
    if kh % sh:
        return f"kernel {kh} is not a multiple of the stride {sh} (equal taps per phase)"
    return None


def transpose_geometry(cfg, x_shape, weight_shape, strides, pads, name: str = "qconv_transpose",
                       dilations=1, output_padding=0, groups: int = 1) -> Geometry:
    """The layer's geometry, every rule of the transposed conv checked (one :class:`qnn.QnnError` line)."""
    why = transpose_problem(weight_shape, strides, pads, dilations, output_padding, groups)
    if why:
        raise qnn.QnnError(f"{name}: {why}")
    x_shape = tuple(int(v) for v in x_shape)
    c, m, k, _ = (int(v) for v in weight_shape)
    if len(x_shape) != 4 or x_shape[1] != c or min(x_shape) < 1 or min(c, m, k) < 1:
        raise qnn.QnnError(f"{name}: input {x_shape} and weight {tuple(weight_shape)} must be NCHW and (C, M, K, K) "
                           f"with the same C")
    n, _, h, w = x_shape
    s, p = norm_pair(strides, "strides"), norm_pads(pads)
    oh, ow = conv_transpose_out_hw(h, w, k, k, s, p)
    rb = lambda v, b: -(-v // b) * b                                   # noqa: E731
    g = Geometry(n, c, h, w, m, k, k, s, p, oh, ow, rb(n, cfg.batch), rb(c, cfg.block_in), rb(m, cfg.block_out),
                 False, transposed=True)
    try:
        g.transpose_workload(name).check(cfg)
    except CompileError as exc:
        raise qnn.QnnError(str(exc)) from None
    return g


def phase_weight_sums(kernel: np.ndarray) -> np.ndarray:
    """``(OB, S, S, o)``: each output channel's weight sum over the taps and input channels of each phase,
    from the packed kernel ``(OB, IB, S, T, S, T, o, i)`` the GEMM reads."""
    return kernel.astype(np.int64).sum(axis=(1, 3, 5, 7))


def build_qconv_transpose(cfg, x_shape, weight, bias, strides, pads, za, plan, knobs=None,
                          name: str = "qconv_transpose", zw=0, dilations=1, output_padding=0,
                          groups: int = 1, correction: str = "phase") -> QLayer:
    """A quantised transposed conv2d: ``x_shape`` NCHW int8 with zero point ``za`` (any), ``weight`` int8
    ``(C, M, K, K)`` symmetric (``zw`` 0), ``bias`` int32 (M,) or None, ``plan`` from
    :func:`vtasim.compiler.qnn.plan_requant` made for at least :func:`vtasim.compiler.qnn.conv_transpose_acc_bound`.
    One group, dilation 1, no output padding, ``K`` a multiple of the stride, equal pads.
    ``correction``: ``"phase"`` (the default) pads the halo with ``za`` on the host and folds the
    whole-phase weight sums into the bias; ``"position"`` lets the DMA pad with 0 and loads the
    correction of every output position (the sum over the taps that meet the input) in its place."""
    if correction not in CORRECTIONS:
        raise qnn.QnnError(f"{name}: correction = {correction!r} is not one of {', '.join(CORRECTIONS)}")
    if np.any(np.asarray(zw) != 0):
        raise qnn.QnnError(f"{name}: weight zero point {np.asarray(zw).tolist()} is not 0 (rule: VTA layers take "
                           f"symmetric int8 weights)")
    weight = np.asarray(weight)
    if weight.ndim != 4:
        raise qnn.QnnError(f"{name}: weight {weight.shape} must be (C, M, K, K)")
    g = transpose_geometry(cfg, x_shape, weight.shape, strides, pads, name, dilations, output_padding, groups)
    za, weight, bias = check_layer_args(g, weight, bias, za, plan, name)
    check_acc_bound(qnn.conv_transpose_acc_bound(weight, bias, za, g.strides), plan, name)
    g.host_pad = bool(za != 0 and any(g.halo)) and correction == "phase"
    wl = g.transpose_workload(name)
    w_full = np.zeros((g.c_pad, g.o_pad, g.kh, g.kw), np.int8)
    w_full[:g.c, :g.o] = weight
    kernel = pack_transpose_kernel(w_full, wl, cfg)
    folded = (_phase_bias if correction == "phase" else _position_bias)(cfg, g, bias, za, kernel, w_full)
    if np.abs(folded).max(initial=0) > (1 << 31) - 1:
        raise qnn.RequantError(f"{name}: bias - za * sum(w) does not fit int32")
    consts = {"kernel": kernel, "bias": folded.astype(np.int32)}
    for vname, vec in plan.vectors.items():
        v_full = np.ones(g.o_pad, np.int32)
        v_full[:g.o] = vec
        consts[f"vec_{vname}"] = _channel_const(cfg, v_full)
    tries = [("user", knobs)] if knobs is not None else \
        [("fitting", ks) for ks in fitting_candidates(wl, cfg, plan)] + [("fallback", fallback_knobs(wl, cfg))]
    for source, ks in tries:
        ks = check_knobs(wl, cfg, ks)
        try:
            built, out = _program(cfg, g, wl, consts, plan, ks, name, CORRECTIONS[correction])
        except CompileError:
            if source in ("user", "fallback"):
                raise
            continue
        return QLayer(name, cfg, g, weight, bias, za, plan, ks, source, built, out, consts)
    raise CompileError(f"{name}: no knob set compiled")          # cannot happen: the fallback raises


def _channel_const(cfg, v: np.ndarray) -> np.ndarray:
    """A per-channel int32 vector ``(O,)`` in the transposed output's bias layout ``(1, OB, 1, 1, 1, 1, b, o)``."""
    b = pack_channel_const(v.astype(np.int32), cfg.batch, cfg.block_out)
    return np.ascontiguousarray(b.reshape(1, b.shape[1], 1, 1, 1, 1, cfg.batch, cfg.block_out))


def fitting_candidates(wl, cfg, plan):
    """The knob sets the builder tries before the fallback, in order: :func:`candidate_knobs` of the
    largest tiles whose accumulator space fits the output tile, the bias and the plan's per-channel
    vectors.  The exact plan's accumulator also holds a second tile (the zero tile, which its first
    stage turns into the copy of ``A``: :mod:`vtasim.compiler.ops.exact_epilogue`): each of those with
    its columns halved until two tiles fit, then the rest of :func:`candidate_knobs` of the largest
    tiles that fit two (halving the columns first keeps the tile's phase rows and channel block: fewer
    tiles than dropping to one phase row per tile)."""
    vecs, tiles = 1 + len(plan.vectors), 1 + bool(plan.stages)
    out = candidate_knobs(fitting_knobs(wl, cfg, acc_tensors=vecs))
    if tiles == 1:
        return out

    def fits(ks):
        return wl.tile_fits(cfg, 1, ks["tile_h"][1], ks["tile_w"][1], 1, ks["tile_co"][1], vecs, tiles)
    halved = []
    for ks in out + candidate_knobs(fitting_knobs(wl, cfg, acc_tensors=vecs, acc_tiles=tiles)):
        while not fits(ks) and ks["tile_w"][1] % 2 == 0:
            ks = {**ks, "tile_w": [ks["tile_w"][0] * 2, ks["tile_w"][1] // 2]}
        if fits(ks) and ks not in halved:
            halved.append(ks)
    return halved


def candidate_knobs(ks: dict):
    """``ks``, then with one output-channel block per tile, then one phase row per tile, then both, then
    the columns halved while they divide: the per-tile correction must fit the accumulator beside the
    output tile, and its ALU add takes at most two hardware loops, which a tile of several channel
    blocks and several rows exceeds with the phase correction (one output-channel block per tile
    measured fastest on DCGAN's layers, ``bench/qconv_transpose.py``)."""
    seen = []
    for h in (ks["tile_h"][1], 1):
        for co in (ks["tile_co"][1], 1):
            out = {**ks, "tile_co": [ks["tile_co"][0] * ks["tile_co"][1] // co, co],
                   "tile_h": [ks["tile_h"][0] * ks["tile_h"][1] // h, h]}
            if out not in seen:
                seen.append(out)
    k = seen[-1]
    while k["tile_w"][1] % 2 == 0:
        k = {**k, "tile_w": [k["tile_w"][0] * 2, k["tile_w"][1] // 2]}
        seen.append(k)
    return seen


def _bias_layout(cfg, per: np.ndarray) -> np.ndarray:
    """``per`` ``(OB, H', S, W', S, o)`` (extents 1 or the output's) as the int64 bias ``(1, OB, H', S, W', S, b, o)``."""
    out = per[None, :, :, :, :, :, None, :]
    return np.ascontiguousarray(np.broadcast_to(out, out.shape[:6] + (cfg.batch, per.shape[-1])))


def _phase_bias(cfg, g: Geometry, bias, za: int, kernel, w_full) -> np.ndarray:
    """``bias[o] - za * (the phase's weight sum)`` for every row phase and output column."""
    b_full = np.zeros(g.o_pad, np.int64)
    b_full[:g.o] = bias
    ob, s, bo = kernel.shape[0], kernel.shape[2], cfg.block_out
    folded = b_full.reshape(ob, 1, 1, bo) - za * phase_weight_sums(kernel)            # (OB, S, S, o)
    per = np.broadcast_to(folded[:, None, :, None, :, :], (ob, 1, s, g.ow // s, s, bo))
    return _bias_layout(cfg, per)


def _position_bias(cfg, g: Geometry, bias, za: int, kernel, w_full) -> np.ndarray:
    """``bias[o] - za * sum w`` over the taps that meet the input, at every output position."""
    b_full = np.zeros(g.o_pad, np.int64)
    b_full[:g.o] = bias
    taps = conv_transpose2d(np.ones((1, g.c_pad, g.h, g.w), np.int64), w_full.astype(np.int64), g.strides,
                            g.pads, dtype=np.int64)[0]                               # (O, OH, OW)
    folded = b_full.reshape(-1, 1, 1) - za * taps
    ob, s, bo = kernel.shape[0], g.strides[0], cfg.block_out
    per = folded.reshape(ob, bo, g.oh // s, s, g.ow // s, s).transpose(0, 2, 3, 4, 5, 1)
    return _bias_layout(cfg, per)


def _program(cfg, g: Geometry, wl, consts: dict, plan, knobs: dict, name: str, bias_axes: str):
    """Tensor expressions, schedule and build (input all zeros: :meth:`QLayer.image` swaps it)."""
    bb, bi = cfg.batch, cfg.block_in
    hp, wp = g.data_hw
    with Environment(cfg) as env:
        data = te.placeholder((g.n_pad // bb, g.c_pad // bi, hp, wp, bb, bi), env.inp_dtype, "data")
        kernel = te.placeholder(consts["kernel"].shape, env.wgt_dtype, "kernel")
        bias = te.placeholder(consts["bias"].shape, env.acc_dtype, "bias")
        vecs = {v: te.placeholder(consts[f"vec_{v}"].shape, env.acc_dtype, f"vec_{v}") for v in plan.vectors}
        conv = conv2d_transpose_packed(env, data, kernel, wl, host_padded=g.host_pad)
        zero = zero_tile(env, conv.shape, ROLES, int(knobs["tile_h"][1]), int(knobs["tile_w"][1])) \
            if plan.stages else None
        last = requant_epilogue(conv, bias, vecs, plan, ROLES, zero, bias_axes)
        extra = []
        if zero is not None:             # a constant input: the image holds it, evaluate reads it from consts
            consts["zero"] = np.zeros(zero[0].shape, np.int8)
            extra = [zero[0]]
        else:
            consts.pop("zero", None)
        out = te.compute(last.shape, lambda *i: last(*i).astype(env.out_dtype), name="q_out")
        sch = schedule_conv_family(env, out, knobs, TRANSPOSE_TAG, ROLES)
        built = build(sch, [data, kernel, bias, *vecs.values(), *extra, out],
                      {**consts, "data": np.zeros(data.shape, np.int8)}, cfg, name=name, expected=False)
    return built, out
