"""Helpers shared by the VTA passes: SRAM scope facts, buffer views, loop nests, buffer renaming.

Kept out of :mod:`vtasim.compiler.lowering.ir` on purpose: these are VTA facts (element lanes, SRAM depths) or
pass plumbing, not part of the IR contract.
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError

__all__ = [
    "BufferView", "storage_of", "scope_lanes", "scope_depth", "SRAM_SCOPES",
    "replace_buffers", "buffers_of", "rewrite_attrs", "loop_nest", "fresh", "access_ptr", "is_access_ptr",
    "short_scope",
]

SRAM_SCOPES = (ir.SCOPE_INP, ir.SCOPE_WGT, ir.SCOPE_ACC)


class BufferView(ir.Buffer):
    """A buffer living inside a merged allocation ``data`` at ``elem_offset`` scalars.

    TVM's Buffer carries its storage variable (``buffer->data``) next to its ``elem_offset``;
    storage_rewrite creates these views when it merges the allocations of one scope.
    """

    __slots__ = ("data",)

    def __init__(self, name, shape, dtype, scope, elem_offset, data: ir.Buffer):
        super().__init__(name, shape, dtype, scope, elem_offset)
        self.data = data

    def __repr__(self):
        return f"BufferView({self.name} in {self.data.name} @{self.elem_offset})"


def storage_of(buf: ir.Buffer) -> ir.Buffer:
    """The allocation ``buf`` lives in (itself unless it is a :class:`BufferView`)."""
    return buf.data if isinstance(buf, BufferView) else buf


def scope_lanes(cfg, scope: str) -> int:
    """Scalars per SRAM element of ``scope`` (the unit of every SRAM index, spec 1.2)."""
    if scope == ir.SCOPE_INP:
        return cfg.batch * cfg.block_in
    if scope == ir.SCOPE_WGT:
        return cfg.block_out * cfg.block_in
    if scope == ir.SCOPE_ACC:
        return cfg.batch * cfg.block_out
    raise ValueError(f"{scope!r} is not an SRAM scope")


def scope_depth(cfg, scope: str) -> int:
    """Elements the SRAM of ``scope`` holds."""
    return {ir.SCOPE_INP: cfg.inp_depth, ir.SCOPE_WGT: cfg.wgt_depth, ir.SCOPE_ACC: cfg.acc_depth}[scope]


def short_scope(scope: str) -> str:
    """``local.acc_buffer`` -> ``acc_buffer`` (names of merged allocations)."""
    return scope.split(".")[-1]


def access_ptr(buf: ir.Buffer, offset) -> ir.Call:
    """``tvm_access_ptr(buf, offset)``: scalar ``offset`` into ``buf`` (lowered to an element index
    by lower_storage_access)."""
    return ir.Call("tvm_access_ptr", (buf, ir.const(offset)))


def is_access_ptr(e) -> bool:
    return isinstance(e, ir.Call) and e.name == "tvm_access_ptr"


def replace_buffers(node, mapping: dict):
    """Rebuild ``node`` with every Buffer reference (loads, stores, allocations, call arguments)
    replaced through ``mapping`` (old Buffer -> new Buffer)."""
    if not mapping:
        return node

    def post(n):
        if isinstance(n, ir.Load) and n.buffer in mapping:
            return ir.Load(mapping[n.buffer], n.index)
        if isinstance(n, ir.Store) and n.buffer in mapping:
            return ir.Store(mapping[n.buffer], n.index, n.value)
        if isinstance(n, ir.Allocate) and n.buffer in mapping:
            return ir.Allocate(mapping[n.buffer], n.body)
        if isinstance(n, ir.Call) and any(isinstance(a, ir.Buffer) and a in mapping for a in n.args):
            return ir.Call(n.name, tuple(mapping.get(a, a) if isinstance(a, ir.Buffer) else a
                                         for a in n.args), n.dtype)
        return None
    return ir.transform(node, post)


def buffers_of(n) -> list:
    """The buffers node ``n`` itself names: a load's or store's, a call's Buffer arguments."""
    if isinstance(n, (ir.Load, ir.Store)):
        return [n.buffer]
    if isinstance(n, ir.Call):
        return [a for a in n.args if isinstance(a, ir.Buffer)]
    return []


def rewrite_attrs(body, key: str, rewrite):
    """``body`` with every ``Attr(key)`` region (outermost first, not searched inside) replaced by
    ``rewrite(attr)``."""
    def pre(n):
        return rewrite(n) if isinstance(n, ir.Attr) and n.key == key else None
    return ir.transform(body, lambda n: None, pre)


def loop_nest(stmt, pass_name: str, what: str):
    """Strip a perfect nest of For loops: ``([(var, extent), ...] outer first, innermost body)``.

    A Seq, allocation or attribute between the loops is not a perfect nest and raises.
    """
    loops = []
    while isinstance(stmt, ir.For):
        loops.append((stmt.var, stmt.extent))
        stmt = stmt.body
    if not isinstance(stmt, ir.Store):
        raise CompileError(pass_name, f"{what}: the loop nest must end in one store, found "
                                      f"{type(stmt).__name__}")
    return loops, stmt


def fresh(node):
    """A copy in which every statement node is a distinct object (passes key nodes by ``id``)."""
    return ir.transform(node, lambda n: None)
