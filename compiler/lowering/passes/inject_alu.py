"""InjectALUIntrin (spec 4.3.7): ``pragma_alu`` loop nests -> one ALU uop with hardware loops.

The perfect nest under the pragma ends in one ``Store(D, idx, value)``:

* opcode from ``value``: the row of :mod:`vtasim.hw.alu` whose ``symbol`` is the operator (``+`` ADD, ``*``
  MUL, ``min`` MIN, ``max`` MAX, ``>>`` SHR), among the rows the config's HW_VER has; derived forms:
  ``<< c`` SHR by ``-c``, ``x - c`` ADD of ``-c`` (there is no SUB), a bare load or cast SHR by 0
  (a copy);
* immediate mode when one operand is an integer (inside the row's ``imm_range``): the other operand
  must be ``D`` itself at the same position (in place, storage_rewrite arranged it);
* vector mode when both are loads from the accumulator: one of them must be in place, the other
  is the source (a broadcast source simply has coefficient 0 on the loops it ignores);
* coefficients by ``linear``: the innermost loop is the BLOCK_OUT lanes (coefficient 1), with
  BATCH > 1 the next one the batch rows (coefficient BLOCK_OUT); they are dropped and everything is
  divided into accumulator elements; adjacent loops whose dst and src strides chain are merged;
* output: ``VTAUopLoopBegin(extent, dst_f, src_f, 0)`` per remaining loop, one
  ``vta.uop_push(1, 0, dst, src, 0, opcode, use_imm, imm)`` with ``tvm_access_ptr`` operands, and
  the matching ``VTAUopLoopEnd``.  More than two loops is refused later (fold_uop_loop).
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.lowering.passes._util import access_ptr, loop_nest, rewrite_attrs, storage_of
from vtasim.hw.alu import ALU_ADD, ALU_OPS, ALU_SHR, IMM_MAX, IMM_MIN, by_opcode, ops_for
from vtasim.hw.fields import ALU_IMM_WIDTH

__all__ = ["inject_alu"]

PASS = "inject_alu"
_OPS = {op.symbol: op.opcode for op in ALU_OPS}        # IR operator -> ALU opcode (vtasim.hw.alu)


def inject_alu(body, cfg):
    return rewrite_attrs(body, "pragma_alu", lambda a: _lower_alu(a.body, cfg))


def _fail(name, msg):
    raise CompileError(PASS, f"`{name}`: {msg}")


def _imm(value, opcode, name):
    row = by_opcode(opcode)
    lo, hi = row.imm_range
    if not lo <= value <= hi:
        what = (f"{ALU_IMM_WIDTH}-bit range" if (lo, hi) == (IMM_MIN, IMM_MAX) else f"{row.name} range [{lo}, {hi}]")
        raise CompileError(PASS, f"immediate {value} out of the {what} (`{name}`)")
    return value


def _strip_cast(e):
    while isinstance(e, ir.Cast):
        e = e.value
    return e


def _decode(value, name):
    """``(opcode, lhs Load, rhs Load | int)``."""
    v = _strip_cast(value)
    if isinstance(v, ir.Load):
        return ALU_SHR, v, 0
    if not isinstance(v, ir.BinOp):
        _fail(name, f"expression {ir.to_text(value)} not recognized (one binary op, a cast or a copy)")
    a, b = _strip_cast(v.a), _strip_cast(v.b)
    if v.op == "-":
        if isinstance(b, ir.IntImm):
            return ALU_ADD, a, -b.value
        _fail(name, "subtraction of two tensors has no ALU opcode (add a negated tensor)")
    if v.op == "<<":
        if isinstance(b, ir.IntImm):
            return ALU_SHR, a, -b.value
        _fail(name, "a left shift by a tensor has no ALU opcode")
    if v.op not in _OPS:
        _fail(name, f"operator {v.op!r} has no ALU opcode")
    if isinstance(a, ir.IntImm) and by_opcode(_OPS[v.op]).commutes:
        a, b = b, a                         # the immediate goes right
    return _OPS[v.op], a, (b.value if isinstance(b, ir.IntImm) else b)


def _affine(buf, idx, vars_, name):
    lin = ir.linear(idx, vars_)
    if lin is None:
        _fail(name, f"the index into `{buf.name}` is not linear in the ALU loops")
    coeffs, base = lin
    return list(coeffs), ir.simplify(base)


def _lower_alu(stmt, cfg):
    loops, store = loop_nest(stmt, PASS, "alu")
    dst = store.buffer
    name = dst.name
    vars_ = [v for v, _ in loops]
    extents = [e for _, e in loops]
    opcode, lhs, rhs = _decode(store.value, name)
    if opcode not in [op.opcode for op in ops_for(cfg.HW_VER)]:
        _fail(name, f"ALU {by_opcode(opcode).name} does not exist in HW_VER {cfg.HW_VER}")
    operands = [lhs] + ([rhs] if isinstance(rhs, ir.Expr) else [])
    for op in operands:
        if not isinstance(op, ir.Load):
            _fail(name, f"operand {ir.to_text(op)} is neither a load nor an integer")
        if op.buffer.scope != ir.SCOPE_ACC:
            _fail(name, f"operand `{op.buffer.name}` is in {op.buffer.scope}, the ALU reads {ir.SCOPE_ACC}")
    if dst.scope != ir.SCOPE_ACC:
        _fail(name, f"the ALU writes {ir.SCOPE_ACC}, `{name}` is {dst.scope}")

    d_co, d_base = _affine(dst, store.index, vars_, name)

    def in_place(ld):
        if storage_of(ld.buffer) is not storage_of(dst):
            return False
        co, base = _affine(ld.buffer, ld.index, vars_, name)
        diff = ir.simplify(base + ld.buffer.elem_offset - d_base - dst.elem_offset)
        return co == d_co and isinstance(diff, ir.IntImm) and diff.value == 0

    if isinstance(rhs, int):
        use_imm, imm = 1, _imm(rhs, opcode, name)
        if not in_place(lhs):
            _fail(name, f"immediate op on `{lhs.buffer.name}` is not in place (the ALU writes its "
                        f"operand: storage_rewrite could not put `{name}` over it)")
        src = lhs
    else:
        use_imm, imm = 0, 0
        if in_place(lhs):
            src = rhs
        elif opcode != ALU_SHR and in_place(rhs):
            src = lhs
        else:
            _fail(name, f"neither `{lhs.buffer.name}` nor `{rhs.buffer.name}` is updated in place")
    s_co, s_base = _affine(src.buffer, src.index, vars_, name)

    # the lane loops: BLOCK_OUT (stride 1) innermost, then BATCH (stride BLOCK_OUT)
    lane_loops = [(cfg.block_out, 1)] + ([(cfg.batch, cfg.block_out)] if cfg.batch > 1 else [])
    for k, (ext, stride) in enumerate(lane_loops):
        i = len(loops) - 1 - k
        if i < 0 or extents[i] != ext or d_co[i] != stride or s_co[i] != stride:
            found = (f"extent {extents[i]}, strides dst {d_co[i]} src {s_co[i]}" if i >= 0 else "no loop")
            _fail(name, f"loop {k + 1} from the inside must run over {ext} lanes with stride {stride} "
                        f"({found})")
    n_outer = len(loops) - len(lane_loops)
    lanes = cfg.batch * cfg.block_out
    ext, dc, sc = extents[:n_outer], d_co[:n_outer], s_co[:n_outer]
    for i in range(n_outer):
        if dc[i] % lanes or sc[i] % lanes:
            _fail(name, f"loop `{vars_[i].name}` strides (dst {dc[i]}, src {sc[i]}) are not whole "
                        f"accumulator elements ({lanes} scalars)")
    dc = [c // lanes for c in dc]
    sc = [c // lanes for c in sc]

    # merge adjacent loops whose strides chain (inner extent x inner stride == outer stride)
    merged = []
    for i in reversed(range(n_outer)):
        if merged:
            e, d, s = merged[-1]
            if dc[i] == d * e and sc[i] == s * e:
                merged[-1] = (e * ext[i], d, s)
                continue
        merged.append((ext[i], dc[i], sc[i]))
    merged.reverse()

    out = [ir.Evaluate(ir.Call("VTAUopLoopBegin", (ir.const(e), ir.const(d), ir.const(s), ir.IntImm(0))))
           for e, d, s in merged]
    out.append(ir.Evaluate(ir.Call("vta.uop_push", (
        ir.IntImm(1), ir.IntImm(0), access_ptr(dst, d_base), access_ptr(src.buffer, s_base), ir.IntImm(0),
        ir.IntImm(opcode), ir.IntImm(use_imm), ir.IntImm(imm)))))
    out.extend(ir.Evaluate(ir.Call("VTAUopLoopEnd", ())) for _ in merged)
    return ir.seq(*out)
