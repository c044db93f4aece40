"""Host (numpy) rules of the ONNX ops that compute shapes: ``Shape``, ``Size``, ``ConstantOfShape``,
``Expand``.

PyTorch exports ``x.view(x.size(0), -1)`` as ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``;
:func:`vtasim.compiler.frontend.dyn_static.dynamic_to_static` folds such chains to constants when the shapes
are static, and these rules run the ones that are not (a shape read from the data) on the host.  A
shape computed at run time is checked against the importer's element limit before anything is
allocated.
"""

from __future__ import annotations

from math import prod

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["SHAPE_OPS", "shape_slice", "expand_shape", "check_elements"]


def check_elements(node, shape, what: str) -> tuple:
    """``shape`` as a tuple of non-negative ints, refused beyond the importer's element limit."""
    from vtasim.compiler.frontend.onnx_import import MAX_ELEMENTS
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise FrontendError(f"{node.where}: {what} {dims} has a negative dimension")
    if prod(dims) > MAX_ELEMENTS:
        raise FrontendError(f"{node.where}: {what} {dims} has {prod(dims):,} elements; the limit is {MAX_ELEMENTS:,}")
    return dims


def shape_slice(node, shape: tuple) -> tuple:
    """The part of ``shape`` a ``Shape`` node returns (its ``start``/``end`` attributes, opset 15)."""
    start, end = node.attrs.get("start", 0), node.attrs.get("end")
    return tuple(shape[slice(int(start), None if end is None else int(end))])


def expand_shape(node, x_shape: tuple, shape) -> tuple:
    """``Expand``'s output shape: numpy broadcasting of ``x_shape`` and ``shape`` (either may be longer)."""
    want = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    try:
        out = np.broadcast_shapes(tuple(x_shape), want)
    except ValueError:
        raise FrontendError(f"{node.where}: Expand of shape {tuple(x_shape)} to {want}: not broadcastable") from None
    return check_elements(node, out, "Expand output shape")


def _constant_of_shape(node, shape):
    dims = check_elements(node, shape, "ConstantOfShape shape")
    value = node.attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(dims, fill[0], dtype=fill.dtype)


def _expand(node, x, shape):
    return np.ascontiguousarray(np.broadcast_to(x, expand_shape(node, x.shape, shape)))


SHAPE_OPS = {
    "Shape": lambda n, x: np.array(shape_slice(n, x.shape), np.int64),
    "Size": lambda n, x: np.array(x.size, np.int64),
    "ConstantOfShape": _constant_of_shape,
    "Expand": _expand,
}
