"""``te``: what a TVM user imports to write a VTA schedule (``from vtasim.compiler.dsl import te``).

The tensor-expression layer (:mod:`vtasim.compiler.dsl.tensor`) plus ``create_schedule`` from
:mod:`vtasim.compiler.dsl.schedule`, under the names TVM's ``te`` uses::

    A = te.placeholder((1, 64, 1, 16), "int32", "A")
    B = te.compute(A.shape, lambda *i: A(*i) + 1, "B")
    s = te.create_schedule(B.op)
"""

from vtasim.compiler.dsl.schedule import create_schedule
from vtasim.compiler.dsl.tensor import *  # noqa: F403 - the facade re-exports the tensor layer's public names
from vtasim.compiler.dsl.tensor import __all__ as _tensor_all

__all__ = list(_tensor_all) + ["create_schedule"]
