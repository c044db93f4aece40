"""The reference evaluator against plain numpy written independently here."""

import time

import numpy as np
import pytest

from vtasim.compiler.dsl import te
from vtasim.compiler.dsl.reference import ReferenceError_, evaluate

RNG = np.random.default_rng(7)


def _i8(shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


def test_packed_matmul_matches_einsum():
    n, k, m, bi, bo = 2, 3, 4, 16, 16
    A = te.placeholder((n, k, 1, bi), "int8", "A")
    B = te.placeholder((m, k, bo, bi), "int8", "B")
    ko = te.reduce_axis((0, k), "ko")
    ki = te.reduce_axis((0, bi), "ki")
    C = te.compute((n, m, 1, bo), lambda i, j, x, y: te.sum(
        A[i, ko, x, ki].astype("int32") * B[j, ko, y, ki].astype("int32"), axis=[ko, ki]), "C")
    a, b = _i8(A.shape), _i8(B.shape)
    got = evaluate(C, {A: a, B: b})
    want = np.einsum("ikxq,jkyq->ijxy", a.astype(np.int64), b.astype(np.int64))
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_int32_accumulation_wraps_like_the_hardware():
    A = te.placeholder((4, 8), "int32", "A")
    k = te.reduce_axis((0, 8), "k")
    C = te.compute((4,), lambda i: te.sum(A[i, k] * A[i, k], axis=[k]), "C")
    a = RNG.integers(-2**31, 2**31, (4, 8), dtype=np.int64).astype(np.int32)
    want = (a.astype(np.int64) ** 2 % 2**32).sum(axis=1) % 2**32
    want = np.where(want >= 2**31, want - 2**32, want)
    assert np.array_equal(evaluate(C, {"A": a}), want)


def test_generic_reduction_without_product():
    A = te.placeholder((3, 5), "int8", "A")
    k = te.reduce_axis((0, 5), "k")
    C = te.compute((3,), lambda i: te.sum(A[i, k].astype("int32") + 1, axis=[k]), "C")
    a = _i8((3, 5))
    assert np.array_equal(evaluate(C, {A: a}), a.astype(np.int64).sum(axis=1) + 5)


def _conv_graph(h, w, ic, oc, pad, stride):
    data = te.placeholder((1, ic // 16, h, w, 1, 16), "int8", "data")
    kernel = te.placeholder((oc // 16, ic // 16, 3, 3, 16, 16), "int8", "kernel")
    dpad = te.pad(data, (0, 0, pad, pad, 0, 0), name="data_buf")
    oh, ow = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    c = te.reduce_axis((0, ic // 16), "ic")
    ct = te.reduce_axis((0, 16), "ic_tns")
    dy = te.reduce_axis((0, 3), "dy")
    dx = te.reduce_axis((0, 3), "dx")
    res = te.compute((1, oc // 16, oh, ow, 1, 16), lambda bo, co, i, j, bi, ci: te.sum(
        dpad[bo, c, i * stride + dy, j * stride + dx, bi, ct].astype("int32")
        * kernel[co, c, dy, dx, ci, ct].astype("int32"), axis=[c, dy, dx, ct]), "res_conv")
    return data, kernel, res


def _conv_loops(x, wt, pad, stride):
    """NCHW/OIHW direct convolution with explicit loops (tiny sizes only)."""
    n, c, h, w = x.shape
    o = wt.shape[0]
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), np.int64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for oc in range(o):
        for i in range(oh):
            for j in range(ow):
                patch = xp[0, :, i * stride:i * stride + 3, j * stride:j * stride + 3]
                out[0, oc, i, j] = int((patch * wt[oc]).sum())
    return out


@pytest.mark.parametrize("pad,stride", [(1, 1), (1, 2), (0, 1)])
def test_conv2d_matches_explicit_loops(pad, stride):
    data, kernel, res = _conv_graph(5, 6, 32, 32, pad, stride)
    d, k = _i8(data.shape), _i8(kernel.shape)
    got = evaluate(res, {data: d, kernel: k})
    x = d.transpose(0, 4, 1, 5, 2, 3).reshape(1, 32, 5, 6).astype(np.int64)
    wt = k.transpose(0, 4, 1, 5, 2, 3).reshape(32, 32, 3, 3).astype(np.int64)
    want = _conv_loops(x, wt, pad, stride)
    assert np.array_equal(got.transpose(0, 4, 1, 5, 2, 3).reshape(want.shape), want)


def test_conv2d_c2_full_size_is_fast_and_right():
    data, kernel, res = _conv_graph(56, 56, 64, 64, 1, 1)
    d, k = _i8(data.shape), _i8(kernel.shape)
    t0 = time.perf_counter()
    got = evaluate(res, {data: d, kernel: k})
    elapsed = time.perf_counter() - t0
    x = np.pad(d.transpose(0, 4, 1, 5, 2, 3).reshape(1, 64, 56, 56).astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    wt = k.transpose(0, 4, 1, 5, 2, 3).reshape(64, 64, 3, 3).astype(np.float64)
    want = np.zeros((1, 64, 56, 56))
    for y in range(3):
        for z in range(3):
            want += np.einsum("nchw,oc->nohw", x[:, :, y:y + 56, z:z + 56].astype(np.float64), wt[:, :, y, z])
    assert np.array_equal(got.transpose(0, 4, 1, 5, 2, 3).reshape(1, 64, 56, 56), want.astype(np.int64))
    assert elapsed < 5.0, f"C2 reference took {elapsed:.2f} s (vectorisation lost?)"


def test_pad_values_and_shape():
    A = te.placeholder((2, 3), "int8", "A")
    P = te.pad(A, (1, 0), (2, 1), pad_value=-3, name="P")
    assert P.shape == (5, 4)
    a = _i8((2, 3))
    want = np.full((5, 4), -3, np.int64)
    want[1:3, 0:3] = a
    assert np.array_equal(evaluate(P, {A: a}), want)


def test_shifts_clip_and_casts():
    A = te.placeholder((64,), "int32", "A")
    shr = te.compute((64,), lambda i: A[i] >> 3, "shr")
    shl = te.compute((64,), lambda i: A[i] << 20, "shl")
    clip = te.compute((64,), lambda i: te.max(te.min(A[i], 127), -128), "clip")
    narrow = te.compute((64,), lambda i: A[i].astype("int8"), "narrow")
    widened = te.compute((64,), lambda i: te.cast("int32", narrow[i]) * 3, "widened")
    a = RNG.integers(-2**31, 2**31, 64, dtype=np.int64).astype(np.int32)
    got = evaluate([shr, shl, clip, narrow, widened], {A: a})
    a64 = a.astype(np.int64)
    assert np.array_equal(got[0], a64 >> 3)                                  # arithmetic shift
    assert np.array_equal(got[1], ((a64 << 20) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
    assert np.array_equal(got[2], np.clip(a64, -128, 127))
    assert got[3].dtype == np.int8 and np.array_equal(got[3], a.astype(np.int8))   # truncation
    assert np.array_equal(got[4], a.astype(np.int8).astype(np.int64) * 3)


def test_select_and_conditions():
    A = te.placeholder((10,), "int32", "A")
    B = te.compute((10,), lambda i: te.if_then_else(te.all_(te.ge(i, 2), te.lt(i, 7)), A[i] - 1, 100), "B")
    a = np.arange(10, dtype=np.int32)
    assert np.array_equal(evaluate(B, {"A": a}), np.where((a >= 2) & (a < 7), a - 1, 100))


def test_unguarded_out_of_bounds_read_is_an_error():
    A = te.placeholder((4,), "int32", "A")
    B = te.compute((4,), lambda i: A[i + 1], "B")
    with pytest.raises(ReferenceError_, match="read of `A` out of bounds: index 0 spans \\[1, 4\\]"):
        evaluate(B, {A: np.zeros(4, np.int32)})


def test_bad_inputs_are_named():
    A = te.placeholder((4,), "int8", "A")
    B = te.compute((4,), lambda i: A[i], "B")
    with pytest.raises(ReferenceError_, match="no input given for placeholder `A`"):
        evaluate(B, {})
    with pytest.raises(ReferenceError_, match="shape"):
        evaluate(B, {A: np.zeros(5, np.int8)})
    with pytest.raises(ReferenceError_, match="outside the range of int8"):
        evaluate(B, {A: np.full(4, 300)})
