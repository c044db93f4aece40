"""One- or few-node ONNX models built with ``onnx.helper``, run in onnxruntime and through
``from_onnx`` + ``execute`` (every node on the host): the shared helpers of the host-op tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from vtasim.compiler.frontend.compare import ort_session
from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.onnx_import import from_onnx

__all__ = ["F32", "U8", "I8", "I32", "model", "both", "check_float", "check_exact", "rng", "floats"]

F32, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
_ONNX_TYPE = {np.dtype(np.float32): F32, np.dtype(np.uint8): U8, np.dtype(np.int8): I8, np.dtype(np.int32): I32}


def model(nodes, feeds: dict, inits: dict, n_out: int = 1, opset: int = 17):
    """An opset-17 model: ``feeds`` name -> array (graph inputs), ``inits`` name -> array (initialisers);
    the outputs are the first output of the last ``n_out`` nodes (types left to inference)."""
    ins = [helper.make_tensor_value_info(k, _ONNX_TYPE[v.dtype], list(v.shape)) for k, v in feeds.items()]
    names = [n.output[0] for n in nodes[-n_out:]]
    g = helper.make_graph(nodes, "t", ins, [helper.make_empty_tensor_value_info(k) for k in names],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(m, strict_mode=True).graph.value_info}
    del m.graph.output[:]
    m.graph.output.extend(inferred[k] for k in names)   # the output types onnx infers
    return m


def both(model, feeds: dict):
    """(onnxruntime's outputs, ours) for the same model and inputs (onnxruntime at the "basic" level:
    each node with its ONNX semantics, see ``compare.ort_session``)."""
    sess = ort_session(model)
    ref = sess.run(None, feeds)
    g = from_onnx(model)
    outs, _ = execute(g, {}, feeds, engine="reference")
    return ref, [outs[o] for o in g.outputs]


def check_float(model, feeds, rtol=1e-5, atol=1e-6):
    ref, ours = both(model, feeds)
    for r, o in zip(ref, ours):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return ref, ours


def check_exact(model, feeds):
    ref, ours = both(model, feeds)
    for r, o in zip(ref, ours):
        assert o.dtype == r.dtype and o.shape == r.shape, (o.shape, o.dtype, r.shape, r.dtype)
        assert np.array_equal(o, r), f"max |diff| {np.abs(o.astype(np.int64) - r).max()}"
    return ref, ours


def rng(seed=0):
    return np.random.default_rng(seed)


def floats(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


