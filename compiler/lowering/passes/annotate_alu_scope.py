"""AnnotateALUCoProcScope (spec 4.3.2): put every ``pragma_alu`` region on the compute stage.

``Attr("pragma_alu", ...)`` becomes
``Attr("coproc_scope", 2, Attr("coproc_uop_scope", "VTAPushALUOp", Attr("pragma_alu", ...)))``;
the pragma stays inside so inject_alu (after virtual threads) finds the loop nest to lower.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.lowering.passes._util import rewrite_attrs

__all__ = ["annotate_alu_scope"]


def annotate_alu_scope(body, cfg=None):
    return rewrite_attrs(body, "pragma_alu",
                         lambda a: ir.Attr("coproc_scope", 2, ir.Attr("coproc_uop_scope", "VTAPushALUOp", a)))
