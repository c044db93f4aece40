"""Elementwise operators on the tensor ALU, written as DSL schedules (compiler spec 3.2, 3.8).

``alu_chain(env, m, steps)`` builds ``out = int8(step_n(...step_1(A)))`` over an int32 vector of
``m`` accumulator elements (shape ``(1, m, BATCH, BLOCK_OUT)``), each step one ALU stage:

=================  ===========================================  ======================
step               meaning                                      ALU
=================  ===========================================  ======================
``("add", c)``     ``x + c`` (immediate) / ``x + B`` (``"B"``)   ADD
``("sub", c)``     ``x - c``: add of ``-c``; ``x - B``: -(-x+B)  ADD (MUL, ADD, MUL for B)
``("mul", c)``     ``x * c`` / ``x * B``                        MUL
``("min", c)``     ``min(x, c)`` / ``min(x, B)``                MIN
``("max", c)``     ``max(x, c)`` / ``max(x, B)``                MAX
``("shr", c)``     ``x >> c`` / ``x >> B``                      SHR
``("shl", c)``     ``x << c``: SHR by ``-c``                    SHR
``("relu",)``      ``max(x, 0)``                                MAX
``("clip", lo, hi)`` ``max(min(x, hi), lo)``: two stages          MIN, MAX
=================  ===========================================  ======================

The steps that name an ALU operation are the rows of :mod:`vtasim.hw.alu` (its mnemonic; the stage is the
row's IR operator, which ``inject_alu`` maps back to the row's opcode); ``sub``, ``shl``, ``relu`` and
``clip`` are derived.  The vector operand ``B`` is a second int32 input of the same shape.  ``vector_add`` is the
tutorial of spec 3.2 (``C = int8(A + B)``).  The schedule tiles the vector by ``tile`` elements
(default: the largest divisor of ``m`` whose buffers fit the accumulator).
"""

from __future__ import annotations

from vtasim.compiler.lowering import ir
from vtasim.compiler.dsl import te
from vtasim.compiler.errors import CompileError
from vtasim.compiler.dsl.schedule import create_schedule
from vtasim.hw.alu import ALU_OPS

__all__ = ["alu_chain", "vector_add", "alu_expr", "ALU_STEPS"]

# one step per row of vtasim.hw.alu (its mnemonic; the stage is the row's IR operator), then the derived ones
_TABLE_STEPS = {op.mnemonic: op for op in ALU_OPS}
ALU_STEPS = tuple(_TABLE_STEPS) + ("sub", "shl", "relu", "clip")


def alu_expr(kind: str, a, b):
    """The DSL expression of one ALU step on two operands: ``kind`` a row's mnemonic (its IR operator)
    or ``"shl"`` (``a << b``, which inject_alu lowers to SHR by ``-b``)."""
    if kind in _TABLE_STEPS:
        return ir.BinOp(_TABLE_STEPS[kind].symbol, te.const(a), te.const(b))
    if kind == "shl":
        return te.const(a) << b
    raise CompileError(f"alu step {kind!r} is not one of {', '.join(ALU_STEPS)}")


def _apply(env, kind, x, operand, shape, name):
    imm = not isinstance(operand, te.Tensor)
    rhs = (lambda *i: operand) if imm else (lambda *i: operand(*i))
    alu_expr(kind, 0, 0)                    # an unknown kind fails here, before any stage is made
    return te.compute(shape, lambda *i: alu_expr(kind, x(*i), rhs(*i)), name=name)


def alu_chain(env, m: int, steps):
    """``(placeholders, output, stages)``: the chain's tensors and its ALU stages in order."""
    shape = (1, m, env.BATCH, env.BLOCK_OUT)
    a = te.placeholder(shape, env.acc_dtype, "A")
    placeholders = [a]
    b = None
    x = te.compute(shape, lambda *i: a(*i), name="A_buf")
    copies, stages = [x], []
    for n, step in enumerate(steps):
        kind, *vals = step
        if kind not in ALU_STEPS:
            raise CompileError(f"alu step {kind!r} is not one of {', '.join(ALU_STEPS)}")
        uses_b = vals == ["B"]
        if uses_b and b is None:
            b = te.placeholder(shape, env.acc_dtype, "B")
            placeholders.append(b)
            copies.append(te.compute(shape, lambda *i, b=b: b(*i), name="B_buf"))
        operand = copies[1] if uses_b else None
        if kind == "relu":
            kind, vals = "max", [0]
        if kind == "clip":
            lo, hi = vals
            x = _apply(env, "min", x, hi, shape, f"s{n}_min")
            stages.append(x)
            x = _apply(env, "max", x, lo, shape, f"s{n}_max")
            stages.append(x)
            continue
        if kind == "sub" and uses_b:
            # x - B = -((-x) + B): three in-place stages on x, so B stays intact for later steps
            x = _apply(env, "mul", x, -1, shape, f"s{n}_neg")
            stages.append(x)
            x = _apply(env, "add", x, operand, shape, f"s{n}_addb")
            stages.append(x)
            x = _apply(env, "mul", x, -1, shape, f"s{n}_sub")
        elif kind == "sub":
            x = _apply(env, "add", x, -int(vals[0]), shape, f"s{n}_sub")
        else:
            x = _apply(env, kind, x, operand if uses_b else int(vals[0]), shape, f"s{n}_{kind}")
        stages.append(x)
    out = te.compute(shape, lambda *i: x(*i).astype(env.out_dtype), name="C")
    return placeholders, out, copies, stages


def vector_add(env, m: int):
    """The tutorial of spec 3.2: ``C = int8(A + B)``."""
    return alu_chain(env, m, [("add", "B")])


def schedule_alu(env, m, out, copies, stages, tile: int | None = None):
    """Everything in the accumulator, tiled along the vector by ``tile`` elements."""
    live = len(copies) + len(stages)
    if tile is None:
        cap = env.cfg.acc_depth // max(live, 1)
        tile = max((d for d in range(1, m + 1) if m % d == 0 and d <= cap), default=1)
    if m % tile:
        raise CompileError(f"alu schedule: tile {tile} does not divide the vector length {m} elements")
    s = create_schedule(out.op)
    x_b, x_m, x_bt, x_ct = s[out].op.axis
    x_mo, x_mi = s[out].split(x_m, factor=tile)
    for t in copies + stages:
        s[t].set_scope(env.acc_scope)
        s[t].compute_at(s[out], x_mo)
    for t in copies:
        s[t].pragma(s[t].op.axis[0], env.dma_copy)
    for t in stages:
        s[t].pragma(s[t].op.axis[0], env.alu)
    s[out].pragma(x_mi, env.dma_copy)
    return s
