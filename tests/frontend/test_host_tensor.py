"""The host rules of the tensor/float ops of edge models, the grouped/dilated/ceil-mode forms and the
QOperator ops of onnxruntime's default output, each against onnxruntime on the CPU.

Float ops agree to rtol 1e-5 (data movement exactly); the integer forms (ConvInteger with groups,
QLinearConcat, QLinearLeakyRelu, QDQ data movement) exactly or, where onnxruntime requantises in
float32 and we in float64, to one LSB with at least 95 % of outputs identical.  Inputs are drawn so
the outputs vary (checked: not constant, not saturated).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_cases import both, check_exact, check_float, floats, model, rng

from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.onnx_import import from_onnx


def _one(op, x, inits=None, n_out=1, opset=17, extra_inputs=(), **attrs):
    ins = ["x"] + list(extra_inputs)
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, ins, outs, **attrs)
    m = model([node], {"x": x}, inits or {}, opset=opset)
    if n_out > 1:                                  # model() names the first output of the last node only
        from onnx import shape_inference
        g = shape_inference.infer_shapes(m).graph
        inf = {vi.name: vi for vi in list(g.value_info) + list(g.output)}
        del m.graph.output[:]
        m.graph.output.extend(inf[o] for o in outs)
    return m


def _varied(a):
    assert np.unique(a).size > 5, "output nearly constant: the test could not see a wrong rule"


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [3, 1, 0, 2]])
def test_transpose(perm):
    x = floats(rng(1), 2, 3, 4, 5)
    kw = {"perm": perm} if perm else {}
    check_exact(_one("Transpose", x, **kw), {"x": x})


@pytest.mark.parametrize("axes", [[1], [0, 3], [-1]])
def test_squeeze_unsqueeze(axes):
    x = floats(rng(2), 1, 3, 4, 1)
    if all(x.shape[a] == 1 for a in axes):
        check_exact(_one("Squeeze", x, {"ax": np.array(axes, np.int64)}, extra_inputs=["ax"]), {"x": x})
    check_exact(_one("Unsqueeze", x, {"ax": np.array(axes, np.int64)}, extra_inputs=["ax"]), {"x": x})


@pytest.mark.parametrize("split,n", [(None, 3), ([1, 4, 1], 3), ([6], 1)])
def test_split(split, n):
    x = floats(rng(3), 2, 6, 5)
    inits = {"s": np.array(split, np.int64)} if split else {}
    m = _one("Split", x, inits, n_out=n, extra_inputs=["s"] if split else [], axis=1)
    check_exact(m, {"x": x})


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [4], [1], [1]), ([0, -3], [2, 100], [0, 2], [1, 2]), ([4], [-100], [1], [-1]), ([-1], [0], [2], [-2])])
def test_slice(starts, ends, axes, steps):
    x = floats(rng(4), 3, 6, 7)
    inits = {"st": np.array(starts, np.int64), "en": np.array(ends, np.int64), "ax": np.array(axes, np.int64),
             "sp": np.array(steps, np.int64)}
    check_exact(_one("Slice", x, inits, extra_inputs=["st", "en", "ax", "sp"]), {"x": x})


@pytest.mark.parametrize("mode,pads", [("constant", [0, 1, 2, 0, 0, 2, 1, 3]), ("reflect", [0, 0, 2, 1, 0, 0, 1, 2]),
                                       ("edge", [0, 1, 1, 1, 0, 0, 2, 2]), ("constant", [0, 0, -1, 2, 0, 0, 1, -2])])
def test_pad(mode, pads):
    x = floats(rng(5), 2, 3, 5, 6)
    inits = {"p": np.array(pads, np.int64), "v": np.array(0.75, np.float32)}
    check_exact(_one("Pad", x, inits, extra_inputs=["p", "v"], mode=mode), {"x": x})


@pytest.mark.parametrize("axis,idx", [(0, [[1, 0], [2, -1]]), (1, [3, -4, 0]), (2, 1)])
def test_gather(axis, idx):
    x = floats(rng(6), 3, 4, 5)
    check_exact(_one("Gather", x, {"i": np.array(idx, np.int64)}, extra_inputs=["i"], axis=axis), {"x": x})


def test_div_float_and_integer():
    a, b = floats(rng(7), 3, 4), floats(rng(8), 3, 4) + 3
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])]
    m = model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": a}, {"b": b})
    check_float(m, {"a": a})
    ai = rng(9).integers(-50, 50, (3, 4)).astype(np.int32)
    bi = rng(10).integers(1, 7, (3, 4)).astype(np.int32) * np.where(rng(11).random((3, 4)) < 0.5, -1, 1).astype(
        np.int32)
    del ins
    check_exact(model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": ai}, {"b": bi}), {"a": ai})


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization(axis):
    r = rng(12)
    x = floats(r, 2, 5, 8)
    sh = x.shape[axis:] if axis != -1 else x.shape[-1:]
    inits = {"s": floats(r, *sh), "b": floats(r, *sh)}
    ref, ours = check_float(_one("LayerNormalization", x, inits, extra_inputs=["s", "b"], axis=axis, epsilon=1e-3),
                            {"x": x}, rtol=1e-4, atol=1e-5)
    _varied(ours[0])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    x = floats(rng(13), 4, 9) * 3
    check_float(_one("Gelu", x, opset=20, approximate=approximate), {"x": x}, rtol=1e-5, atol=1e-6)


def test_erf():
    x = floats(rng(14), 4, 9) * 2
    check_float(_one("Erf", x), {"x": x})


def test_leaky_relu_and_prelu():
    r = rng(15)
    x = floats(r, 2, 3, 4, 4)
    check_float(_one("LeakyRelu", x, alpha=0.1), {"x": x})
    check_float(_one("PRelu", x, {"s": np.abs(floats(r, 3, 1, 1))}, extra_inputs=["s"]), {"x": x})


@pytest.mark.parametrize("mode,coord,nearest", [
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "align_corners", "round_prefer_ceil"), ("nearest", "tf_half_pixel_for_nn", "ceil"),
    ("linear", "half_pixel", None), ("linear", "align_corners", None), ("linear", "asymmetric", None),
    ("linear", "pytorch_half_pixel", None)])
@pytest.mark.parametrize("how", ["scales", "sizes"])
def test_resize(mode, coord, nearest, how):
    x = floats(rng(16), 1, 2, 5, 7)
    kw = dict(mode=mode, coordinate_transformation_mode=coord)
    if nearest:
        kw["nearest_mode"] = nearest
    if how == "scales":
        inits = {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2.0, 1.5], np.float32)}
        ins = ["roi", "sc"]
    else:
        inits = {"roi": np.zeros(0, np.float32), "sc": np.zeros(0, np.float32), "sz": np.array([1, 2, 9, 4], np.int64)}
        ins = ["roi", "sc", "sz"]
    ref, ours = check_float(_one("Resize", x, inits, extra_inputs=ins, **kw), {"x": x}, rtol=1e-5, atol=1e-5)
    _varied(ours[0])


def test_batched_matmul_3d():
    r = rng(17)
    a, b = floats(r, 3, 4, 6), floats(r, 3, 6, 5)
    check_float(model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b}), {"a": a})


# --- grouped, depthwise and dilated convolutions, ceil-mode pooling: the host runs them -----------------

@pytest.mark.parametrize("group,dil", [(2, 1), (6, 1), (1, 2), (3, 2)])
def test_float_conv_groups_and_dilations(group, dil):
    r = rng(18)
    x, w, b = floats(r, 2, 6, 9, 9), floats(r, 6, 6 // group, 3, 3), floats(r, 6)
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, dilations=[dil, dil], pads=[1, 2, 1, 0],
                                strides=[1, 2])], {"x": x}, {"w": w, "b": b})
    check_float(m, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("group,dil", [(2, 1), (4, 1), (2, 2)])
def test_conv_integer_groups_and_dilations(group, dil):
    r = rng(19)
    x = r.integers(0, 256, (1, 4, 8, 8)).astype(np.uint8)
    w = r.integers(-128, 128, (4, 4 // group, 3, 3)).astype(np.int8)
    m = model([helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], group=group, dilations=[dil, dil],
                                pads=[1, 1, 1, 1])], {"x": x},
              {"w": w, "xz": np.array(7, np.uint8), "wz": np.array(3, np.int8)})
    ref, ours = check_exact(m, {"x": x})
    _varied(ours[0])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_ceil_mode_pooling(op, count_include_pad):
    x = floats(rng(20), 1, 3, 7, 8)
    kw = dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1], ceil_mode=1)
    if op == "AveragePool":
        kw["count_include_pad"] = count_include_pad
    elif count_include_pad:
        return
    check_float(_one(op, x, **kw), {"x": x})


# --- QOperator ops (com.microsoft) --------------------------------------------------------------------

def _ms_model(nodes, feeds, inits, out_shape, out_type=TensorProto.UINT8):
    """onnx's shape inference does not know the com.microsoft ops: the output is declared here."""
    from onnx import numpy_helper
    ins = [helper.make_tensor_value_info(k, TensorProto.UINT8, list(v.shape)) for k, v in feeds.items()]
    g = helper.make_graph(nodes, "t", ins, [helper.make_tensor_value_info("y", out_type, list(out_shape))],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def _ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain="com.microsoft", **attrs)


