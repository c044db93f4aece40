"""Depthwise conv2d on the tensor ALU (``dw_alu = 1``), the alternative to the block-diagonal GEMM.

Per output tile and kernel tap ``t = (r, s)``, the DMA loads the tap's shifted input window into the
accumulator as int32 (``LOAD ACC_8BIT``, padded by the DMA), the ALU multiplies it in place by the
tap's per-channel weight vector (a vector MUL whose source index ignores the pixel loops) and adds it
to the running sum (a vector ADD)::

    p_t = x[y + r, x + s] * w_t          ALU MUL, in place on the loaded window
    acc = p_0 + p_1 + ... + p_{K*K-1}    ALU ADD, in place
    out = int8(clip((acc >> 8) + bias))  the conv2d.* epilogue

so each (pixel, channel block, tap) costs a window load of BATCH x BLOCK_OUT bytes plus two vector
ALU uops, against one GEMM uop in the block-diagonal form; every lane of the ALU does useful work,
where the GEMM uses BLOCK_IN of its BLOCK_IN x BLOCK_OUT products.  Stride 1 only: a stride-2 window
is a DMA whose element stride is 2, which the 2-D load pattern cannot express.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.dsl import te
from vtasim.compiler.errors import CompileError
from vtasim.compiler.ops._packed import bind_virtual_threads, ewise_on_alu
from vtasim.compiler.ops.conv_family import bias_shape, fused_epilogue
from vtasim.compiler.ops.layout import pack_channel_const, pack_nchw
from vtasim.compiler.dsl.schedule import create_schedule

__all__ = ["depthwise_alu", "schedule_depthwise_alu", "alu_program", "pack_alu_weights", "ROLES"]

ROLES = "bcyxBC"


def depthwise_alu(env, wl):
    """``(placeholders, output, window loads, ALU stages, padded stage or None)`` of ``wl``."""
    if wl.stride != 1:
        raise CompileError(f"{wl.name}: dw_alu = 1 needs stride 1 (stride {wl.stride}: a window with element "
                           f"stride {wl.stride} is no 2-D DMA); use dw_alu = 0, the block-diagonal GEMM")
    if env.BLOCK_IN != env.BLOCK_OUT:
        raise CompileError(f"{wl.name}: dw_alu = 1 needs BLOCK_IN = BLOCK_OUT")
    cb, taps, d = wl.cin // env.BLOCK_IN, wl.k * wl.k, wl.dilation
    data = te.placeholder((wl.batch // env.BATCH, cb, wl.h, wl.w, env.BATCH, env.BLOCK_IN), env.inp_dtype, "data")
    wvec = te.placeholder((1, cb, taps, 1, 1, env.BATCH, env.BLOCK_OUT), env.acc_dtype, "wvec")
    dpad = te.pad(data, (0, 0, wl.pad, wl.pad, 0, 0), name="data_pad") if wl.pad else None
    src = dpad if dpad is not None else data
    shape = (wl.batch // env.BATCH, cb, wl.oh, wl.ow, env.BATCH, env.BLOCK_OUT)
    def window(r, s):
        return lambda b, c, y, x, bi, ci: src[b, c, y + r * d, x + s * d, bi, ci].astype(env.acc_dtype)

    def product(win, t):
        return lambda b, c, y, x, bi, ci: win[b, c, y, x, bi, ci] * wvec[0, c, t, 0, 0, bi, ci]

    def add(a, p):
        return lambda *i: a(*i) + p(*i)

    windows, stages, acc = [], [], None
    for t in range(taps):
        win = te.compute(shape, window(*divmod(t, wl.k)), name=f"dw_x{t}")
        prod = te.compute(shape, product(win, t), name=f"dw_p{t}")
        windows.append(win)
        stages.append(prod)
        if acc is not None:
            acc = te.compute(shape, add(acc, prod), name=f"dw_a{t}")
            stages.append(acc)
        else:
            acc = prod
    bias = te.placeholder(bias_shape(shape, ROLES), env.acc_dtype, "bias")
    out = fused_epilogue(env, acc, bias, ROLES)
    return [data, wvec, bias], out, windows, stages, dpad


def schedule_depthwise_alu(env, out, windows, stages, dpad, placeholders, knobs: dict):
    """Output tiles as conv2d's (``tile_h``/``tile_w``/``tile_co``, threads over channel and row tiles);
    in each tile the window loads, the weight and bias vectors, then the ALU stages."""
    s = create_schedule(out.op)
    if dpad is not None:
        s[dpad].compute_inline()               # its select becomes the window loads' DMA padding
    _, wvec, bias = placeholders
    epilogue = []
    op = out.op.input_tensors[0].op            # the epilogue's stages up to the int8 cast
    while op is not stages[-1].op:
        epilogue.append(op.output(0))
        op = op.input_tensors[0].op
    alu = list(stages) + epilogue[::-1]
    consumers = {wvec: [p for p in stages if p.op.name.startswith("dw_p")],
                 bias: [t for t in alu if t.op.name == "res_bias"]}
    cached = [s.cache_read(t, env.acc_scope, users) for t, users in consumers.items()]
    ewise_on_alu(env, s, [t.op for t in alu])
    b, c, y, x, bi, ci = s[out].op.axis
    c0, c1 = s[out].split(c, factor=int(knobs["tile_co"][1]))
    y0, y1 = s[out].split(y, factor=int(knobs["tile_h"][1]))
    x0, x1 = s[out].split(x, factor=int(knobs["tile_w"][1]))
    s[out].reorder(b, y0, c0, x0, c1, y1, x1, bi, ci)
    for t in windows + cached:
        s[t].set_scope(env.acc_scope)
        s[t].compute_at(s[out], x0)
        s[t].pragma(s[t].op.axis[0], env.dma_copy)
    for t in alu:
        s[t].compute_at(s[out], x0)
    if knobs.get("oc_nthread", 1) > 1:
        bind_virtual_threads(s, out, c0, knobs["oc_nthread"], b)
    if knobs.get("h_nthread", 1) > 1:
        bind_virtual_threads(s, out, y0, knobs["h_nthread"], b)
    s[out].pragma(c1, env.dma_copy)
    return s


def pack_alu_weights(w: np.ndarray, env) -> np.ndarray:
    """Depthwise OIHW ``(C, 1, K, K)`` -> ``(1, C/o, K*K, 1, 1, b, o)`` int32 (the batch lanes repeated)."""
    c, _, kh, kw = w.shape
    v = w.reshape(c, kh * kw).T.astype(np.int32)                       # taps, C
    v = v.reshape(kh * kw, c // env.BLOCK_OUT, 1, env.BLOCK_OUT).transpose(1, 0, 2, 3)
    v = np.broadcast_to(v[None, :, :, None, None], (1, c // env.BLOCK_OUT, kh * kw, 1, 1, env.BATCH,
                                                     env.BLOCK_OUT))
    return np.ascontiguousarray(v)


def alu_program(env, wl, knobs: dict, x, w, bias):
    """``(schedule, args, packed inputs)`` of the ALU form from logical NCHW ``x``, OIHW ``w``, ``bias``."""
    placeholders, out, windows, stages, dpad = depthwise_alu(env, wl)
    sch = schedule_depthwise_alu(env, out, windows, stages, dpad, placeholders, knobs)
    inputs = {"data": pack_nchw(x, env.BATCH, env.BLOCK_IN), "wvec": pack_alu_weights(w, env),
              "bias": pack_channel_const(bias.astype(np.int32), env.BATCH, env.BLOCK_OUT)}
    return sch, placeholders + [out], inputs


def alu_fitting_knobs(wl, cfg) -> dict:
    """The largest output tile whose K*K windows, weight vectors and bias fit the accumulator (rows
    whole when they fit, at least two columns: a padded window needs a column loop), fewest tiles
    first; no virtual threads."""
    from vtasim.compiler.tuning.knobs import check_knobs, split_extents
    taps, ext = wl.k * wl.k, split_extents(wl, cfg)
    best = None
    for h in (d for d in range(1, ext["tile_h"] + 1) if ext["tile_h"] % d == 0):
        for w in (d for d in range(2 if ext["tile_w"] > 1 else 1, ext["tile_w"] + 1) if ext["tile_w"] % d == 0):
            if taps * h * w + taps + 1 <= cfg.acc_depth:
                key = ((ext["tile_h"] // h) * (ext["tile_w"] // w), -w)
                if best is None or key < best[0]:
                    best = (key, h, w)
    if best is None:
        raise CompileError(f"{wl.name}: no tile of the ALU form fits the accumulator ({cfg.acc_depth} elements)")
    _, h, w = best
    return check_knobs(wl, cfg, {"dw_alu": 1, "tile_h": [ext["tile_h"] // h, h], "tile_w": [ext["tile_w"] // w, w]})
