"""Judge a network run against onnxruntime on the CPU: error in output LSBs, relative error, top-k."""

from __future__ import annotations

import numpy as np

from compiler.frontend.errors import FrontendError

__all__ = ["OrtReference", "output_lsb", "agreement"]


class OrtReference:
    """An onnxruntime CPU session of the same model file."""

    def __init__(self, path):
        from sim.install import require
        require(["onnxruntime"], "the onnxruntime reference")
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4         # fatal only: its errors come back as exceptions, said in one line
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:              # noqa: BLE001 - onnxruntime's pybind errors share no base class
            raise FrontendError(f"{path}: onnxruntime cannot load the model: {_first_line(e)}") from None
        self.input_name = self.session.get_inputs()[0].name
        self.path = path

    def run(self, x) -> np.ndarray:
        """The first output for one input: an array (one-input model) or {input name: array}."""
        try:
            return self.session.run(None, x if isinstance(x, dict) else {self.input_name: x})[0]
        except Exception as e:              # noqa: BLE001 - as above
            raise FrontendError(f"{self.path}: onnxruntime cannot run the model: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
    return text if len(text) <= 200 else text[:200] + "..."


def output_lsb(graph) -> float | None:
    """The scale of the quantised tensor the first output is dequantised from (None: a float output)."""
    prod = graph.producers()
    n = prod.get(graph.outputs[0])
    if n is not None and n.op == "DequantizeLinear":
        s = graph.const(n.inputs[1])
        if s is not None and s.size == 1:
            return float(s.reshape(-1)[0])
    return None


def agreement(ours: np.ndarray, ref: np.ndarray, lsb: float | None) -> dict:
    """Per-batch metrics of ``ours`` against ``ref`` (both (N, classes) or any shape)."""
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if a.shape != b.shape:
        raise FrontendError(f"output shape {a.shape} differs from onnxruntime's {b.shape}")
    diff = np.abs(a - b)
    out = {"max_abs": float(diff.max()) if diff.size else 0.0,
           "rel_err": float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))}
    out["max_lsb"] = float(np.round(out["max_abs"] / lsb, 3)) if lsb else None
    if a.ndim == 2:
        out["top1"] = float(np.mean(a.argmax(1) == b.argmax(1)))
        if a.shape[1] >= 5:               # the reference's top-1 class among our top 5
            top5 = np.argsort(-a, 1, kind="stable")[:, :5]
            out["top5"] = float(np.mean([r in t for r, t in zip(b.argmax(1), top5)]))
    return out
