"""Requantisation on the VTA ALU: int32 accumulator -> int8, as a list of ALU steps.

``plan_requant(multiplier, acc_bound, out_zp, out_lo, out_hi, cfg)`` returns a :class:`RequantPlan`
whose ``steps`` use the vocabulary of :mod:`vtasim.compiler.ops.alu` (``("add", c)``, ``("mul", c)``,
``("shr", c)``, ``("shl", c)``, ``("min", c)``, ``("max", c)``; an operand that is a string names an
int32 per-output-channel vector in ``plan.vectors``, loaded into the accumulator like a bias)::

    >>> plan = plan_requant(2.0 ** -8, acc_bound=1 << 20, out_zp=0, out_lo=-128, out_hi=127, cfg=cfg)
    >>> plan.steps
    [('add', 128), ('shr', 8), ('min', 127), ('max', -128)]

The reference each plan is judged against, ``plan.exact(acc)``, is TVM's integer ``qnn.requantize``:
``clip(round_upward(acc * m) + out_zp, lo, hi)`` with ``m`` TVM's 31-bit fixed-point multiplier.

Two paths (docs/quantisation.md has the derivations):

* ``"shift"`` (TVM's VTA flow, compiler spec 8.3): ``m = 2^-n``; ``add 2^(n-1), shr n`` (a right shift
  needing a rounding constant beyond the 16-bit immediate shifts first by ``n - 15``, which is exact
  because ``floor((floor(x / 2^q) + k) / 2^(n-q)) = floor((x + k 2^q) / 2^n)``), or ``shl -n``
  (clamping the accumulator first where ``acc_bound * 2^-n`` would overflow: every clamped value
  saturates either way).  ``max_error_lsb = 0``: it is TVM's arithmetic.
* ``"fixed"``: ``a = round(acc / 2^p)``, ``y = round(a * M / 2^s)`` with ``M`` a 16-bit immediate or an
  int32 per-channel vector, ``M ~= m 2^(p+s)``.  ``p`` and ``s`` are chosen so that no int32
  intermediate overflows for ``|acc| <= acc_bound`` and the proved error ``E`` below is smallest.

Error bound of the fixed path (the proof; ``m_t`` is TVM's fixed-point value of ``m``, ``B`` the
accumulator bound, ``m' = M / 2^(p+s)``)::

    a = acc / 2^p + e1,  |e1| <= 1/2 (e1 = 0 when p = 0)             (round-half-up pre-shift)
    z = a M / 2^s = acc m' + e1 M / 2^s                              (the product is exact: no overflow)
    apply = floor(z + 1/2),  exact = floor(acc m_t + 1/2)            (both round half upward)
    |z - acc m_t| <= B |m' - m_t| + [p > 0] M / 2^(s+1) =: E
    two integers floor(u + 1/2), floor(v + 1/2) with |u - v| <= E differ by less than E + 1,
    so by at most ceil(E);  + out_zp and the clip to [lo, hi] are 1-Lipschitz: |apply - exact| <= ceil(E).

``max_error_lsb = ceil(E)`` (maximised over channels), ``error_bound = E``.  Where the accumulators
outside the clamp below number at most ``ENUMERATE_LIMIT`` (times channels), every one of them is
evaluated and ``max_error_lsb`` is their exact worst case (``enumerated``); ``ceil(E)`` overstates it
when no accumulator lies within ``E`` of a rounding tie.

Saturation clamp: a small multiplier on a large ``acc_bound`` would leave few mantissa bits, although
every accumulator beyond about ``(hi - out_zp) / m`` saturates anyway.  A plan may therefore clamp the
pre-shifted accumulator to ``[L, H]`` (16-bit immediates, ``plan.acc_clamp = (p, L, H)``) and size the
mantissa for ``max(|L|, |H|)``.  Unclamped accumulators satisfy ``|acc| <= max(|L|, |H|) 2^p + 2^(p-1)``,
which replaces ``B`` in ``E``; for clamped ones the plan checks, when it is made, that ``apply`` and
``exact`` both give the saturated output at the first clamped accumulator on each side (per channel),
and both are monotone in ``acc``, so every clamped accumulator saturates identically (difference 0).

No step overflows: every step is monotone non-decreasing (multipliers are positive), so the extreme
intermediates occur at ``acc = +-acc_bound``, which the plan evaluates exactly and checks against int32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from vtasim.hw.alu import ALU_OPS
from vtasim.hw.fields import ALU_IMM_WIDTH
from vtasim.compiler.qnn.errors import RequantError, check_zero_point, is_power_of_two
from vtasim.compiler.qnn.fixed_point import fixed_point_multiplier, multiply_shift

__all__ = ["plan_requant", "RequantPlan", "alu_steps_int32", "REQUANT_PATHS"]

REQUANT_PATHS = ("auto", "shift", "fixed")
MUL_VECTOR = "requant_mul"
_MAX_SHIFT = 31                     # one SHR immediate; longer shifts are chained
_ALU_STEPS = {op.mnemonic: op for op in ALU_OPS}     # step kind -> its row of vtasim.hw.alu
ENUMERATE_LIMIT = 1 << 21           # accumulators x channels evaluated to make max_error_lsb exact


@dataclass
class RequantPlan:
    """ALU steps that take an int32 accumulator to the output integers, and their proved error."""

    path: str                       # "shift" | "fixed"
    multiplier: object              # float, or float64 array (one per output channel)
    acc_bound: int
    out_zp: int
    out_lo: int                     # including the ReLU bound: max(out_lo, out_zp) with relu
    out_hi: int
    steps: list
    vectors: dict = field(default_factory=dict)    # name -> int32 array (channels,)
    max_error_lsb: int = 0
    error_bound: float = 0.0        # E of the module docstring (max_error_lsb = ceil(E))
    acc_clamp: tuple | None = None  # (p, L, H): round(acc / 2^p) is clamped to [L, H] (saturating)
    sig: object = None              # TVM's fixed-point multiplier (per channel: arrays)
    shift: object = None
    enumerated: bool = False        # max_error_lsb is the exhaustive worst case over every accumulator

    @property
    def channels(self) -> int | None:
        return None if np.ndim(self.multiplier) == 0 else int(np.size(self.multiplier))

    def apply(self, acc, axis: int = 1) -> np.ndarray:
        """The steps on ``acc`` with the VTA ALU's int32 semantics (wrapping), as int64 values."""
        return alu_steps_int32(self.steps, acc, self.vectors, axis)

    def exact(self, acc, axis: int = 1) -> np.ndarray:
        """TVM's ``qnn.requantize`` of ``acc`` (UPWARD rounding) + ``out_zp``, clipped (int64)."""
        acc = np.asarray(acc)
        ax = axis if self.channels is not None else None
        y = multiply_shift(acc.astype(np.int64), self.sig, self.shift, "UPWARD", axis=ax) + self.out_zp
        return np.clip(y, self.out_lo, self.out_hi).astype(np.int64)


