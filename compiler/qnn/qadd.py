"""The quantised residual add on the VTA ALU, bit-identical to the host's float rule (proved by exhaustion).

The host (and onnxruntime's QLinearAdd) computes, in float64::

    y = clip(rint((s_a (a - z_a) + s_b (b - z_b)) / s_y) + z_y, lo, hi)          qadd_float

VTA has an int32 ALU.  With ``m_a = s_a / s_y`` (and ``m_b``) the plan takes fixed-point multipliers
``M = round(m 2^S)``, ``S = s1 + k``, split as ``M = Mhi 2^k + Mlo`` (``0 <= Mlo < 2^k``), and computes
``floor((da M_a + db M_b) / 2^S + 1/2)`` without any int32 overflow by the nested-floor identity
(``H`` an integer, so ``floor((H 2^k + L) / 2^S) = floor((H + floor(L / 2^k)) / 2^s1)``)::

    da = a - z_a,  db = b - z_b                                  |da|, |db| <= 255
    L  = da Mlo_a + db Mlo_b                                     |L| < 2^(k+9)
    H  = da Mhi_a + db Mhi_b + (L >> k) + 2^(s1-1)
    y  = min(max((H >> s1) + z_y, lo), hi)

``S`` is about 40 bits, so the fixed-point value is within ``510 / 2^(S+1)`` of the rational one.  That
alone cannot prove equality with the float rule (a sum may lie that close to a rounding tie), so
:func:`plan_qadd` evaluates both rules on every one of the 2^16 input pairs and keeps a plan only when
they agree on all of them (``plan.verified_pairs``): the ALU add is then the host's add, bit for bit,
on every input it can ever see.  When no ``s1`` agrees everywhere it raises :class:`RequantError` (the
add stays on the host).

Most adds do not need the split: a single multiplier pair ``M ~= m 2^s`` (``s`` up to 24, each ``M``
tried within +-2 of ``round(m 2^s)``) with the zero points, the rounding and ``z_y`` folded into one
constant, ``y = (A M_a + B M_b + C) >> s``, often equals the float rule on every pair too; the plan
takes it where the same exhaustive check passes (five ALU stages and the clip sides some pair reaches,
against seventeen), else the split form.

The plan is a list of ALU stages (``plan.stages``, one SSA form) that :meth:`QAddPlan.apply` runs in
numpy with int32 wrapping and :mod:`vtasim.compiler.ops.residual` turns into tensor expressions, so the
lowered program and its reference read the same list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from vtasim.hw.alu import ALU_OPS
from vtasim.hw.fields import ALU_IMM_WIDTH
from vtasim.compiler.qnn.errors import RequantError

__all__ = ["plan_qadd", "QAddPlan", "qadd_float"]

_K = 20                                   # bits of the low multiplier halves
_IMM_MAX = (1 << (ALU_IMM_WIDTH - 1)) - 1
_INT32_MAX = (1 << 31) - 1
_ALU = {op.mnemonic: op for op in ALU_OPS}          # stage kind -> its row of vtasim.hw.alu (the one ALU rule)


def qadd_float(a, b, a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, lo, hi, dtype=np.int64) -> np.ndarray:
    """The host's quantised add: one float64 rounding (half to even), zero point, then [lo, hi]."""
    real = a_scale * (np.asarray(a).astype(np.float64) - a_zp) + b_scale * (np.asarray(b).astype(np.float64) - b_zp)
    return np.clip(np.rint(real / y_scale) + y_zp, lo, hi).astype(dtype)


