"""The VTA lowering passes, one module each, in TVM's order (compiler spec 4.1).

``run_passes(func, cfg, dump_dir=None)`` takes the phase-0 function ``lower`` produced (anything with
``name``, ``args`` and ``body``; see docs/compiler.md) and returns the same kind of object whose body
holds only loops, coproc/uop scopes and runtime calls -- what :mod:`vtasim.compiler.lowering.codegen` walks.  With
``dump_dir`` it writes ``00_input.txt`` and then ``NN_<pass>.txt``, the IR after each pass
(``vtasim compile --dump-ir DIR``).

==  ======================  =================================================================
 1  simplify                drop extent-1 loops, fold constants (TVM phase-1 Simplify)
 2  inject_dma              pragma_dma_copy -> VTALoadBuffer2D / VTAStoreBuffer2D in coproc scopes
 3  annotate_alu_scope      pragma_alu -> coproc_scope 2 + coproc_uop_scope VTAPushALUOp
 4  lift_attr_scope_uop     one uop kernel per tensorized / ALU loop nest
 5  lift_alloc              allocations to the head of their loop / virtual-thread scope
 6  lift_attr_scope_coproc  runs of same-stage work share one coproc_scope
 7  coproc_sync             dependence push/pop, loop-carried tokens, priming, draining, final sync
 8  storage_rewrite         one allocation per SRAM scope, in-place ALU stages, SRAM size check
 9  inject_virtual_thread   buffers x threads, statement-granularity replication
10  inject_alu              ALU loop nests -> uop loops + one uop
11  lower_storage_access    access pointers -> SRAM element indices
12  fold_uop_loop           up to two GEMM loops -> VTAUopLoopBegin/End; kernel sites
==  ======================  =================================================================
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from vtasim.compiler.lowering import ir
from vtasim.hw.outfiles import out_dir, write_text
from vtasim.compiler.lowering.passes.annotate_alu_scope import annotate_alu_scope
from vtasim.compiler.lowering.passes.coproc_sync import coproc_sync
from vtasim.compiler.lowering.passes.fold_uop_loop import fold_uop_loop
from vtasim.compiler.lowering.passes.inject_alu import inject_alu
from vtasim.compiler.lowering.passes.inject_dma import inject_dma
from vtasim.compiler.lowering.passes.inject_virtual_thread import inject_virtual_thread
from vtasim.compiler.lowering.passes.lift_alloc import lift_alloc
from vtasim.compiler.lowering.passes.lift_attr_scope import lift_attr_scope
from vtasim.compiler.lowering.passes.lower_storage_access import lower_storage_access
from vtasim.compiler.lowering.passes.simplify import simplify
from vtasim.compiler.lowering.passes.storage_rewrite import storage_rewrite

__all__ = ["PIPELINE", "run_passes", "Func"]


class Func(NamedTuple):
    """A minimal function (name, args, body) for callers without ``vtasim.compiler.lowering.lower``."""

    name: str
    args: tuple
    body: ir.Stmt


PIPELINE = (
    ("simplify", simplify),
    ("inject_dma", inject_dma),
    ("annotate_alu_scope", annotate_alu_scope),
    ("lift_attr_scope_uop", lambda b, cfg: lift_attr_scope(b, "coproc_uop_scope")),
    ("lift_alloc", lift_alloc),
    ("lift_attr_scope_coproc", lambda b, cfg: lift_attr_scope(b, "coproc_scope")),
    ("coproc_sync", coproc_sync),
    ("storage_rewrite", storage_rewrite),
    ("inject_virtual_thread", inject_virtual_thread),
    ("inject_alu", inject_alu),
    ("lower_storage_access", lower_storage_access),
    ("fold_uop_loop", fold_uop_loop),
)


def _with_body(func, body):
    if dataclasses.is_dataclass(func) and not isinstance(func, type):
        return dataclasses.replace(func, body=body)
    if hasattr(func, "_replace"):
        return func._replace(body=body)
    return type(func)(func.name, func.args, body)


def run_passes(func, cfg, dump_dir=None, upto: str | None = None):
    """Run the pipeline on ``func.body``; stop after pass ``upto`` when given (for tests/dumps)."""
    body = func.body
    out = out_dir(dump_dir, "--dump-ir directory") if dump_dir is not None else None
    if out is not None:
        write_text(out / "00_input.txt", ir.to_text(body) + "\n", "IR dump")
    for k, (name, fn) in enumerate(PIPELINE, 1):
        body = fn(body, cfg)
        if out is not None:
            write_text(out / f"{k:02d}_{name}.txt", ir.to_text(body) + "\n", "IR dump")
        if name == upto:
            break
    return _with_body(func, body)
