"""Small helpers shared by the model scripts: build float ONNX graphs, quantise them with onnxruntime.

The graphs are written with ``onnx.helper`` at opset 17; quantisation is onnxruntime's static
quantisation (``quant_pre_process`` then ``quantize_static``) with int8 activations and weights,
per-tensor scales and MinMax calibration, so the files look like what a user brings.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from vtasim.compiler.errors import CompileError

OPSET = 17
FORMATS = ("qdq", "qop")
_CWD_LOCK = threading.Lock()       # the working directory is process-wide


class GraphBuilder:
    """Collects nodes and initialisers; each ``op`` call names its output after the node."""

    def __init__(self):
        self.nodes, self.inits = [], []
        self.counts = {}

    def _name(self, op: str) -> str:
        k = self.counts.get(op, 0)
        self.counts[op] = k + 1
        return f"{op.lower()}{k}"

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list, **attrs) -> str:
        name = self._name(op_type)
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x: str, w: np.ndarray, b: np.ndarray | None, stride=1, pad=0, group: int = 1,
             op: str = "Conv", **attrs) -> str:
        """A Conv (or ``op="ConvTranspose"``, weight (C, M/group, KH, KW)) with its weight and bias."""
        base = f"{op.lower()}{self.counts.get(op, 0)}"
        ins = [x, self.const(f"{base}.w", w.astype(np.float32))]
        if b is not None:
            ins.append(self.const(f"{base}.b", b.astype(np.float32)))
        k = w.shape[2:]
        if group != 1:
            attrs["group"] = group
        return self.op(op, ins, kernel_shape=list(k), strides=[stride, stride], pads=[pad] * 4, **attrs)

    def batchnorm(self, x: str, scale, bias, mean, var, eps=1e-5) -> str:
        base = f"bn{self.counts.get('BatchNormalization', 0)}"
        ins = [x] + [self.const(f"{base}.{n}", np.asarray(v, np.float32))
                     for n, v in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var))]
        return self.op("BatchNormalization", ins, epsilon=eps)

    def gemm(self, x: str, w: np.ndarray, b: np.ndarray) -> str:
        base = f"gemm{self.counts.get('Gemm', 0)}"
        return self.op("Gemm", [x, self.const(f"{base}.w", w.astype(np.float32)),
                                self.const(f"{base}.b", b.astype(np.float32))], transB=1)

    def model(self, name: str, x: str, in_shape: tuple, y: str, out_shape: tuple,
              in_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
        """The finished model with a symbolic batch dimension on its input and output."""
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(x, in_type, ["N", *in_shape])],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["N", *out_shape])],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="vtasim.models")
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model


def _reader(input_name: str, data: np.ndarray, batch: int):
    """An onnxruntime ``CalibrationDataReader`` over ``data`` in fixed batches."""
    from onnxruntime.quantization import CalibrationDataReader

    class Batches(CalibrationDataReader):
        def __init__(self):
            self._it = iter([{input_name: data[i:i + batch]} for i in range(0, len(data), batch)])

        def get_next(self):
            return next(self._it, None)

    return Batches()


def quantize(float_model: onnx.ModelProto, out: Path, calibration: np.ndarray, fmt: str = "qdq",
             batch: int = 64, symbolic_shapes: bool = True) -> Path:
    """Write the int8 model of ``float_model`` to ``out``, calibrated on ``calibration`` (NCHW float32).

    ``quant_pre_process`` runs first (shape inference and onnxruntime's basic graph optimisation,
    which folds BatchNormalization into the preceding Conv), as onnxruntime recommends;
    ``symbolic_shapes=False`` skips its symbolic shape inference (which gives up on Resize with a
    symbolic batch), leaving onnx's own.
    """
    from onnxruntime.quantization import QuantFormat, QuantType, quant_pre_process, quantize_static

    if fmt not in FORMATS:
        raise CompileError("quantize", f"format {fmt!r} is not one of {FORMATS}")
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw, pre = Path(tmp) / "float.onnx", Path(tmp) / "pre.onnx"
        onnx.save(float_model, raw)
        # onnxruntime's symbolic shape inference, when it gives up, saves its partial model to the
        # current directory before raising: run it from the temporary directory so nothing lands
        # in the user's working directory.
        with _CWD_LOCK, contextlib.chdir(tmp):
            quant_pre_process(str(raw), str(pre), skip_symbolic_shape=not symbolic_shapes)
        quantize_static(str(pre), str(out), _reader(float_model.graph.input[0].name, calibration, batch),
                        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                        per_channel=False, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    onnx.checker.check_model(onnx.load(out))
    return out


def op_counts(model: onnx.ModelProto) -> dict:
    """``{op_type: count}`` of the graph's nodes (``domain:op_type`` for ops outside the default domain)."""
    out = {}
    for node in model.graph.node:
        key = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def run(path_or_model, x: np.ndarray) -> np.ndarray:
    """The model's first output on ``x`` with onnxruntime on the CPU (one thread: reproducible), every
    node with its ONNX semantics (``compare.ort_session``'s "basic" level)."""
    from vtasim.compiler.frontend.compare import ort_session

    sess = ort_session(path_or_model)
    return sess.run(None, {sess.get_inputs()[0].name: x.astype(np.float32)})[0]