def _vec(v, ndim, axis):
    v = np.asarray(v, dtype=np.int64)
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _wrap32(x):
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def alu_steps_int32(steps, acc, vectors=None, axis: int = 1, wrap: bool = True) -> np.ndarray:
    """``steps`` applied to int32 ``acc`` as the VTA ALU does (each result kept to 32 bits with
    ``wrap``; without it, exact int64 values for overflow checks).  Vector operands index ``vectors``
    and broadcast along ``axis``.  SHR by ``c`` in [0, 31] is arithmetic, SHL by ``c`` keeps the low bits."""
    x = np.asarray(acc).astype(np.int64)
    for kind, operand in steps:
        y = _vec(vectors[operand], x.ndim, axis) if isinstance(operand, str) else np.int64(operand)
        if kind == "shl":                     # the ALU's left shift is SHR by the negated amount
            kind, y = "shr", -y
        row = _ALU_STEPS.get(kind)
        if row is None:
            raise RequantError(f"requant step {kind!r} is not one of {', '.join([*_ALU_STEPS, 'shl'])}")
        x = row.rule(x, y)                    # exact in int64 (shifts here stay within +-31)
        if wrap:
            x = _wrap32(x)
    return x


# ---- building blocks ---------------------------------------------------------------------------
def _imm_max() -> int:
    return (1 << (ALU_IMM_WIDTH - 1)) - 1


def _shr(n: int) -> list:
    out = []
    while n > 0:
        out.append(("shr", min(n, _MAX_SHIFT)))
        n -= _MAX_SHIFT
    return out


def _round_shift(n: int, bound: int, acc_max: int):
    """Steps computing ``floor((x + 2^(n-1)) / 2^n)`` for ``|x| <= bound`` within int32, or None."""
    if n == 0:
        return []
    add_bits = _imm_max().bit_length() - 1          # the largest power of two an immediate holds: 2^14
    pre = max(0, n - 1 - add_bits)
    if pre == 0 and bound + (1 << (n - 1)) > acc_max:
        if n == 1:
            return None
        pre = 1
    return _shr(pre) + [("add", 1 << (n - 1 - pre))] + _shr(n - pre)