def _close(ref, ours):
    r, o = ref[0], ours[0]
    assert o.dtype == r.dtype and o.shape == r.shape, (o.shape, o.dtype, r.shape, r.dtype)
    d = np.abs(o.astype(np.int64) - r.astype(np.int64))
    assert d.max() <= 1, f"max {d.max()} LSB"
    assert (d == 0).mean() >= 0.95, f"only {(d == 0).mean():.3f} identical"
    info = np.iinfo(r.dtype)
    assert np.unique(r).size > 10 and ((r > info.min) & (r < info.max)).mean() > 0.5   # not saturated


_Q = dict(xs=np.array(0.05, np.float32), xz=np.array(120, np.uint8), ys=np.array(0.04, np.float32),
          yz=np.array(100, np.uint8))


def test_qlinear_leaky_relu_exact():
    x = rng(21).integers(0, 256, (2, 4, 6, 6)).astype(np.uint8)
    m = _ms_model([_ms("QLinearLeakyRelu", ["x", "xs", "xz", "ys", "yz"], ["y"], alpha=0.15)], {"x": x}, _Q, x.shape)
    ref, ours = check_exact(m, {"x": x})
    _varied(ours[0])


def test_qlinear_mul():
    r = rng(22)
    a = r.integers(0, 256, (2, 3, 5, 5)).astype(np.uint8)
    b = r.integers(0, 256, (1, 3, 1, 1)).astype(np.uint8)
    inits = dict(as_=np.array(0.03, np.float32), az=np.array(128, np.uint8), b=b, bs=np.array(0.02, np.float32),
                 bz=np.array(110, np.uint8), ys=np.array(0.06, np.float32), yz=np.array(128, np.uint8))
    inits["as"] = inits.pop("as_")
    m = _ms_model([_ms("QLinearMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])], {"a": a}, inits,
                  a.shape)
    _close(*both(m, {"a": a}))


def test_qlinear_concat_requantises_inputs_with_other_parameters():
    r = rng(23)
    a = r.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    b = r.integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    inits = dict(ys=np.array(0.05, np.float32), yz=np.array(120, np.uint8), as_=np.array(0.05, np.float32),
                 az=np.array(120, np.uint8), bs=np.array(0.08, np.float32), bz=np.array(90, np.uint8))
    inits["as"] = inits.pop("as_")
    m = _ms_model([_ms("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], axis=1)],
                  {"a": a, "b": b}, inits, (1, 5, 4, 4))
    ref, ours = both(m, {"a": a, "b": b})
    assert np.array_equal(ref[0][:, :2], a)                      # same parameters: copied
    _close(ref, ours)


def test_qlinear_average_pool():
    x = rng(24).integers(0, 256, (1, 4, 9, 9)).astype(np.uint8)
    m = _ms_model([_ms("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], kernel_shape=[3, 3],
                       strides=[2, 2], pads=[1, 1, 1, 1])], {"x": x}, _Q, (1, 4, 5, 5))
    _close(*both(m, {"x": x}))


def test_qlinear_softmax():
    x = rng(25).integers(0, 256, (3, 10)).astype(np.uint8)
    q = dict(xs=np.array(0.04, np.float32), xz=np.array(128, np.uint8), ys=np.array(1 / 256, np.float32),
             yz=np.array(0, np.uint8))
    m = _ms_model([_ms("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], axis=-1, opset=13)], {"x": x}, q, x.shape)
    ref, ours = both(m, {"x": x})
    d = np.abs(ours[0].astype(np.int64) - ref[0].astype(np.int64))
    assert d.max() <= 1 and np.unique(ref[0]).size > 10, (d.max(), np.unique(ref[0]).size)


def test_a_two_input_model_runs_with_both_feeds_and_names_a_missing_one():
    from vtasim.compiler.frontend.errors import FrontendError
    r = rng(26)
    a, b = floats(r, 2, 3), floats(r, 2, 3)
    m = model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": a, "b": b + 4}, {})
    check_float(m, {"a": a, "b": b + 4})
    g = from_onnx(m)
    with pytest.raises(FrontendError, match="'b'"):
        execute(g, {}, {"a": a}, engine="reference")


@pytest.mark.parametrize("strides,pads,out_pad,group,dil", [
    ((2, 2), (1, 1, 1, 1), (0, 0), 1, 1), ((2, 2), (1, 1, 1, 1), (1, 1), 1, 1), ((1, 1), (0, 0, 0, 0), (0, 0), 1, 1),
    ((2, 3), (0, 1, 2, 0), (1, 2), 2, 1), ((2, 2), (1, 0, 1, 0), (0, 0), 1, 2)])
def test_conv_transpose(strides, pads, out_pad, group, dil):
    r = rng(27)
    x, w, b = floats(r, 2, 4, 5, 6), floats(r, 4, 6 // group, 4, 3), floats(r, 6)
    m = model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=list(strides), pads=list(pads),
                                output_padding=list(out_pad), group=group, dilations=[dil, dil])],
              {"x": x}, {"w": w, "b": b})
    ref, ours = check_float(m, {"x": x}, rtol=1e-4, atol=1e-5)
    _varied(ours[0])


def test_qconv2d_transpose_against_a_scatter_loop():
    """The integer form (groups, per-channel weight zero points, pads, output_padding) against the
    definition written as a loop: every input pixel scatters its products onto the full output."""
    from vtasim.compiler import qnn
    r = rng(28)
    qa = r.integers(-128, 128, (1, 6, 5, 5)).astype(np.int8)
    qw = r.integers(-127, 128, (6, 2, 3, 3)).astype(np.int8)
    za, zw, groups, (sh, sw), (t, l, b, rr), (oph, opw) = 3, np.array([1, -2, 0, 4]), 2, (2, 2), (1, 1, 0, 0), (1, 0)
    got = qnn.qconv2d_transpose(qa, qw, za, zw, (sh, sw), (t, l, b, rr), 1, (oph, opw), groups=groups)
    fh, fw = sh * 4 + 3 + oph, sw * 4 + 3 + opw
    full = np.zeros((1, 4, fh, fw), np.int64)
    for c in range(6):
        g = c // 3
        for k in range(2):
            m = g * 2 + k
            for h in range(5):
                for w in range(5):
                    for i in range(3):
                        for j in range(3):
                            full[0, m, h * sh + i, w * sw + j] += (int(qa[0, c, h, w]) - za) * (int(qw[c, k, i, j])
                                                                                                 - int(zw[m]))
    want = full[:, :, t:fh - b, l:fw - rr]
    assert got.shape == want.shape and np.array_equal(got, want) and np.unique(got).size > 50
