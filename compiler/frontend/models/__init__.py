"""Real int8 ONNX models for the quantised front end.

* ``digits``: a small CNN for scikit-learn's digits, trained in numpy; the float model and its
  onnxruntime int8 quantisations (QDQ and QOperator) ship next to this file (``DIGITS_*``).
* ``resnet18``: a ResNet-18-shaped network with random weights, generated on demand (not shipped).
* ``blocks``: the sub-network set (residual block, stride-2 downsampling block, dense head), generated
  on demand.

Importing this package needs nothing beyond the standard library; the scripts import numpy, onnx,
onnxruntime and scikit-learn (the ``onnx`` extra) when they run.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
DIGITS_FLOAT = HERE / "digits_float.onnx"
DIGITS_QDQ = HERE / "digits_int8_qdq.onnx"
DIGITS_QOP = HERE / "digits_int8_qop.onnx"

__all__ = ["DIGITS_FLOAT", "DIGITS_QDQ", "DIGITS_QOP", "digits_paths"]


def digits_paths() -> dict:
    """``{"float": path, "qdq": path, "qop": path}`` of the shipped digits models."""
    return {"float": DIGITS_FLOAT, "qdq": DIGITS_QDQ, "qop": DIGITS_QOP}