def _acc_limits(cfg) -> int:
    if cfg.acc_width != 32:
        raise RequantError(f"accumulator width {cfg.acc_width} bits: the requantisation paths assume 32")
    return (1 << 31) - 1


def _tvm_fraction(sig: int, shift: int) -> Fraction:
    return Fraction(sig, 1 << (31 - shift)) if shift <= 31 else Fraction(sig << (shift - 31))


def _mantissa(sig: int, shift: int, bits: int) -> int:
    """round_half_up(m_t * 2^bits) for m_t = sig * 2^(shift - 31)."""
    t = bits + shift - 31
    return sig << t if t >= 0 else (sig + (1 << (-t - 1))) >> -t


# ---- the two paths ----------------------------------------------------------------------------
def _epilogue(zp, lo, hi):
    return ([("add", zp)] if zp else []) + [("min", hi), ("max", lo)]


def _shift_plan(m, bound, zp, lo, hi, acc_max):
    n = 1 - math.frexp(m)[1]                        # m = 2^-n
    if n > 0:
        steps = _round_shift(n, bound, acc_max)
        if steps is None:
            raise RequantError(f"acc_bound = {bound} plus the rounding constant of shift 1 overflows int32")
        return steps + _epilogue(zp, lo, hi), None
    k = -n
    if k == 0:
        return _epilogue(zp, lo, hi), None
    if k > 30:
        raise RequantError(f"multiplier {m!r} = 2^{k} is beyond the left-shift range of int32 (rule: <= 2^30)")
    pre = []
    clamp = None
    if bound << k > acc_max:
        # acc >= H gives >= hi after the shift either way (and <= L gives <= lo): clamp first
        h, low = -((zp - hi) >> k), (lo - zp) >> k
        pre, clamp = [("min", h), ("max", low)], (0, low, h)
    return pre + [("shl", k)] + _epilogue(zp, lo, hi), clamp


def _error(b_eff, sigs, shifts, ms, p, s, exact=False):
    """E of the module docstring (max over channels): a Fraction with ``exact``, else a float."""
    worst = 0
    for sig, shift, mm in zip(sigs, shifts, ms):
        if exact:
            e = b_eff * abs(Fraction(mm, 1 << (p + s)) - _tvm_fraction(sig, shift))
            e += Fraction(mm, 1 << (s + 1)) if p else 0
        else:
            e = b_eff * abs(mm / 2.0 ** (p + s) - sig * 2.0 ** (shift - 31)) + (mm / 2.0 ** (s + 1) if p else 0.0)
        worst = max(worst, e)
    return worst


def _largest_post_shift(sigs, shifts, top, p, a, limit, acc_max):
    """The largest s with every mantissa in [1, limit] and a feasible rounding shift, or None."""
    s = min(62 - p, max(0, math.floor(math.log2(limit) - math.log2(top)) - p + 1))
    while s >= 0:
        ms = [_mantissa(g, h, p + s) for g, h in zip(sigs, shifts)]
        if max(ms) <= limit:
            ok = min(ms) >= 1 and _round_shift(s, a * max(ms), acc_max) is not None
            return (s, ms) if ok else None
        s -= 1
    return None


@dataclass
class _Candidate:
    p: int
    s: int
    ms: list
    clamp: tuple | None             # (Lp, Hp) on the pre-shifted accumulator
    steps: list
    err: float


def _clamp_after(p, m_min, zp, lo, hi):
    """(Lp, Hp) on ``a = round(acc / 2^p)`` beyond which the output saturates (a margin of one LSB and
    one step each side; checked on the finished plan), or None when they are not finite numbers."""
    top, bottom = (hi - zp + 1) / m_min, (lo - zp - 1) / m_min
    if not (math.isfinite(top) and math.isfinite(bottom)):
        return None
    h_acc, l_acc = math.ceil(top) + 1, math.floor(bottom) - 1
    return (l_acc >> p) - 1, -((-h_acc) >> p) + 1


