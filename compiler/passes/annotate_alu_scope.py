"""AnnotateALUCoProcScope (spec 4.3.2): put every ``pragma_alu`` region on the compute stage.

``Attr("pragma_alu", ...)`` becomes
``Attr("coproc_scope", 2, Attr("coproc_uop_scope", "VTAPushALUOp", Attr("pragma_alu", ...)))``;
the pragma stays inside so inject_alu (after virtual threads) finds the loop nest to lower.
"""

from __future__ import annotations

from compiler import ir

__all__ = ["annotate_alu_scope"]


def annotate_alu_scope(body, cfg=None):
    def pre(n):
        if isinstance(n, ir.Attr) and n.key == "pragma_alu":
            return ir.Attr("coproc_scope", 2, ir.Attr("coproc_uop_scope", "VTAPushALUOp", n))
        return None
    return ir.transform(body, lambda n: None, pre)
