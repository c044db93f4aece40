"""ONNX model -> :class:`~vtasim.compiler.frontend.graph.Graph`, checked before anything large is allocated.

Parsing is the ``onnx`` package's; this module bounds the file (a regular file of at most
``max_bytes``), refuses external data, checks every initializer's declared size against its bytes
and a limit *before* converting it, checks the declared input shapes, and maps the QOperator ops onto
the same composite ops that the QDQ fusion pass produces, so both quantisation formats take one
path.  Every unsupported op or attribute is collected and reported in one :class:`UnsupportedModel`.
"""

from __future__ import annotations

from math import prod

import numpy as np

from vtasim.compiler.frontend.errors import ModelFileError, UnsupportedModel
from vtasim.compiler.frontend.graph import Graph, Node
from vtasim.compiler.frontend.validate import check_model, check_opset
from vtasim.hw.files import read_regular

__all__ = ["load_onnx", "from_onnx", "ONNX_DTYPES", "SUPPORTED_OPS", "MAX_ELEMENTS", "MAX_MODEL_BYTES"]

MAX_MODEL_BYTES = 1 << 30          # 1 GiB of protobuf
MAX_ELEMENTS = 1 << 28             # per tensor (initializer, input or inferred value)

# ONNX op -> what the importer checks; the composite ops come from the QOperator ops
SUPPORTED_OPS = frozenset({
    "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "QLinearAdd", "QGemm",
    "ConvInteger", "MatMulInteger", "Conv", "Gemm", "MatMul", "Relu", "Clip", "Add", "Mul", "Sub",
    "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Concat", "BatchNormalization",
    "Identity", "Dropout", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Softmax", "Cast",
    "QLinearGlobalAveragePool", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearMul", "QLinearConcat",
    "QLinearAveragePool", "QLinearSoftmax",
    "Transpose", "Squeeze", "Unsqueeze", "Split", "Slice", "Pad", "Gather", "Div", "LayerNormalization", "Gelu",
    "Erf", "LeakyRelu", "PRelu", "Resize", "ConvTranspose", "Exp",
    "Constant", "Shape", "Size", "ConstantOfShape", "Expand",
})

ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           10: np.float16, 11: np.float64, 9: np.bool_}


def load_onnx(path, max_bytes: int = MAX_MODEL_BYTES, batch: int = 1) -> Graph:
    """Read and check ``path``, then :func:`from_onnx`."""
    import onnx
    from google.protobuf.message import DecodeError
    data = read_regular(path, "ONNX model", max_bytes, error=ModelFileError)
    if not data:
        raise ModelFileError(f"{path}: empty file, not an ONNX model")
    try:
        model = onnx.load_from_string(data)
    except (DecodeError, ValueError, RuntimeError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{path}: not an ONNX model (protobuf parse failed: {str(e).splitlines()[0][:120]}); "
                             f"is the file truncated?") from None
    if model.ir_version <= 0 or not model.graph.node:
        raise ModelFileError(f"{path}: not an ONNX model (ir_version {model.ir_version}, "
                             f"{len(model.graph.node)} nodes)")
    return from_onnx(model, str(path), batch=batch, validate=check_model)


def _dims(t, what: str) -> tuple:
    dims = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in dims):
        raise ModelFileError(f"{what}: negative dimension in {dims}")
    if prod(dims) > MAX_ELEMENTS:
        raise ModelFileError(f"{what}: declares {prod(dims):,} elements ({dims}); the limit is {MAX_ELEMENTS:,}")
    return dims


def _initializer(t, where: str) -> np.ndarray:
    from onnx import numpy_helper
    what = f"{where} initializer {t.name!r}"
    if t.data_location == 1 or t.external_data:
        raise ModelFileError(f"{what}: external data is not read (save the model with its tensors inside)")
    if t.data_type not in ONNX_DTYPES:
        raise ModelFileError(f"{what}: data type {t.data_type} is not one of the numeric types supported")
    dims = _dims(t, what)
    n, item = prod(dims), np.dtype(ONNX_DTYPES[t.data_type]).itemsize
    if t.raw_data:
        if len(t.raw_data) != n * item:
            raise ModelFileError(f"{what}: {len(t.raw_data)} bytes of data for shape {dims} of "
                                 f"{np.dtype(ONNX_DTYPES[t.data_type]).name} ({n * item} bytes needed)")
    else:
        have = max(len(t.float_data), len(t.int32_data), len(t.int64_data), len(t.double_data),
                   len(t.uint64_data))
        if have != n:
            raise ModelFileError(f"{what}: {have} values for shape {dims} ({n} needed)")
    return numpy_helper.to_array(t).astype(ONNX_DTYPES[t.data_type], copy=False)


