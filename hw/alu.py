"""The ALU operations of VTA: one table that every executor, generator and the compiler read.

Each :class:`AluOp` row holds everything about one operation (hardware spec 2.2 and 3.5):

* ``name`` (``"MIN"``) and ``opcode`` (the ``alu_opcode`` field value);
* ``hw_versions``: the ISA versions (config key ``HW_VER``) that have it;
* ``imm_range``: the immediates it accepts (inclusive; within the 16-bit signed ``imm`` field);
* ``rule``: the numpy rule ``rule(x, y)`` on int64 copies of the int32 accumulator lanes ``x`` and
  the operand ``y`` (an accumulator row, or the sign-extended immediate broadcast), giving the exact
  result before the 32-bit wrap; :meth:`AluOp.apply` / :meth:`AluOp.apply_imm` wrap it to int32;
* ``repeat``: the closed form of ``k`` applications of the immediate form, as the one immediate that
  does the same in a single step (``None``: no closed form, :meth:`AluOp.apply_imm_repeated` iterates
  until the value stops changing);
* ``symbol``: the operator of the compiler's IR/DSL that lowers to it (``vtasim.compiler.lowering.ir.BinOp.op``);
* ``commutes``: whether ``c op x == x op c`` (the compiler then moves an immediate on the left to the right);
* ``draw_imm``: how program generators draw an immediate so results neither saturate nor collapse.

Nothing else in the project spells an opcode, a rule or a name: the functional engine and the numpy
references call the rules, the cycle engine's kernels and the RTL header take their opcodes from
here, and an opcode outside the table is a decode error with :func:`unknown_opcode_message` on every
engine.  ``docs/extending.md`` is the recipe for adding a row::

    >>> import numpy as np
    >>> by_name("SHR").apply_imm(np.array([-64, 64], np.int32), 3).tolist()
    [-8, 8]
    >>> by_name("ADD").repeat(-3, 4)
    -12
    >>> [op.name for op in ops_for("0.0.1")]
    ['MIN', 'MAX', 'ADD', 'SHR']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from vtasim.hw.config import KNOWN_HW_VERS
from vtasim.hw.fields import ALU_IMM_WIDTH, id_bits

__all__ = ["AluOp", "ALU_OPS", "ALU_MIN", "ALU_MAX", "ALU_ADD", "ALU_SHR", "ALU_MUL", "ALU_NAMES",
           "ALU_CODES", "IMM_MIN", "IMM_MAX", "by_opcode", "by_name", "ops_for", "unknown_opcode_message",
           "check_table"]

IMM_MIN, IMM_MAX = -(1 << (ALU_IMM_WIDTH - 1)), (1 << (ALU_IMM_WIDTH - 1)) - 1
_M32 = 0xFFFFFFFF


def _wrap32(r: np.ndarray) -> np.ndarray:
    return (np.asarray(r, np.int64) & _M32).astype(np.uint32).view(np.int32)


@dataclass(frozen=True)
class AluOp:
    """One ALU operation (see the module docstring for the fields)."""

    name: str
    opcode: int
    hw_versions: tuple
    imm_range: tuple
    rule: Callable
    repeat: Optional[Callable]
    symbol: str
    commutes: bool
    draw_imm: Callable

    @property
    def mnemonic(self) -> str:
        """The lower-case name of disassembly (``ALU - min imm``) and of the coverage bins."""
        return self.name.lower()

    def apply(self, x, y) -> np.ndarray:
        """Vector form: int32 lanes ``x`` op int32 lanes ``y`` (broadcasting), wrapped to int32."""
        return _wrap32(self.rule(np.asarray(x).astype(np.int64), np.asarray(y).astype(np.int64)))

    def apply_imm(self, x, imm: int) -> np.ndarray:
        """Immediate form: int32 lanes ``x`` op the (already sign-extended) immediate ``imm``."""
        return self.apply(x, np.int64(imm))

    def apply_imm_repeated(self, x, imm: int, k: int) -> np.ndarray:
        """The immediate form applied ``k >= 1`` times (in one step where the row has a closed form)."""
        if k == 1:
            return self.apply_imm(x, imm)
        if self.repeat is not None:
            return self.apply(x, np.int64(self.repeat(int(imm), int(k))))
        x = np.asarray(x, np.int32)
        for _ in range(k):
            y = self.apply_imm(x, imm)
            if np.array_equal(y, x):          # a fixed point: further applications change nothing
                break
            x = y
        return x


# ---- the rules (int64 in, exact int64 out; the caller wraps) ------------------------------------
def _shr(x, y):
    # y >= 32: x >> 31; -32 < y < 0: left shift by -y (low 32 bits kept by the wrap); y <= -32: 0
    right = x >> np.clip(y, 0, 31)
    left = x << np.clip(-y, 0, 31)
    return np.where(y >= 0, right, np.where(y > -32, left, 0))


def _shr_repeat(imm, k):
    if imm >= 32 or imm == 0:                 # x >> 31 and x >> 0 are fixed points
        return imm
    if imm > 0:
        return min(k * imm, 31)               # arithmetic right shifts add up, saturating at 31
    return -min(-k * imm, 32)                 # left shifts add up; 32 or more leaves 0


def _idempotent(imm, k):
    return imm


def _full_range(rng):
    return int(rng.integers(IMM_MIN, IMM_MAX + 1))


def _draw_shift(rng):
    # 30 % beyond +/-31 (the saturating cases), the rest small shifts that keep the data alive
    return int(rng.integers(-40, 41)) if rng.random() < 0.3 else int(rng.integers(-8, 12))


def _draw_factor(rng):
    return int(rng.integers(-300, 300))


_BOTH = ("0.0.1", "0.0.2")
_IMM = (IMM_MIN, IMM_MAX)

ALU_OPS = (
    AluOp("MIN", 0, _BOTH, _IMM, np.minimum, _idempotent, "min", True, _full_range),
    AluOp("MAX", 1, _BOTH, _IMM, np.maximum, _idempotent, "max", True, _full_range),
    AluOp("ADD", 2, _BOTH, _IMM, np.add, lambda imm, k: k * imm, "+", True, _full_range),
    AluOp("SHR", 3, _BOTH, _IMM, _shr, _shr_repeat, ">>", False, _draw_shift),
    # fsim and the OpenCL design only (hardware spec 3.7); its code does not fit the 2-bit field of 0.0.1
    AluOp("MUL", 4, ("0.0.2",), _IMM, np.multiply, lambda imm, k: pow(imm, k, 1 << 32), "*", True, _draw_factor),
)

ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL = (op.opcode for op in ALU_OPS)
ALU_NAMES = {op.opcode: op.mnemonic for op in ALU_OPS}
ALU_CODES = tuple(op.opcode for op in ALU_OPS)
_BY_OPCODE = {op.opcode: op for op in ALU_OPS}
_BY_NAME = {op.name: op for op in ALU_OPS}


def by_opcode(opcode: int) -> AluOp:
    """The row of ``opcode``; KeyError naming the table for any other value."""
    try:
        return _BY_OPCODE[int(opcode)]
    except KeyError:
        raise KeyError(f"alu_opcode {opcode} is not in vtasim.hw.alu.ALU_OPS ({_listing(ALU_OPS)})") from None


def by_name(name: str) -> AluOp:
    return _BY_NAME[name.upper()]


def ops_for(hw_ver: str) -> tuple:
    """The rows an ISA version has, in opcode order."""
    return tuple(op for op in ALU_OPS if hw_ver in op.hw_versions)


def _listing(ops) -> str:
    return ", ".join(f"{op.opcode} {op.mnemonic}" for op in ops)


def unknown_opcode_message(opcode: int, hw_ver: str) -> str:
    """The one decode-error text of an ALU instruction whose opcode is not a row of ``hw_ver``."""
    return f"field alu_opcode = {opcode} is not an ALU opcode of HW_VER {hw_ver} ({_listing(ops_for(hw_ver))})"


def check_table(ops=ALU_OPS) -> list:
    """What is wrong with a table, one line per problem (the module asserts it is empty on import)."""
    problems = []
    for attr in ("name", "opcode", "symbol"):
        values = [getattr(op, attr) for op in ops]
        for v in sorted(set(values), key=str):
            if values.count(v) > 1:
                problems.append(f"ALU {attr} {v!r} appears in {values.count(v)} rows")
    for op in ops:
        lo, hi = op.imm_range
        if not IMM_MIN <= lo <= hi <= IMM_MAX:
            problems.append(f"ALU {op.name}: imm_range {op.imm_range} is not inside the {ALU_IMM_WIDTH}-bit "
                            f"field [{IMM_MIN}, {IMM_MAX}]")
        for ver in op.hw_versions:
            if ver not in KNOWN_HW_VERS:
                problems.append(f"ALU {op.name}: HW_VER {ver!r} is not one of {', '.join(KNOWN_HW_VERS)}")
                continue
            bits = id_bits(ver == "0.0.1")
            if not 0 <= op.opcode < 1 << bits:
                problems.append(f"ALU {op.name}: opcode {op.opcode} does not fit the {bits}-bit alu_opcode "
                                f"field of HW_VER {ver}")
    return problems


_PROBLEMS = check_table()
if _PROBLEMS:
    raise ValueError("hw/alu.py: " + "; ".join(_PROBLEMS))
