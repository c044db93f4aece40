"""One grouped / depthwise / dilated / transposed conv layer from logical (NCHW) arrays to a memory image.

::

    wl = parse_workload("depthwise_conv2d.14.14.256.3.1.1", cfg)
    layer = compile_conv_layer(cfg, wl, x, w, bias)          # x NCHW int8, w OIHW (IOHW transposed)
    res = run_engine("cycle", layer.built.image)
    y = layer.output(res)                                    # NCHW int8
    assert (y == host_reference(wl, x, w, bias)).all()

The image's expected output is the tensor expressions evaluated in numpy; :func:`host_reference`
is the same layer through :mod:`vtasim.compiler.qnn.grouped` (the ONNX/PyTorch definitions), which shares
no code with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.compiler.lowering.build import build
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.tuning.knobs import check_knobs, fitting_knobs
from vtasim.compiler.ops.conv2d_transpose import transpose_inputs, transpose_program, unpack_transpose_output
from vtasim.compiler.ops.group_conv2d import group_inputs, group_program, unpack_group_output
from vtasim.compiler.ops.layout import unpack_nchw
from vtasim.compiler.qnn.grouped import conv2d_grouped_int32, conv2d_transpose_int32
from vtasim.compiler.tuning.workloads_grouped import Conv2dTranspose

__all__ = ["ConvLayer", "compile_conv_layer", "host_reference", "visible_inputs", "OUTPUT"]

OUTPUT = "res"


@dataclass
class ConvLayer:
    workload: object
    knobs: dict
    built: object
    out_shape: tuple             # the packed output tensor's shape

    def output(self, result) -> np.ndarray:
        """The NCHW int8 output of an engine run of ``built.image``."""
        raw = np.frombuffer(result.outputs[OUTPUT], dtype=np.int8).reshape(self.out_shape)
        if isinstance(self.workload, Conv2dTranspose):
            return unpack_transpose_output(raw)
        return unpack_group_output(raw) if raw.ndim == 7 else unpack_nchw(raw)      # 6-D: the ALU form


def compile_conv_layer(cfg, wl, x, w, bias, knobs: dict | None = None, expected: bool = True) -> ConvLayer:
    """Compile ``wl`` (a ``GroupConv2d`` or ``Conv2dTranspose``) with ``x`` NCHW int8, ``w`` int8 (OIHW
    ``(COUT, CIN/groups, K, K)``; transposed: IOHW ``(CIN, COUT, K, K)``) and ``bias`` int32 ``(COUT,)``;
    ``knobs`` default to the largest tiles that fit."""
    transpose = isinstance(wl, Conv2dTranspose)
    knobs = check_knobs(wl, cfg, fitting_knobs(wl, cfg) if knobs is None else knobs)
    with Environment(cfg) as env:
        program = transpose_program if transpose else group_program
        logical = {"x": np.asarray(x, np.int8), "w": np.asarray(w, np.int8), "bias": np.asarray(bias, np.int32)}
        sch, args, inputs = program(env, wl, knobs, logical=logical)
        built = build(sch, args, inputs, cfg, name=wl.name.replace("/", "_").replace(".", "_"), expected=expected)
    return ConvLayer(wl, knobs, built, tuple(args[-1].shape))


def host_reference(wl, x, w, bias, shift: int = 8) -> np.ndarray:
    """The layer in numpy from its definition: conv -> ``>> shift`` -> ``+ bias`` -> clip [0, 127] -> int8."""
    if isinstance(wl, Conv2dTranspose):
        acc = conv2d_transpose_int32(x, w, wl.stride, wl.pad)
    else:
        acc = conv2d_grouped_int32(x, w, wl.stride, wl.pad, wl.groups, wl.dilation)
    y = (acc.astype(np.int64) >> shift) + np.asarray(bias, np.int64).reshape(1, -1, 1, 1)
    return np.clip(y, 0, 127).astype(np.int8)


def visible_inputs(cfg, wl, seed: int = 0) -> tuple:
    """``(x, w, bias)`` logical arrays as the catalogue draws them (:mod:`vtasim.compiler.ops.visible_data`)."""
    with Environment(cfg) as env:
        logical = (transpose_inputs if isinstance(wl, Conv2dTranspose) else group_inputs)(env, wl, seed)[0]
    return logical["x"], logical["w"], logical["bias"]
