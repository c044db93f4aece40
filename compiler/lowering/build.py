"""``build``: schedule -> lower -> passes -> codegen -> runtime -> memory image.

::

    with Environment(cfg) as env:
        s, (A, B, C) = my_schedule(env)
        built = build(s, [A, B, C], {"A": a, "B": b})
    built.image.save("out")            # replay with `vtasim run out --engine cycle --check`

The inputs are given in the placeholders' (packed) shapes; the image's expected outputs come
from evaluating the tensor expressions directly in numpy (:mod:`vtasim.compiler.dsl.reference`), never from
the lowered program.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasim.compiler.lowering.codegen import emit
from vtasim.compiler.dsl.environment import Environment
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.lower import LoweredFunc, lower
from vtasim.compiler.lowering.passes import run_passes
from vtasim.compiler.dsl.reference import evaluate, np_dtype
from vtasim.compiler.runtime import CommandQueue
from vtasim.compiler.dsl.tensor import PlaceholderOp

__all__ = ["build", "Built"]


@dataclass
class Built:
    """A compiled program: the memory image, the final IR and the runtime's statistics."""

    image: object
    func: LoweredFunc
    stats: dict = field(default_factory=dict)
    expected: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)     # tensor name -> its DramBuffer (address, size)


def build(sch, args, inputs: dict, cfg=None, name: str = "main", dump_ir=None, expected: bool = True,
          max_insns: int | None = None) -> Built:
    """Compile ``sch`` over ``args`` (placeholders and outputs, as for ``lower``) with ``inputs``
    (placeholder name -> array of its shape) into a memory image."""
    cfg = cfg if cfg is not None else Environment.current().cfg
    func = lower(sch, args, name)
    final = run_passes(func, cfg, dump_dir=dump_ir)
    if dump_ir is not None:
        from pathlib import Path

        from vtasim.hw.outfiles import write_text
        write_text(Path(dump_ir) / "00_lowered.txt", str(func) + "\n", "IR dump")
    q = CommandQueue(cfg, max_insns=max_insns, name=name)
    bufs, outs = {}, []
    for tensor, buf in zip(args, func.args):
        if isinstance(tensor.op, PlaceholderOp):
            if tensor.name not in inputs:
                raise CompileError(f"build of {name}: no input array for placeholder `{tensor.name}`")
            arr = np.asarray(inputs[tensor.name])
            if arr.shape != tuple(tensor.shape):
                raise CompileError(f"build of {name}: input `{tensor.name}` has shape {arr.shape}, "
                                   f"the placeholder {tuple(tensor.shape)}")
            if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
                raise CompileError(f"build of {name}: input `{tensor.name}` has dtype {arr.dtype} "
                                   f"(rule: inputs are integer arrays)")
            packed = arr.astype(np_dtype(tensor.dtype))
            if not np.array_equal(packed, arr):
                raise CompileError(f"build of {name}: input `{tensor.name}` has values outside {tensor.dtype} "
                                   f"(rule: an input fits its placeholder's dtype)")
            bufs[buf] = q.alloc_input(buf.name, packed)
        else:
            nbytes = buf.size * np.dtype(np_dtype(tensor.dtype)).itemsize
            bufs[buf] = q.alloc_output(buf.name, nbytes)
            outs.append(tensor)
    want = {}
    if expected and outs:
        values = evaluate(outs, {k: np.asarray(v) for k, v in inputs.items()})
        for t, v in zip(outs, values):
            want[t.name] = v
            q.expect(t.name, v)
    emit(final, q, bufs)
    named = {tensor.name: bufs[buf] for tensor, buf in zip(args, func.args)}
    return Built(q.build(), final, dict(q.stats), want, named)
