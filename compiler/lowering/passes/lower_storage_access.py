"""LowerDeviceStorageAccessInfo (TVM, spec 4.3.8): SRAM pointers become element indices.

SRAM allocations are dropped (the SRAMs are not host memory); the merged allocations of one scope
are placed one after the other from index 0, in program order.  Each
``tvm_access_ptr(buffer, offset)`` becomes
``(allocation base + buffer.elem_offset + offset) / lanes`` -- the element index the runtime calls
take -- and must divide exactly.  ``vta.uop_push`` becomes the runtime's ``VTAUopPush``.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.passes._util import SRAM_SCOPES, is_access_ptr, scope_lanes, storage_of

__all__ = ["lower_storage_access"]

PASS = "lower_storage_access"


def lower_storage_access(body, cfg):
    bases, used = {}, {}

    def see(n):
        if isinstance(n, ir.Allocate) and n.buffer.scope in SRAM_SCOPES and n.buffer not in bases:
            bases[n.buffer] = used.get(n.buffer.scope, 0)
            used[n.buffer.scope] = bases[n.buffer] + n.buffer.size
    ir.walk(body, see)

    def pre(n):
        if isinstance(n, ir.Allocate) and n.buffer.scope in SRAM_SCOPES:
            return ir.transform(n.body, post, pre)
        return None

    def post(n):
        if is_access_ptr(n):
            buf, off = n.args
            if buf.scope not in SRAM_SCOPES:
                raise CompileError(PASS, f"access pointer into `{buf.name}` of scope {buf.scope}")
            lanes = scope_lanes(cfg, buf.scope)
            start = bases.get(storage_of(buf), 0) + buf.elem_offset
            idx = ir.simplify((off + start) // lanes)
            if isinstance(idx, ir.BinOp) and idx.op == "//":
                raise CompileError(PASS, f"`{buf.name}` offset {ir.to_text(ir.simplify(off + start))} "
                                         f"is not a whole number of {lanes}-scalar elements")
            return idx
        if isinstance(n, (ir.Load, ir.Store)) and n.buffer.scope in SRAM_SCOPES:
            raise CompileError(PASS, f"host code reads or writes SRAM buffer `{n.buffer.name}` "
                                     f"(only DMA, GEMM and ALU reach {n.buffer.scope})")
        if isinstance(n, ir.Call) and n.name == "vta.uop_push":
            return ir.Call("VTAUopPush", n.args, n.dtype)
        return None
    return ir.transform(body, post, pre)