def _attrs(node) -> dict:
    from onnx import helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _value_shape(vi, batch: int, what: str):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None, ONNX_DTYPES.get(t.elem_type)
    dims = []
    for k, d in enumerate(t.shape.dim):
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise ModelFileError(f"{what} {vi.name!r}: negative dimension {d.dim_value}")
            dims.append(int(d.dim_value))
        else:                            # symbolic: the batch dimension
            dims.append(batch if k == 0 else 1)
    if prod(dims) > MAX_ELEMENTS:
        raise ModelFileError(f"{what} {vi.name!r}: declares {prod(dims):,} elements ({tuple(dims)}); "
                             f"the limit is {MAX_ELEMENTS:,}")
    return tuple(dims), ONNX_DTYPES.get(t.elem_type)


def _check_attrs(op: str, attrs: dict, where: str) -> list[str]:
    bad = []
    if op in ("Conv", "QLinearConv", "ConvInteger"):
        if int(attrs.get("group", 1)) < 1:
            bad.append(f"{where}: group={attrs['group']} (a positive number of groups)")
        if any(d < 1 for d in attrs.get("dilations", [1, 1])):
            bad.append(f"{where}: dilations={attrs['dilations']} (each at least 1)")
    if op in ("Conv", "QLinearConv", "ConvInteger", "MaxPool", "AveragePool", "QLinearAveragePool"):
        if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            bad.append(f"{where}: auto_pad={attrs['auto_pad']} (give explicit pads)")
    if op in ("MaxPool", "AveragePool", "QLinearAveragePool"):
        if any(d != 1 for d in attrs.get("dilations", [1])):
            bad.append(f"{where}: dilations={attrs['dilations']} (only 1 is supported)")
        if len(attrs.get("kernel_shape", [])) != 2:
            bad.append(f"{where}: kernel_shape={attrs.get('kernel_shape')} (2-D pooling only)")
    if op == "ConvTranspose":
        if attrs.get("auto_pad", "NOTSET") != "NOTSET" or attrs.get("output_shape") is not None:
            bad.append(f"{where}: auto_pad/output_shape are not supported (ConvTranspose: give pads and "
                       f"output_padding)")
        if int(attrs.get("group", 1)) < 1:
            bad.append(f"{where}: group={attrs['group']} (a positive number of groups)")
    if op == "MaxPool" and attrs.get("storage_order", 0):
        bad.append(f"{where}: storage_order=1 is not supported")
    if op == "Resize":
        from vtasim.compiler.frontend.host_tensor import RESIZE_COORDS, RESIZE_MODES
        if attrs.get("mode", "nearest") not in RESIZE_MODES:
            bad.append(f"{where}: mode={attrs['mode']} (Resize: {', '.join(RESIZE_MODES)})")
        if attrs.get("coordinate_transformation_mode", "half_pixel") not in RESIZE_COORDS:
            bad.append(f"{where}: coordinate_transformation_mode={attrs['coordinate_transformation_mode']} "
                       f"(Resize: {', '.join(RESIZE_COORDS)})")
        if attrs.get("antialias", 0) or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            bad.append(f"{where}: antialias / keep_aspect_ratio_policy are not supported (Resize)")
        if attrs.get("axes") is not None:
            bad.append(f"{where}: axes is not supported (Resize: give scales or sizes for every axis)")
    return bad


def _static_shape(vi):
    """The value's shape when every dimension is a number, else None (unknown or data-dependent)."""
    t = vi.type.tensor_type
    if not t.HasField("shape") or not all(d.HasField("dim_value") for d in t.shape.dim):
        return None
    return tuple(int(d.dim_value) for d in t.shape.dim)