def _fixed_candidates(sigs, shifts, m_min, bound, zp, lo, hi, m_max, acc_max, per_channel):
    top = max(float(_tvm_fraction(g, h)) for g, h in zip(sigs, shifts))
    imm = _imm_max()
    for p in range(0, 32):
        pre = _round_shift(p, bound, acc_max)
        if pre is None:
            continue
        a_full = bound if p == 0 else (bound + (1 << (p - 1))) >> p
        variants = [(None, a_full, bound)]
        lp, hp = _clamp_after(p, m_min, zp, lo, hi) or (-imm - 2, imm + 1)     # None: no clamp
        a_clamped = max(-lp, hp)
        if a_clamped < a_full and -imm - 1 <= lp and hp <= imm:
            reach = a_clamped << p if p == 0 else (a_clamped << p) + (1 << (p - 1))
            variants.append(((lp, hp), a_clamped, min(bound, reach)))
        for clamp, a, b_eff in variants:
            found = _largest_post_shift(sigs, shifts, top, p, a, min(m_max, acc_max // max(a, 1)), acc_max)
            if found is None:
                continue
            s, ms = found
            steps = pre + ([("min", clamp[1]), ("max", clamp[0])] if clamp else [])
            steps += [("mul", MUL_VECTOR if per_channel else ms[0])]
            steps += _round_shift(s, a * max(ms), acc_max) + _epilogue(zp, lo, hi)
            yield _Candidate(p, s, ms, clamp, steps, _error(b_eff, sigs, shifts, ms, p, s)), b_eff


def _saturates(plan, cand, acc_max) -> bool:
    """Every accumulator the clamp changes gives the saturated output in ``apply`` and ``exact``: both
    are monotone, so checking the first clamped accumulator on each side (per channel) suffices."""
    lp, hp = cand.clamp
    half = (1 << (cand.p - 1)) if cand.p else 0
    first_hi = (hp << cand.p) - half                 # smallest acc with round(acc / 2^p) >= Hp
    first_lo = (lp << cand.p) + half - (1 if cand.p else 0)   # largest acc with round(acc / 2^p) <= Lp
    if first_hi > acc_max or first_lo < -acc_max - 1:
        return False
    c = plan.channels or 1
    probe = np.array([[first_lo] * c, [first_hi] * c], dtype=np.int64)
    want = np.array([[plan.out_lo] * c, [plan.out_hi] * c])
    trial = RequantPlan(plan.path, plan.multiplier, plan.acc_bound, plan.out_zp, plan.out_lo, plan.out_hi,
                        cand.steps, _vectors(cand), sig=plan.sig, shift=plan.shift)
    return np.array_equal(trial.apply(probe), want) and np.array_equal(trial.exact(probe), want)


def _vectors(cand):
    return {MUL_VECTOR: np.array(cand.ms, dtype=np.int32)} if any(isinstance(v, str) for _, v in cand.steps) else {}


def _fixed_into(plan, m, uniform, bound, zp, lo, hi, acc_max, what):
    """Fill ``plan`` with the fixed-point candidate of smallest proved error (``ceil(E)``, then ``E`` to
    1/64 LSB, then the fewest ALU steps, then ``E``)."""
    per_channel = m.ndim == 1 and not uniform
    sigs = [int(v) for v in np.atleast_1d(plan.sig)]
    shifts = [int(v) for v in np.atleast_1d(plan.shift)]
    if not per_channel:
        sigs, shifts = sigs[:1], shifts[:1]
    m_max = acc_max if per_channel else _imm_max()
    best = None
    for cand, b_eff in _fixed_candidates(sigs, shifts, float(np.min(m)), bound, zp, lo, hi, m_max, acc_max,
                                         per_channel):
        # the worst case in LSB, then E to 1/64 LSB (ties with TVM flip less), then the fewest ALU steps
        key = (math.ceil(cand.err), math.ceil(cand.err * 64), len(cand.steps), cand.err)
        if best is not None and key >= best[0]:
            continue
        if cand.clamp is not None and not _saturates(plan, cand, acc_max):
            continue
        best = (key, cand, b_eff)
    if best is None:
        kind = "int32 vector" if per_channel else f"{ALU_IMM_WIDTH}-bit immediate"
        if float(np.max(m)) * 2.0 ** 93 < 0.5:
            raise RequantError(f"multiplier {what} is too small for the fixed path: its mantissa M = m 2^(p+s) "
                               f"rounds to 0 for every pre-shift p <= 31 and post-shift s <= 62")
        raise RequantError(f"multiplier {what} with acc_bound = {bound} is too large for a {kind} mantissa: "
                           f"no split (pre-shift, mantissa, post-shift) keeps the int32 product in range")
    _, cand, b_eff = best
    err = _error(b_eff, sigs, shifts, cand.ms, cand.p, cand.s, exact=True)
    plan.steps, plan.vectors = cand.steps, _vectors(cand)
    plan.acc_clamp = None if cand.clamp is None else (cand.p, cand.clamp[0], cand.clamp[1])
    plan.error_bound, plan.max_error_lsb = float(err), math.ceil(err)
    _tighten_by_enumeration(plan, b_eff)


def _tighten_by_enumeration(plan, b_eff):
    """Where the unclamped accumulators are few, ``max_error_lsb`` is their exact worst case (the clamped
    ones differ by 0, above); ``ceil(E)`` can overstate it when no accumulator lies within E of a tie."""
    c = plan.channels or 1
    if (2 * b_eff + 1) * c > ENUMERATE_LIMIT:
        return
    acc = np.arange(-b_eff, b_eff + 1, dtype=np.int64)[:, None]
    acc = np.broadcast_to(acc, (acc.shape[0], c))
    worst = int(np.abs(plan.apply(acc) - plan.exact(acc)).max())
    if worst > plan.max_error_lsb:                 # the proof above says this cannot happen
        raise RequantError(f"requant plan {plan.steps}: error {worst} LSB exceeds the proved bound "
                           f"{plan.max_error_lsb} (internal error)")
    plan.max_error_lsb = worst
    plan.enumerated = True




def _check_int(v, what, lo, hi):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise RequantError(f"{what} = {v!r} must be an integer in [{lo}, {hi}]")
    return int(v)


def plan_requant(multiplier, acc_bound: int, out_zp: int, out_lo: int, out_hi: int, cfg, path: str = "auto",
                 relu: bool = False) -> RequantPlan:
    """The ALU steps requantising an int32 accumulator with ``|acc| <= acc_bound`` by ``multiplier``
    (``in_scale * w_scale / out_scale``; per output channel as a 1-d array) to ``[out_lo, out_hi]`` with
    zero point ``out_zp`` (``relu``: the lower bound becomes ``max(out_lo, out_zp)``)."""
    if path not in REQUANT_PATHS:
        raise RequantError(f"path = {path!r} must be one of {', '.join(REQUANT_PATHS)}")
    acc_max = _acc_limits(cfg)
    bound = _check_int(acc_bound, "acc_bound", 0, acc_max)
    o_lo, o_hi = -(1 << (cfg.out_width - 1)), (1 << (cfg.out_width - 1)) - 1
    lo = _check_int(out_lo, "out_lo", o_lo, o_hi)
    hi = _check_int(out_hi, "out_hi", lo, o_hi)
    zp = int(check_zero_point(out_zp, f"int{cfg.out_width}", "out_zp"))
    if relu:
        lo = max(lo, zp)
        hi = max(hi, lo)
    m = np.asarray(multiplier, dtype=np.float64)
    if m.ndim > 1 or m.size == 0:
        raise RequantError(f"multiplier has shape {m.shape}; it must be a number or a 1-d per-channel array")
    bad = ~np.isfinite(m) | (m <= 0)
    if bad.any():
        raise RequantError(f"multiplier {float(m.reshape(-1)[int(np.argmax(bad))])!r} must be a finite number > 0 "
                           f"(a zero scale has no requantisation)")
    uniform = bool(np.all(m == m.reshape(-1)[0]))
    what = f"{float(m):g}" if m.ndim == 0 else f"[{m.min():g} .. {m.max():g}] ({m.size} channels)"
    if path == "auto":
        path = "shift" if uniform and is_power_of_two(float(m.reshape(-1)[0])) else "fixed"
    sig, shift = fixed_point_multiplier(m)
    kept = float(m) if m.ndim == 0 else m.copy()
    plan = RequantPlan(path, kept, bound, zp, lo, hi, [], sig=sig, shift=shift)
    if path == "shift":
        if not uniform or not is_power_of_two(float(m.reshape(-1)[0])):
            raise RequantError(f"multiplier {what} is not a power of two 2^-n (rule of the shift path; "
                               f"use path='fixed')")
        plan.steps, plan.acc_clamp = _shift_plan(float(m.reshape(-1)[0]), bound, zp, lo, hi, acc_max)
    else:
        _fixed_into(plan, m, uniform, bound, zp, lo, hi, acc_max, what)
    _check_no_overflow(plan, acc_max)
    return plan


def _check_no_overflow(plan, acc_max):
    """Every intermediate at acc = +-acc_bound (the extremes: all steps are monotone) fits int32."""
    c = plan.channels or 1
    x = np.array([[-plan.acc_bound] * c, [plan.acc_bound] * c], dtype=np.int64)
    for k in range(1, len(plan.steps) + 1):
        y = alu_steps_int32(plan.steps[:k], x, plan.vectors, axis=1, wrap=False)
        if y.min() < -acc_max - 1 or y.max() > acc_max:
            raise RequantError(f"requant step {k} {plan.steps[k - 1]} overflows int32 for acc_bound = "
                               f"{plan.acc_bound} (multiplier {plan.multiplier})")
