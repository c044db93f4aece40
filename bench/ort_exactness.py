"""onnxruntime's int8 kernels on this CPU against exact integer arithmetic (numpy int64), and the
digits QDQ model at onnxruntime's "basic" level (each node per the ONNX spec) against its "all" level
(QDQ fused into its integer kernels).  Prints whether the CPU has VNNI; asserts nothing.

    python bench/ort_exactness.py

On x86-64 without VNNI onnxruntime's u8 x s8 kernels sum products in saturating int16 pairs
(VPMADDUBSW); docs/quantisation.md, "The onnxruntime reference on CPUs without VNNI", quotes this.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from vtasim.compiler.frontend.compare import cpu_has_vnni, ort_session

_TYPE = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}
_CASES = [("u8 x s8, 8-bit weights", np.uint8, 127), ("u8 x s8, 7-bit weights", np.uint8, 63),
          ("s8 x s8, 8-bit weights", np.int8, 127)]


def _run(node, x, inits, level="basic"):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", _TYPE[x.dtype], list(x.shape))],
                          [helper.make_empty_tensor_value_info(node.output[0])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return ort_session(m, level).run(None, {"x": x})[0].astype(np.int64)


def _conv_acc(x, w):
    k = w.shape[2]
    h, wd = x.shape[2] - k + 1, x.shape[3] - k + 1
    acc = np.zeros((x.shape[0], w.shape[0], h, wd), np.int64)
    for i in range(k):
        for j in range(k):
            acc += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.int64), x[:, :, i:i + h, j:j + wd].astype(np.int64))
    return acc


def op_table(rng) -> None:
    for label, xdt, lim in _CASES:
        info = np.iinfo(xdt)
        a = rng.integers(info.min, info.max + 1, (16, 64)).astype(xdt)
        b = rng.integers(-lim, lim + 1, (64, 16)).astype(np.int8)
        exact = a.astype(np.int64) @ b.astype(np.int64)
        d_mmi = np.abs(_run(helper.make_node("MatMulInteger", ["x", "b"], ["y"]), a, {"b": b}) - exact).max()
        z, one, big = np.array(0, xdt), np.array(1, np.float32), np.array(2000, np.float32)
        q = dict(xs=one, xz=z, w=b, ws=one, wz=np.array(0, np.int8), ys=big, yz=z)
        ref = np.clip(np.rint(exact / 2000.0), info.min, info.max)
        d_qmm = np.abs(_run(helper.make_node("QLinearMatMul", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                                             ["y"]), a, q) - ref).max()
        x = rng.integers(info.min, info.max + 1, (1, 16, 6, 6)).astype(xdt)
        w = rng.integers(-lim, lim + 1, (8, 16, 3, 3)).astype(np.int8)
        q["w"] = w
        ref = np.clip(np.rint(_conv_acc(x, w) / 2000.0), info.min, info.max)
        d_qc = np.abs(_run(helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"]),
                           x, q) - ref).max()
        print(f"  {label:24s} MatMulInteger {d_mmi:6.0f}   QLinearMatMul {d_qmm:3.0f} LSB   QLinearConv {d_qc:3.0f} LSB")


def digits_levels() -> None:
    from vtasim.compiler.frontend.models import DIGITS_QDQ
    from vtasim.compiler.frontend.models.digits import load_split
    x = load_split()[2].astype(np.float32)
    m = onnx.load(DIGITS_QDQ)
    last = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)      # DequantizeLinear
    lsb = float(next(numpy_helper.to_array(i) for i in m.graph.initializer if i.name == last.input[1]))
    basic, fused = (ort_session(DIGITS_QDQ, lv).run(None, {"image": x})[0] for lv in ("basic", "all"))
    d = np.abs(basic - fused)
    print(f"  {DIGITS_QDQ.name}, {len(x)} held-out digits: basic vs all max {d.max():.3f} "
          f"({d.max() / lsb:.0f} output LSB), {(d > 0).mean():.3f} of the logits differ, top-1 agreement "
          f"{(basic.argmax(1) == fused.argmax(1)).mean():.3f}")


def main() -> int:
    print(f"CPU VNNI (avx512_vnni/avx_vnni): {cpu_has_vnni()}")
    print("max |onnxruntime - exact int64| (onnxruntime level basic; 16x64 @ 64x16, 3x3 conv of 16 channels):")
    op_table(np.random.default_rng(0))
    digits_levels()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