def _inferred_shapes(model, inputs: dict, source: str) -> dict:
    """{value: shape} from onnx's shape inference with the inputs at the shapes the importer fixed (a
    symbolic batch is ``batch``) and data propagation on, so shape computations (``Shape -> Gather ->
    Concat -> Reshape``) give numbers.  A value whose shape still has a symbolic dimension depends on
    the data and gets no entry.  The inputs' declared dimensions are restored afterwards."""
    import onnx
    saved = []
    for vi in model.graph.input:
        if vi.name in inputs and vi.type.tensor_type.HasField("shape"):
            dims = vi.type.tensor_type.shape.dim
            saved.append([d.dim_param if not d.HasField("dim_value") else int(d.dim_value) for d in dims])
            for d, v in zip(dims, inputs[vi.name][0]):
                d.dim_value = int(v)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except onnx.shape_inference.InferenceError as e:
        raise ModelFileError(f"{source}: shape inference failed: {str(e).splitlines()[0][:200]}") from None
    finally:
        k = 0
        for vi in model.graph.input:
            if vi.name in inputs and vi.type.tensor_type.HasField("shape"):
                for d, v in zip(vi.type.tensor_type.shape.dim, saved[k]):
                    if isinstance(v, int):
                        d.dim_value = v
                    else:
                        d.dim_param = v
                k += 1
    shapes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        s = _static_shape(vi)
        if s is not None:
            if prod(s) > MAX_ELEMENTS:
                raise ModelFileError(f"{source}: value {vi.name!r} declares {prod(s):,} elements ({s}); "
                                     f"the limit is {MAX_ELEMENTS:,}")
            shapes[vi.name] = s
    return shapes


def from_onnx(model, source: str = "model", batch: int = 1, validate=None) -> Graph:
    """Convert a parsed ``onnx.ModelProto``; raises :class:`UnsupportedModel` listing every problem.

    ``validate(model, source)`` (:func:`load_onnx` passes :func:`~vtasim.compiler.frontend.validate.check_model`)
    runs after the initializers' sizes are checked and the ops listed, before shape inference."""
    g = model.graph
    check_opset(model, source)
    consts = {}
    for t in g.initializer:
        consts[t.name] = _initializer(t, source)
    inputs = {}
    for vi in g.input:
        if vi.name in consts:
            continue
        shape, dtype = _value_shape(vi, batch, "input")
        if shape is None:
            raise ModelFileError(f"{source}: input {vi.name!r} declares no shape")
        inputs[vi.name] = (shape, dtype)
    opset = next((imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")), 1)
    problems, nodes = [], []
    for k, n in enumerate(g.node):
        where = f"node {k} {n.name or '(unnamed)'!r} ({n.op_type})"
        attrs = _attrs(n)
        if n.op_type == "Softmax" and n.domain in ("", "ai.onnx") and opset < 13:
            # before opset 13 Softmax flattens to 2-D at `axis` (default 1) and normalises over the rest
            attrs = {"axis": attrs.get("axis", 1), "coerce_2d": 1}
        if n.domain not in ("", "ai.onnx", "com.microsoft") or n.op_type not in SUPPORTED_OPS:
            problems.append(f"{where}: op {n.domain + '.' if n.domain else ''}{n.op_type} is not supported")
            continue
        if n.op_type == "Constant":
            continue
        problems += _check_attrs(n.op_type, attrs, where)
        if n.op_type == "ConstantOfShape" and "value" in attrs:
            attrs["value"] = _initializer(attrs["value"], f"{where} value")
        nodes.append(Node(n.op_type, list(n.input), list(n.output), attrs, n.name or f"{n.op_type}_{k}", where))
    # Constant nodes become constants (tensor attribute only)
    for k, n in enumerate(g.node):
        if n.op_type == "Constant":
            a = _attrs(n)
            if "value" not in a:
                problems.append(f"node {k} {n.name!r} (Constant): only the `value` attribute is supported")
            else:
                consts[n.output[0]] = _initializer(a["value"], source)
    if problems:
        raise UnsupportedModel(problems)
    if validate is not None:
        validate(model, source)             # graph rules in vtasim's words, then onnx's checker
    graph = Graph(nodes, inputs, [o.name for o in g.output], consts, g.name or source)
    graph.shapes = _inferred_shapes(model, inputs, source)
    from vtasim.compiler.frontend.qop import canonicalise_qoperator
    return canonicalise_qoperator(graph)
