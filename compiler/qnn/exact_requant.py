"""The exact requantisation on the VTA ALU: equal to the host's rule on every accumulator a layer can reach.

The host (and :meth:`RequantPlan.exact <vtasim.compiler.qnn.vta_requant.RequantPlan.exact>`) computes TVM's
integer ``qnn.requantize`` of an int32 accumulator ``acc``: with TVM's fixed-point multiplier
``(sig, shift)``, ``S = sig * 2^max(shift, 0)`` and ``R = 31 + max(-shift, 0)``::

    y = clip(floor((acc S + 2^(R-1)) / 2^R) + zp, lo, hi)                              (exact)

``acc S`` has about 50 bits; the ALU has int32 lanes.  The plan splits ``S`` into digits,
``S = sum_i D_i 2^(i k)`` (``n`` digits of ``k`` bits, the top one what is left), and uses the
nested-floor identity (``X`` an integer, ``r`` any integer: ``floor((X 2^k + r) / 2^(k+q)) =
floor((X + floor(r / 2^k)) / 2^q)``) from the lowest digit up::

    a  = min(max(acc, L), H)                  L, H: where the output saturates (below)
    c0 = floor(a D_0 / 2^k)
    ci = floor((a D_i + c(i-1)) / 2^k)                                   0 < i < n-1
    y  = floor((a D_(n-1) + c(n-2) + 2^(r-1) + zp 2^r) / 2^r)            r = R - (n-1) k

which is ``floor((a S + 2^(R-1)) / 2^R) + zp`` exactly, as long as no intermediate leaves int32 (the
plan bounds every one of them by interval arithmetic on ``[L, H]`` when it is made and refuses
otherwise).  ``L`` and ``H`` are, per channel, the last accumulator whose exact output is ``lo`` and
the first whose output is ``hi`` (within ``+-acc_bound``): ``exact`` is monotone, so every accumulator
beyond them has the same output as they do, and the clamp changes nothing; it bounds ``|a|`` by far
less than ``acc_bound`` (what makes the digits wide), and it replaces the final clip when ``m < 1``
(steps of at most one LSB: ``exact(L) = lo``, ``exact(H) = hi``).

The ALU works in place, and ``a`` is needed once per digit.  A second accumulator tile holds a copy
(``Z + a``, ``Z`` a zero tile loaded by DMA: there is no ALU move), the lowest digit consumes it; a
middle digit multiplies ``a`` in place (``a D_i``, added into the running carry as the vector
operand) and gets ``a`` back by the inverse of the odd ``D_i`` modulo 2^32 (a wrapping multiply
is exact modulo 2^32 and ``a`` fits int32); the top digit consumes ``a``.  Digits are made odd where
needed by moving ``2^k`` between neighbours (any integer digits satisfy the identity).

The stages use :class:`vtasim.compiler.qnn.qadd.QAddPlan`'s form ``(out, kind, lhs, rhs)`` with sources
``"A"`` (the accumulator, bias added) and ``"Z"`` (the zero tile), ``rhs`` one of ``("imm", v)``,
``("vec", name)`` (an int32 per-channel vector) or ``("t", value)``.  The list is in the order a
producer-first walk from the last stage visits them (left operand first), the order the schedule
computes them in: every value's last reader comes after its other readers, so each stage can
overwrite its left operand.  :func:`verify_stages` checks
the finished plan against ``exact`` on every accumulator of ``[L, H]`` where they are few enough,
else on both sides of every output step of every channel and at the ends.
"""

from __future__ import annotations

import numpy as np

from vtasim.hw.alu import ALU_OPS
from vtasim.hw.fields import ALU_IMM_WIDTH
from vtasim.compiler.qnn.errors import RequantError

__all__ = ["exact_stages", "alu_stages_int32", "verify_stages", "EXACT_VERIFY_LIMIT"]

_ALU = {op.mnemonic: op for op in ALU_OPS}
_IMM_MAX = (1 << (ALU_IMM_WIDTH - 1)) - 1
_I32 = (-(1 << 31), (1 << 31) - 1)
EXACT_VERIFY_LIMIT = 1 << 23          # accumulators x channels evaluated exhaustively by verify_stages


