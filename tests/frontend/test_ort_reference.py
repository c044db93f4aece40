"""The onnxruntime reference (``compiler/frontend/compare.py``): its "basic" level keeps each node's ONNX
semantics, u8 x s8 products inside the 7-bit weight domain are exact, and the VNNI note."""

from __future__ import annotations

import platform

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper
from onnx_cases import model as _model

from vtasim.compiler.frontend.compare import (OrtReference, agreement, cpu_has_vnni, fused_level_note, ort_session,
                                              reference_top1)
from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.models import DIGITS_QDQ
from vtasim.compiler.frontend.models.digits import load_split


def test_basic_level_equals_the_unoptimised_graph_on_the_digits_qdq_model():
    x = load_split()[2][:64].astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(str(DIGITS_QDQ), opts, providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    ref = OrtReference(DIGITS_QDQ).run(x)
    assert np.unique(plain).size > 50                       # logits spread over many LSBs
    assert np.array_equal(ref, plain)


def test_u8_by_7_bit_s8_qlinear_matmul_is_exact_int64_arithmetic():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (16, 64)).astype(np.uint8)
    b = rng.integers(-63, 64, (64, 16)).astype(np.int8)     # 2*255*64 < 32767: no int16 pair saturates
    one, z = np.array(1, np.float32), np.array(0, np.uint8)
    inits = {"as": one, "az": z, "b": b, "bs": one, "bz": np.array(0, np.int8), "ys": np.array(1024, np.float32),
             "yz": np.array(128, np.uint8)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    exact = np.clip(np.rint((a.astype(np.int64) @ b.astype(np.int64)) / 1024.0) + 128, 0, 255)
    assert np.unique(exact).size > 20 and ((exact > 0) & (exact < 255)).mean() > 0.5
    for level in ("basic", "all"):
        y = ort_session(_model([node], {"a": a}, inits), level).run(None, {"a": a})[0]
        assert np.array_equal(y, exact), level


def test_an_unknown_level_is_refused():
    with pytest.raises(FrontendError, match="'fast' is not one of basic, all"):
        ort_session(DIGITS_QDQ, "fast")


@pytest.mark.parametrize("flags,want", [("fpu avx2 avx512_vnni", True), ("fpu avx2 avx_vnni", True),
                                        ("fpu sse4_2 avx2 fma", False), (None, None)])
def test_vnni_is_read_from_the_cpu_flags(tmp_path, monkeypatch, flags, want):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    info = tmp_path / "cpuinfo"
    if flags is not None:
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_has_vnni(str(info)) is want


def test_the_note_is_one_line_only_for_the_fused_level_without_vnni():
    note = fused_level_note("all", vnni=False)
    assert note and "\n" not in note and "VNNI" in note
    assert fused_level_note("basic", vnni=False) is None
    assert fused_level_note("all", vnni=True) is None



def test_top1_agreement_counts_a_class_tied_for_top_in_the_reference_and_nothing_else():
    ref = np.array([[1, 5, 3, 5], [4, 2, 0, 1], [0, 0, 9, 1]], np.float32)   # row 0: classes 1 and 3 tie
    same = agreement(ref, ref, 1.0)
    assert same["top1"] == 1.0
    other_tie = np.array([[1, 4, 3, 5], [4, 2, 0, 1], [0, 0, 9, 1]], np.float32)  # ours names class 3 alone
    assert agreement(other_tie, ref, 1.0)["top1"] == 1.0
    below = np.array([[1, 5, 6, 5], [4, 2, 0, 1], [0, 0, 9, 1]], np.float32)      # class 2, below the top in ref
    assert agreement(below, ref, 1.0)["top1"] == pytest.approx(2 / 3)
    swapped = np.array([[1, 5, 3, 5], [2, 4, 0, 1], [0, 0, 9, 9]], np.float32)    # row 1 wrong; row 2 ties 2, 3
    assert agreement(swapped, ref, 1.0)["top1"] == pytest.approx(2 / 3)
    ours_tie = np.array([[1, 5, 3, 5], [4, 2, 0, 1], [0, 9, 9, 1]], np.float32)   # row 2: ours ties 1 and 2
    assert ours_tie[2].argmax() == 1 and agreement(ours_tie, ref, 1.0)["top1"] == 1.0
    # the class the records of `vtasim infer` keep: our top-1 where the two tops meet, else the reference's
    assert reference_top1(other_tie, ref).tolist() == [3, 0, 2]
    assert reference_top1(below, ref).tolist() == [1, 0, 2]
    assert reference_top1(ours_tie, ref).tolist() == [1, 0, 1]