@dataclass
class QAddPlan:
    """ALU stages ``(out, kind, lhs, rhs)``: ``lhs`` is ``"A"``, ``"B"`` or an earlier stage; ``rhs`` is
    ``("imm", v)``, ``("vec", name)`` (an int32 constant per channel, in ``vectors``) or ``("t", stage)``."""

    stages: list
    vectors: dict = field(default_factory=dict)        # name -> int (the same value in every channel)
    s1: int = 0
    verified_pairs: int = 0

    def apply(self, a, b) -> np.ndarray:
        """The stages on int8 ``a``, ``b`` (same shape) with the ALU's int32 wrapping; int64 result."""
        vals = {"A": np.asarray(a).astype(np.int64), "B": np.asarray(b).astype(np.int64)}
        for out, kind, lhs, (rk, rv) in self.stages:
            x = vals[lhs]
            y = np.int64(rv) if rk == "imm" else (np.int64(self.vectors[rv]) if rk == "vec" else vals[rv])
            r = _ALU[kind].rule(x, y)          # exact in int64: |x|, |y| < 2^31, shifts within [0, 31]
            vals[out] = ((r + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        return vals[self.stages[-1][0]]


def _operand(value: int, name: str, vectors: dict):
    if abs(value) <= _IMM_MAX:
        return ("imm", int(value))
    vectors[name] = int(value)
    return ("vec", name)


def _stages(za, zb, zy, lo, hi, ma: Fraction, mb: Fraction, s1: int):
    s = s1 + _K
    ma_i, mb_i = round(ma * (1 << s)), round(mb * (1 << s))
    vec: dict = {}
    hi_a, lo_a = divmod(ma_i, 1 << _K)
    hi_b, lo_b = divmod(mb_i, 1 << _K)
    # every stage reads its left operand for the last time (the ALU works in place); the inputs are read twice
    st = [("da", "add", "A", ("imm", -za)), ("db", "add", "B", ("imm", -zb)),
          ("la", "mul", "da", _operand(lo_a, "mlo_a", vec)), ("lb", "mul", "db", _operand(lo_b, "mlo_b", vec)),
          ("l", "add", "la", ("t", "lb")), ("lk", "shr", "l", ("imm", _K)),
          ("da2", "add", "A", ("imm", -za)), ("db2", "add", "B", ("imm", -zb)),
          ("ha", "mul", "da2", _operand(hi_a, "mhi_a", vec)), ("hb", "mul", "db2", _operand(hi_b, "mhi_b", vec)),
          ("h", "add", "ha", ("t", "hb")), ("hl", "add", "h", ("t", "lk"))]
    if s1 > 0:
        st += [("hr", "add", "hl", _operand(1 << (s1 - 1), "round", vec)), ("hs", "shr", "hr", ("imm", s1))]
    last = st[-1][0]
    st += [("y", "add", last, ("imm", zy)), ("ymin", "min", "y", ("imm", hi)), ("ymax", "max", "ymin", ("imm", lo))]
    bound = 255 * (hi_a + hi_b) + (1 << max(s1 - 1, 0)) + (1 << 9)
    return st, vec, bound


def _clip(st, last, lo, hi, pre):
    """The clip stages, each side only where some input pair reaches beyond it (``pre``: the values before)."""
    if pre.max() > hi:
        st.append(("ymin", "min", last, ("imm", hi)))
        last = "ymin"
    if pre.min() < lo:
        st.append(("ymax", "max", last, ("imm", lo)))
    return st


def _one_multiplier(za, zb, zy, ma_i, mb_i, s):
    """``y = (A M_a + B M_b + C) >> s`` with the zero points, the rounding and ``z_y`` folded into ``C``."""
    vec: dict = {}
    c = (1 << (s - 1)) - za * ma_i - zb * mb_i + (zy << s)
    st = [("la", "mul", "A", _operand(ma_i, "m_a", vec)), ("lb", "mul", "B", _operand(mb_i, "m_b", vec)),
          ("l", "add", "la", ("t", "lb")), ("lc", "add", "l", _operand(c, "c", vec)), ("y", "shr", "lc", ("imm", s))]
    bound = 128 * (abs(ma_i) + abs(mb_i)) + abs(c)
    return st, vec, bound


def _cheap(a, b, want, za, zb, zy, lo, hi, ma: Fraction, mb: Fraction):
    """The one-multiplier plan, where some multipliers near ``m 2^s`` equal the host on every pair."""
    for s in range(24, 8, -1):
        base_a, base_b = round(ma * (1 << s)), round(mb * (1 << s))
        for da in (0, -1, 1, -2, 2):
            for db in (0, -1, 1, -2, 2):
                st, vec, bound = _one_multiplier(za, zb, zy, base_a + da, base_b + db, s)
                if bound > _INT32_MAX:
                    continue
                pre = QAddPlan(st, vec).apply(a, b)
                if np.array_equal(np.clip(pre, lo, hi), want):
                    return QAddPlan(_clip(st, "y", lo, hi, pre), vec, s, a.size)
    return None


def plan_qadd(a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, lo, hi, one_multiplier: bool = True) -> QAddPlan:
    """The ALU plan of the int8 add (zero points in int8, output range [lo, hi]), verified on all 2^16 pairs:
    the one-multiplier plan where one exists (``one_multiplier``), else the split plan."""
    for what, v in (("a_zp", a_zp), ("b_zp", b_zp), ("y_zp", y_zp), ("lo", lo), ("hi", hi)):
        if not -128 <= int(v) <= 127:
            raise RequantError(f"qadd: {what} = {v} is outside int8 (rule: the VTA add takes int8 operands)")
    ma, mb = Fraction(float(a_scale)) / Fraction(float(y_scale)), Fraction(float(b_scale)) / Fraction(float(y_scale))
    grid = np.arange(-128, 128, dtype=np.int64)
    a, b = np.meshgrid(grid, grid, indexing="ij")
    want = qadd_float(a, b, float(a_scale), int(a_zp), float(b_scale), int(b_zp), float(y_scale), int(y_zp), lo, hi)
    cheap = _cheap(a, b, want, int(a_zp), int(b_zp), int(y_zp), int(lo), int(hi), ma, mb) if one_multiplier else None
    if cheap is not None:
        return cheap
    tried = []
    for s1 in range(30, -1, -1):
        stages, vec, bound = _stages(int(a_zp), int(b_zp), int(y_zp), int(lo), int(hi), ma, mb, s1)
        if bound > _INT32_MAX:
            continue
        plan = QAddPlan(stages, vec, s1, a.size)
        bad = int(np.count_nonzero(plan.apply(a, b) != want))
        if bad == 0:
            return plan
        tried.append(f"s1={s1}: {bad} pair(s) differ")
        if len(tried) == 3:
            break
    raise RequantError(f"qadd: no ALU plan equals the host's rounding on all 65536 input pairs "
                       f"({'; '.join(tried) or 'every multiplier overflows int32'}) (rule: the VTA add must be "
                       f"bit-identical)")