def _vec(v, ndim, axis):
    v = np.asarray(v, dtype=np.int64)
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def alu_stages_int32(stages, acc, vectors, axis: int = 1) -> np.ndarray:
    """The stages on ``acc`` with the ALU's int32 semantics (every result wrapped to 32 bits); int64."""
    a = np.asarray(acc).astype(np.int64)
    vals = {"A": a, "Z": np.zeros_like(a)}
    for out, kind, lhs, (rk, rv) in stages:
        x = vals[lhs]
        y = np.int64(rv) if rk == "imm" else (_vec(vectors[rv], x.ndim, axis) if rk == "vec" else vals[rv])
        r = _ALU[kind].rule(x, y)
        vals[out] = ((r + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    return vals[stages[-1][0]]


def _saturation_points(s: int, r: int, zp: int, lo: int, hi: int, bound: int):
    """(L, H): the largest acc with exact <= lo and the smallest with exact >= hi, kept within +-bound."""
    half = 1 << (r - 1)
    top = -((-(((hi - zp) << r) - half)) // s)                 # ceil(((hi - zp) 2^r - 2^(r-1)) / s)
    bottom = -((-(((lo - zp + 1) << r) - half)) // s) - 1
    return max(bottom, -bound), min(top, bound)


def _digits(s: int, n: int, k: int):
    """``n`` integer digits of ``s`` (``s = sum D_i 2^(ik)``), the middle ones odd."""
    d = [(s >> (i * k)) & ((1 << k) - 1) for i in range(n - 1)] + [s >> ((n - 1) * k)]
    for i in range(1, n - 1):
        if d[i] % 2 == 0:
            d[i] += 1
            d[i - 1] -= 1 << k
    return d


def _mul_range(lo, hi, c):
    return (min(lo * c, hi * c), max(lo * c, hi * c))


class _Builder:
    """Stages with their per-channel value intervals; ``operand`` makes immediates or vectors."""

    def __init__(self, ranges):
        self.stages, self.vectors, self.ranges = [], {}, {"A": ranges, "Z": [(0, 0)] * len(ranges)}

    def operand(self, values, name):
        if all(v == values[0] for v in values) and abs(values[0]) <= _IMM_MAX:
            return ("imm", int(values[0]))
        if any(not _I32[0] <= v <= _I32[1] for v in values):
            return None
        self.vectors[name] = np.array(values, dtype=np.int32)
        return ("vec", name)

    def stage(self, out, kind, lhs, rhs, ranges):
        if rhs is None or any(lo < _I32[0] or hi > _I32[1] for lo, hi in ranges):
            raise _Overflow
        self.stages.append((out, kind, lhs, rhs))
        self.ranges[out] = ranges
        return out


class _Overflow(Exception):
    pass


def _build(sigs, rs, zp, lo, hi, bound, clamp, n, k, fold_zp):
    """The stages for ``n`` digits of ``k`` bits (``zp``, ``lo``, ``hi``: per channel), or _Overflow."""
    c = len(sigs)
    b = _Builder([(-bound, bound)] * c)
    x = "A"
    lows, highs = [lh[0] for lh in clamp], [lh[1] for lh in clamp]
    if any(h < bound for h in highs):           # the sides some accumulator reaches beyond
        x = b.stage("a_hi", "min", x, b.operand(highs, "rq_hi"), [(-bound, h) for h in highs])
    if any(v > -bound for v in lows):
        x = b.stage("a", "max", x, b.operand(lows, "rq_lo"), clamp)
    digits = [_digits(s, n, k) for s in sigs]
    t = b.stage("t0", "add", "Z", ("t", x), clamp)
    d0 = [d[0] for d in digits]
    t = b.stage("t0m", "mul", t, b.operand(d0, "rq_d0"), [_mul_range(*clamp[j], d0[j]) for j in range(c)])
    t = b.stage("c0", "shr", t, ("imm", k), [(v0 >> k, v1 >> k) for v0, v1 in b.ranges[t]])
    for i in range(1, n - 1):
        di = [d[i] for d in digits]
        p = b.stage(f"a{i}", "mul", x, b.operand(di, f"rq_d{i}"), [_mul_range(*clamp[j], di[j]) for j in range(c)])
        t = b.stage(f"t{i}", "add", t, ("t", p),
                    [(b.ranges[t][j][0] + b.ranges[p][j][0], b.ranges[t][j][1] + b.ranges[p][j][1]) for j in range(c)])
        t = b.stage(f"c{i}", "shr", t, ("imm", k), [(v0 >> k, v1 >> k) for v0, v1 in b.ranges[t]])
        inv = [pow(v, -1, 1 << 32) for v in di]
        x = b.stage(f"a{i}r", "mul", p, b.operand([v - (1 << 32) if v > _I32[1] else v for v in inv], f"rq_inv{i}"),
                    clamp)
    dt = [d[n - 1] for d in digits]
    p = b.stage("top", "mul", x, b.operand(dt, f"rq_d{n - 1}"), [_mul_range(*clamp[j], dt[j]) for j in range(c)])
    y = b.stage("y", "add", t, ("t", p),
                [(b.ranges[t][j][0] + b.ranges[p][j][0], b.ranges[t][j][1] + b.ranges[p][j][1]) for j in range(c)])
    shifts = [r - (n - 1) * k for r in rs]
    if min(shifts) < 1:
        raise _Overflow
    const = [(1 << (q - 1)) + ((z << q) if fold_zp else 0) for q, z in zip(shifts, zp)]
    y = b.stage("yr", "add", y, b.operand(const, "rq_round"),
                [(b.ranges[y][j][0] + const[j], b.ranges[y][j][1] + const[j]) for j in range(c)])
    if all(q == shifts[0] for q in shifts) and shifts[0] <= 31:
        rhs = ("imm", shifts[0])
    elif max(shifts) <= 31:
        rhs = b.operand(shifts, "rq_shift")
    else:
        raise _Overflow
    y = b.stage("ys", "shr", y, rhs, [(v0 >> q, v1 >> q) for (v0, v1), q in zip(b.ranges[y], shifts)])
    if not fold_zp and any(zp):
        y = b.stage("yz", "add", y, b.operand(zp, "rq_zp"), [(v0 + z, v1 + z) for (v0, v1), z in zip(b.ranges[y], zp)])
    if any(v1 > h for (_, v1), h in zip(b.ranges[y], hi)):
        y = b.stage("ymin", "min", y, b.operand(hi, "rq_out_hi"),
                    [(min(v0, h), min(v1, h)) for (v0, v1), h in zip(b.ranges[y], hi)])
    if any(v0 < lo_ for (v0, _), lo_ in zip(b.ranges[y], lo)):
        y = b.stage("ymax", "max", y, b.operand(lo, "rq_out_lo"),
                    [(max(v0, lo_), max(v1, lo_)) for (v0, v1), lo_ in zip(b.ranges[y], lo)])
    return b.stages, b.vectors


def exact_stages(sigs, shifts, bound: int, zp, lo, hi):
    """``(stages, vectors, (L, H) per channel)`` of the exact plan for TVM's multipliers ``(sig, shift)``
    (one pair per channel, or one for all), output zero point and range ``zp``, ``lo``, ``hi`` (numbers,
    or one per channel: combined sibling layers) and accumulators ``|acc| <= bound``: the fewest
    digits whose intermediates all fit int32.  Raises :class:`RequantError` when no digit split fits."""
    big = [int(g) << max(int(h), 0) for g, h in zip(sigs, shifts)]
    rs = [31 + max(-int(h), 0) for h in shifts]
    if min(big) <= 0:
        raise RequantError("the exact requantisation needs a multiplier > 0")
    zp, lo, hi = ([int(v) for v in np.broadcast_to(np.asarray(x), (len(big),))] for x in (zp, lo, hi))
    clamp = [_saturation_points(*a, bound) for a in zip(big, rs, zp, lo, hi)]
    clamp = [(min(lo_, hi_), max(lo_, hi_)) for lo_, hi_ in clamp]
    width = max(s.bit_length() for s in big)
    for n in range(2, 9):
        for k in range(-(-width // n), 31):
            for fold in (True, False):
                try:
                    stages, vectors = _build(big, rs, zp, lo, hi, bound, clamp, n, k, fold)
                except _Overflow:
                    continue
                return stages, vectors, clamp
    raise RequantError(f"no digit split of the multiplier keeps the exact requantisation within int32 for "
                       f"acc_bound = {bound} (rule: |acc| times a digit fits 31 bits)")


def verify_stages(plan, clamp) -> int:
    """The number of accumulators on which ``plan.apply`` was checked to equal ``plan.exact`` (every one
    of ``[min L, max H]`` when at most ``EXACT_VERIFY_LIMIT`` with the channels, else both sides of each
    output step of each channel and the ends); raises :class:`RequantError` on a difference."""
    c = plan.channels or 1
    lo_all, hi_all = min(v for v, _ in clamp), max(v for _, v in clamp)
    span = hi_all - lo_all + 1
    if span * c <= EXACT_VERIFY_LIMIT:
        chunks = [np.arange(s, min(s + (1 << 16), hi_all + 1), dtype=np.int64) for s in range(lo_all, hi_all + 1, 1 << 16)]
        chunks.append(np.array([-plan.acc_bound, plan.acc_bound], dtype=np.int64))
    else:
        chunks = [_step_points(plan, clamp)]
    checked = 0
    for acc in chunks:
        grid = np.broadcast_to(acc.reshape(-1, 1) if acc.ndim == 1 else acc, (acc.shape[0], c))
        got, want = plan.apply(grid), plan.exact(grid)
        if not np.array_equal(got, want):
            i, j = np.argwhere(got != want)[0]
            raise RequantError(f"exact requant plan: accumulator {int(grid[i, j])} (channel {int(j)}) gives "
                               f"{int(got[i, j])}, the host {int(want[i, j])} (internal error)")
        checked += grid.size
    return checked


def _step_points(plan, clamp) -> np.ndarray:
    """(points, channels): per channel, the first accumulator of every output value and the one before,
    the clamp ends and the bound's ends."""
    c = plan.channels or 1
    sig = np.broadcast_to(np.atleast_1d(plan.sig), (c,))
    sh = np.broadcast_to(np.atleast_1d(plan.shift), (c,))
    cols = []
    for j in range(c):
        s, r = int(sig[j]) << max(int(sh[j]), 0), 31 + max(-int(sh[j]), 0)
        pts = {clamp[j][0], clamp[j][1], -plan.acc_bound, plan.acc_bound}
        for v in range(plan.out_lo - plan.out_zp, plan.out_hi - plan.out_zp + 1):
            first = -((-((v << r) - (1 << (r - 1)))) // s)
            pts.update((first - 1, first, first + 1))
        cols.append(sorted(p for p in pts if -plan.acc_bound <= p <= plan.acc_bound))
    m = max(len(p) for p in cols)
    return np.array([p + [p[-1]] * (m - len(p)) for p in cols], dtype=np.int64).T
