"""The sub-network set: the recurring patterns of ResNet-18 as small int8 QDQ models.

* ``residual_block``: a BasicBlock with an identity shortcut (Conv3x3+BN+Relu, Conv3x3+BN, Add, Relu);
* ``downsample_block``: the stride-2 BasicBlock with the 1x1 stride-2 Conv+BN shortcut;
* ``dense_head``: GlobalAveragePool, Flatten, Gemm.

They are built with the same parts as ``resnet18`` (He-initialised weights, random BN statistics,
seeded) and quantised the same way (``quant_pre_process`` folds BN, then ``quantize_static``:
int8 activations and weights, per-tensor), calibrated on seeded non-negative random activations
(what a block sees after the previous Relu). Each function writes one file and returns its path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.compiler.errors import CompileError
from vtasim.compiler.frontend.models._onnx import GraphBuilder, quantize
from vtasim.compiler.frontend.models.resnet18 import CALIBRATION_IMAGES, basic_block
from vtasim.compiler.frontend.models.resnet18 import dense_head as _head


def _calibration(seed: int, shape: tuple) -> np.ndarray:
    return np.abs(np.random.default_rng(seed + 1).standard_normal((CALIBRATION_IMAGES, *shape))).astype(np.float32)


def _int8(model, path, seed: int, fmt: str) -> Path:
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])
    return quantize(model, Path(path), _calibration(seed, shape), fmt, batch=1)


def residual_block_float(c: int = 64, hw: int = 56, seed: int = 0):
    """The float model (BatchNormalization kept) of ``residual_block``."""
    g = GraphBuilder()
    y = basic_block(g, np.random.default_rng(seed), "x", c, c)
    return g.model("residual_block", "x", (c, hw, hw), y, (c, hw, hw))


def downsample_block_float(cin: int = 64, cout: int = 128, hw: int = 56, seed: int = 0):
    """The float model (BatchNormalization kept) of ``downsample_block``."""
    if hw % 2:
        raise CompileError("downsample_block", f"hw {hw} must be even for a stride-2 block")
    g = GraphBuilder()
    y = basic_block(g, np.random.default_rng(seed), "x", cin, cout, stride=2)
    return g.model("downsample_block", "x", (cin, hw, hw), y, (cout, hw // 2, hw // 2))


def dense_head_float(c: int = 512, classes: int = 1000, hw: int = 7, seed: int = 0):
    """The float model of ``dense_head``."""
    g = GraphBuilder()
    y = _head(g, np.random.default_rng(seed), "x", c, classes)
    return g.model("dense_head", "x", (c, hw, hw), y, (classes,))


def residual_block(path, c: int = 64, hw: int = 56, seed: int = 0, format: str = "qdq") -> Path:  # noqa: A002
    """Identity-shortcut BasicBlock, input and output (N, c, hw, hw)."""
    return _int8(residual_block_float(c, hw, seed), path, seed, format)


def downsample_block(path, cin: int = 64, cout: int = 128, hw: int = 56, seed: int = 0,
                     format: str = "qdq") -> Path:  # noqa: A002
    """Stride-2 BasicBlock with the 1x1 stride-2 shortcut: (N, cin, hw, hw) -> (N, cout, hw/2, hw/2)."""
    return _int8(downsample_block_float(cin, cout, hw, seed), path, seed, format)


def dense_head(path, c: int = 512, classes: int = 1000, hw: int = 7, seed: int = 0,
               format: str = "qdq") -> Path:  # noqa: A002
    """GlobalAveragePool, Flatten, Gemm c->classes: (N, c, hw, hw) -> (N, classes)."""
    return _int8(dense_head_float(c, classes, hw, seed), path, seed, format)
