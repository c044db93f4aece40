"""Is this ONNX graph well formed?  Checked in vtasim's words before anything else looks at it.

:func:`check_model` runs on the parsed model before the importer converts it and before onnxruntime
is asked to load it; each rule broken is one :class:`ModelFileError` line naming the node or value and
the rule:

* the default domain's opset is within :data:`MIN_OPSET` .. the installed ``onnx``'s newest;
* the graph has at least one input (not an initializer) and at least one output; every input is a
  numeric tensor;
* every node input is a graph input, an initializer or the output of an earlier node, each value has
  one producer, and every graph output is defined: so the graph is acyclic and in topological order,
  as the ONNX spec requires;
* convolution and pooling attributes are sane: ``strides``, ``dilations`` and ``kernel_shape`` >= 1,
  ``pads`` >= 0, and ``kernel_shape`` equal to the weight's spatial shape;
* every constant quantisation scale is finite and within :data:`SCALE_RANGE`;

then ``onnx.checker.check_model`` (its first line, for whatever else it finds; an output declared
without a shape passes, as onnxruntime runs it).  Every check is one
walk over the graph: time linear in its size.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.errors import ModelFileError

__all__ = ["check_model", "check_opset", "MIN_OPSET", "SCALE_RANGE", "NUMERIC_TYPES"]

MIN_OPSET = 10                          # QuantizeLinear / DequantizeLinear exist from opset 10
SCALE_RANGE = (2.0 ** -32, 2.0 ** 16)   # int8 scales are ~1e-4 .. 10; beyond this a requantisation overflows
NUMERIC_TYPES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                 10: "float16", 11: "double"}
_CONV = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}            # op -> index of its weight input
_POOL = ("MaxPool", "AveragePool")
_SCALES = {"QuantizeLinear": (1,), "DequantizeLinear": (1,), "QLinearConv": (1, 4, 6),
           "QLinearMatMul": (1, 4, 6), "QLinearAdd": (1, 4, 6), "QGemm": (1, 4, 7),
           "QLinearGlobalAveragePool": (1, 3), "QLinearSigmoid": (1, 3)}


def _where(k: int, n) -> str:
    return f"node {k} {n.name or '(unnamed)'!r} ({n.op_type})"


def check_opset(model, source: str = "model") -> None:
    """The default domain's opset within :data:`MIN_OPSET` .. the installed onnx's newest."""
    import onnx
    newest = onnx.defs.onnx_opset_version()
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx") and not MIN_OPSET <= imp.version <= newest:
            raise ModelFileError(f"{source}: opset {imp.version} of the default ONNX domain is outside "
                                 f"{MIN_OPSET}..{newest} (rule: QuantizeLinear needs >= {MIN_OPSET}; the installed "
                                 f"onnx knows up to {newest})")


def _inputs_outputs(g, inits: set, source: str) -> None:
    real = [vi for vi in g.input if vi.name not in inits]
    if not real:
        raise ModelFileError(f"{source}: the graph has no input (rule: at least one graph input that is not "
                             f"an initializer)")
    if not g.output:
        raise ModelFileError(f"{source}: the graph has no output (rule: at least one graph output)")
    for vi in real:
        t = vi.type
        if not t.HasField("tensor_type") or t.tensor_type.elem_type not in NUMERIC_TYPES:
            kind = (f"a tensor of {_type_name(t.tensor_type.elem_type)}" if t.HasField("tensor_type")
                    else f"a {t.WhichOneof('value') or 'typeless'} value")
            raise ModelFileError(f"{source}: input {vi.name!r} is {kind}, not numeric (rule: inputs are "
                                 f"tensors of {', '.join(sorted(set(NUMERIC_TYPES.values())))})")


def _type_name(elem_type: int) -> str:
    from onnx import TensorProto
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"element type {elem_type}"


def _dataflow(g, inits: set, source: str) -> None:
    """Defined values, one producer each, topological order (hence no cycle)."""
    later = {}
    for k, n in enumerate(g.node):
        for o in n.output:
            if o:
                later.setdefault(o, k)
    known = {vi.name for vi in g.input} | inits
    for k, n in enumerate(g.node):
        for i in n.input:
            if i and i not in known:
                j = later.get(i)
                if j is None:
                    raise ModelFileError(f"{source}: {_where(k, n)} reads value {i!r}, which nothing defines "
                                         f"(rule: each input is a graph input, an initializer or a node's output)")
                raise ModelFileError(f"{source}: {_where(k, n)} reads value {i!r}, produced by node {j} "
                                     f"{'after it' if j > k else '(itself)'} (rule: the graph is acyclic and "
                                     f"its nodes are in topological order)")
        for o in n.output:
            if o and o in known:
                raise ModelFileError(f"{source}: {_where(k, n)} produces value {o!r} again (rule: each value "
                                     f"has one producer)")
            known.add(o)
    for vi in g.output:
        if vi.name not in known:
            raise ModelFileError(f"{source}: graph output {vi.name!r} is not defined by any node, input or "
                                 f"initializer")


def _ints(a) -> list:
    return [int(v) for v in a.ints]


def _attributes(g, init_dims: dict, source: str) -> None:
    dq_of = {n.output[0]: n.input[0] for n in g.node if n.op_type == "DequantizeLinear" and n.input and n.output}
    for k, n in enumerate(g.node):
        if n.op_type not in _CONV and n.op_type not in _POOL:
            continue
        attrs = {a.name: _ints(a) for a in n.attribute if a.name in ("strides", "dilations", "kernel_shape", "pads")}
        for name in ("strides", "dilations", "kernel_shape"):
            if name in attrs and any(v < 1 for v in attrs[name]):
                raise ModelFileError(f"{source}: {_where(k, n)}: {name}={attrs[name]} (rule: each {name} "
                                     f"value >= 1)")
        if "pads" in attrs and any(v < 0 for v in attrs["pads"]):
            raise ModelFileError(f"{source}: {_where(k, n)}: pads={attrs['pads']} (rule: pads >= 0)")
        if n.op_type in _CONV and "kernel_shape" in attrs and len(n.input) > _CONV[n.op_type]:
            w = n.input[_CONV[n.op_type]]
            dims = init_dims.get(w, init_dims.get(dq_of.get(w)))
            if dims is not None and list(dims[2:]) != attrs["kernel_shape"]:
                raise ModelFileError(f"{source}: {_where(k, n)}: kernel_shape={attrs['kernel_shape']} but the "
                                     f"weight {w!r} has shape {list(dims)} (rule: kernel_shape equals the "
                                     f"weight's spatial shape)")


def _scales(g, inits: dict, source: str) -> None:
    from onnx import numpy_helper
    lo, hi = SCALE_RANGE
    for k, n in enumerate(g.node):
        for idx in _SCALES.get(n.op_type, ()):
            t = inits.get(n.input[idx]) if idx < len(n.input) else None
            if t is None or t.data_location == 1 or t.external_data:
                continue                                 # not a constant here (the importer refuses external data)
            size = int(np.prod([int(d) for d in t.dims]))
            if size > 1 << 20:                           # a scale is one value per tensor or per channel
                raise ModelFileError(f"{source}: {_where(k, n)}: scale {t.name!r} has {size} values (rule: one "
                                     f"per tensor or per channel)")
            try:
                s = np.asarray(numpy_helper.to_array(t), np.float64).reshape(-1)
            except (ValueError, TypeError):
                continue                                 # malformed: the importer names it
            bad = ~np.isfinite(s) | (s < lo) | (s > hi)
            if bad.any():
                v = float(s[int(np.argmax(bad))])
                raise ModelFileError(f"{source}: {_where(k, n)}: scale {t.name!r} = {v:.6g} (rule: quantisation "
                                     f"scales are finite and within {lo:.3g} .. {hi:g})")


def check_model(model, source: str = "model") -> None:
    """Raise a one-line :class:`ModelFileError` for the first rule of the module docstring ``model`` breaks."""
    import onnx
    g = model.graph
    check_opset(model, source)
    inits = {t.name: t for t in g.initializer}
    _inputs_outputs(g, set(inits), source)
    _dataflow(g, set(inits), source)
    _attributes(g, {name: tuple(int(d) for d in t.dims) for name, t in inits.items()}, source)
    _scales(g, inits, source)
    # An output declared without a shape is refused by the checker but run by onnxruntime (and by
    # vtasim, which infers shapes): the checker sees an empty shape there, removed again afterwards.
    unshaped = [vi.type.tensor_type for vi in g.output
                if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")]
    try:
        for t in unshaped:
            t.shape.SetInParent()
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as e:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise ModelFileError(f"{source}: not a valid ONNX model: {first[:200]} (rule: onnx.checker.check_model "
                             f"passes)") from None
    finally:
        for t in unshaped:
            t.ClearField("shape")
