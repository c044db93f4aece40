"""VTA requantisation plans: the ALU emulation against the functional model's ALU, the proved error
bound against TVM's integer requantize (never exceeded, and attained), and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.compiler import qnn
from vtasim.compiler.qnn.vta_requant import alu_steps_int32
from vtasim.hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR
from vtasim.sim.functional import alu_apply

_OPS = {"add": ALU_ADD, "mul": ALU_MUL, "min": ALU_MIN, "max": ALU_MAX, "shr": ALU_SHR}


def _near_ties(plan, rng, n):
    """Accumulators within the bound, half of them next to the points where acc * m is k + 1/2."""
    b = plan.acc_bound
    acc = list(rng.integers(-b, b + 1, size=n // 2))
    m = np.atleast_1d(plan.multiplier)
    reach = int(min(130, b * m.max()))
    ks = rng.integers(-reach - 1, reach + 1, size=n // 2)
    for k in ks:
        c = (k + 0.5 - plan.out_zp) / m[rng.integers(0, m.size)]
        acc.append(int(np.clip(round(c) + rng.integers(-2, 3), -b, b)))
    acc += [-b, b, 0]
    return np.array(acc, dtype=np.int64)


def _check(plan, rng, n=20000):
    c = plan.channels or 1
    b = plan.acc_bound
    acc = np.arange(-b, b + 1) if (2 * b + 1) * c <= 1 << 22 else _near_ties(plan, rng, n)
    acc = np.broadcast_to(acc[:, None], (acc.size, c))
    diff = np.abs(plan.apply(acc) - plan.exact(acc))
    assert diff.max() <= plan.max_error_lsb, (plan.steps, plan.max_error_lsb)
    out = plan.apply(acc)
    assert out.min() >= plan.out_lo and out.max() <= plan.out_hi
    return int(diff.max())


def test_alu_emulation_equals_functional_model_alu():
    rng = np.random.default_rng(0)
    x = rng.integers(-(1 << 31), 1 << 31, size=4000).astype(np.int64)
    for kind, op in _OPS.items():
        for imm in (0, 1, 7, 31, -5, 32767, -32768) if kind != "shr" else (0, 1, 15, 31):
            got = alu_steps_int32([(kind, imm)], x)
            want = alu_apply(op, x.astype(np.int32), np.int32(imm)).astype(np.int64)
            assert np.array_equal(got, want), (kind, imm)
    for k in (1, 5, 30):       # shl k is SHR by -k on VTA
        assert np.array_equal(alu_steps_int32([("shl", k)], x),
                              alu_apply(ALU_SHR, x.astype(np.int32), np.int32(-k)).astype(np.int64))
    vec = rng.integers(-(1 << 31), 1 << 31, size=5)
    xs = x[:20].reshape(4, 5)
    got = alu_steps_int32([("mul", "v")], xs, {"v": vec}, axis=1)
    want = alu_apply(ALU_MUL, xs.astype(np.int32), np.broadcast_to(vec, xs.shape).astype(np.int32))
    assert np.array_equal(got, want.astype(np.int64))


@pytest.mark.parametrize("n", [-6, -1, 0, 1, 3, 8, 14, 15, 16, 20, 33])
def test_shift_path_is_exact(default_cfg, n):
    rng = np.random.default_rng(100 + n)
    for bound, zp, relu in ((1 << 20, 0, False), ((1 << 31) - (1 << 16), -7, True), (5000, 12, False)):
        plan = qnn.plan_requant(2.0 ** -n, bound, zp, -128, 127, default_cfg, path="shift", relu=relu)
        assert plan.path == "shift" and plan.max_error_lsb == 0
        assert all(abs(v) <= 32767 for k, v in plan.steps if k in ("add", "min", "max", "mul"))
        assert all(0 <= v <= 31 for k, v in plan.steps if k in ("shr", "shl"))
        assert _check(plan, rng, 4000) == 0
        if relu:
            assert plan.out_lo == zp


def test_shift_path_steps_are_tvms(default_cfg):
    plan = qnn.plan_requant(2.0 ** -8, 1 << 20, 0, -127, 127, default_cfg, path="auto", relu=True)
    assert plan.steps == [("add", 128), ("shr", 8), ("min", 127), ("max", 0)]      # spec 8.5


def _fixed_cases():
    """Random multipliers (per tensor and per channel) and accumulator bounds whose outputs span from
    a few LSB to far beyond the int8 range (so the clamp is exercised too)."""
    rng = np.random.default_rng(7)
    cases = []
    for i in range(16):
        per_channel = i % 2 == 1
        scale = 10 ** rng.uniform(-5, -1) if i < 13 else 10 ** rng.uniform(0, 1.2)
        m = scale * rng.uniform(0.5, 2.0, size=int(rng.integers(2, 20))) if per_channel else scale
        span = 10 ** rng.uniform(0.5, 6)                       # output LSBs the accumulator range covers
        bound = int(min((1 << 31) - (1 << 20), span / np.min(m)))
        zp = int(rng.integers(-20, 21))
        cases.append((m, bound, zp, bool(i % 3 == 0)))
    return cases


@pytest.mark.parametrize("m, bound, zp, relu", _fixed_cases())
def test_fixed_path_bound_holds_and_is_attained(default_cfg, m, bound, zp, relu):
    plan = qnn.plan_requant(m, bound, zp, -128, 127, default_cfg, path="fixed", relu=relu)
    assert plan.path == "fixed"
    if np.ndim(m):
        assert plan.steps.count(("mul", "requant_mul")) == 1 and plan.vectors["requant_mul"].dtype == np.int32
    else:
        assert all(abs(v) <= 32767 for k, v in plan.steps if not isinstance(v, str) and k != "shr")
    worst = _check(plan, np.random.default_rng(bound))
    # not vacuous: the proved bound (ceil of E) is reached on accumulators next to the rounding ties
    assert worst == plan.max_error_lsb


@pytest.mark.parametrize("m, bound", [(0.000731, 1 << 12), (0.000731, 1 << 20), (0.0123, 1 << 28), (3.3e-6, 5 << 27)])
def test_fixed_path_mantissa_is_as_large_as_the_bound_allows(default_cfg, m, bound):
    """One more mantissa bit would overflow the 16-bit immediate or the int32 product."""
    plan = qnn.plan_requant(m, bound, 0, -128, 127, default_cfg, path="fixed")
    k = next(i for i, (kind, _) in enumerate(plan.steps) if kind == "mul")
    mant = plan.steps[k][1]
    a = int(np.abs(alu_steps_int32(plan.steps[:k], np.array([-bound, bound]), wrap=False)).max())
    assert 2 * mant > 32767 or a * 2 * mant > (1 << 31) - 1, (plan.steps, a)


def test_large_multiplier_clamps_the_accumulator(default_cfg):
    plan = qnn.plan_requant(37.3, (1 << 31) - 1, 4, -128, 127, default_cfg)
    p, lo, hi = plan.acc_clamp
    assert p == 0 and plan.steps[:2] == [("min", hi), ("max", lo)]
    rng = np.random.default_rng(9)
    acc = rng.integers(-(1 << 31) + 1, 1 << 31, size=20000)
    assert np.abs(plan.apply(acc) - plan.exact(acc)).max() <= plan.max_error_lsb
    plan = qnn.plan_requant(2.0 ** 6, (1 << 31) - 1, 4, -128, 127, default_cfg)
    assert plan.path == "shift" and ("shl", 6) in plan.steps
    assert np.array_equal(plan.apply(acc), plan.exact(acc))


@pytest.mark.parametrize("args, kwargs, match", [
    ((0.3, 1000, 0, -128, 127), {"path": "shift"}, r"multiplier 0.3 is not a power of two 2\^-n"),
    ((0.0, 1000, 0, -128, 127), {}, "multiplier 0.0 must be a finite number > 0"),
    ((float("nan"), 1000, 0, -128, 127), {}, "multiplier nan must be a finite number > 0"),
    ((np.array([0.1, -0.2]), 1000, 0, -128, 127), {}, "multiplier -0.2 must be"),
    ((1e5, 1000, 0, -128, 127), {}, "multiplier 100000 with acc_bound = 1000 is too large for a 16-bit immediate"),
    ((1e-30, 1000, 0, -128, 127), {}, "multiplier 1e-30 is too small for the fixed path"),
    ((0.5, (1 << 31) - 1, 0, -128, 127), {}, "acc_bound = 2147483647 plus the rounding constant"),
    ((2.0 ** 31, 10, 0, -128, 127), {}, r"beyond the left-shift range"),
    ((0.1, 1 << 31, 0, -128, 127), {}, r"acc_bound = 2147483648 must be an integer in \[0, 2147483647\]"),
    ((0.1, 1000, 0, 5, 3), {}, r"out_hi = 3 must be an integer in \[5, 127\]"),
    ((0.1, 1000, 0, -200, 3), {}, r"out_lo = -200 must be an integer in \[-128, 127\]"),
    ((0.1, 1000, 0, -128, 127), {"path": "magic"}, "path = 'magic' must be one of auto, shift, fixed"),
])
def test_unrepresentable_requantisations_raise(default_cfg, args, kwargs, match):
    with pytest.raises(qnn.RequantError, match=match):
        qnn.plan_requant(*args, cfg=default_cfg, **kwargs)
    assert issubclass(qnn.RequantError, qnn.QnnError)


def test_plan_command(capsys):
    from vtasim.compiler.qnn.__main__ import main
    assert main(["0.00390625", "--acc-bound", "1048576", "--relu"]) == 0
    out = capsys.readouterr().out
    assert "path shift, 4 ALU steps, max_error_lsb 0" in out and "add 128 | shr 8 | min 127 | max 0" in out
    assert main(["0.3", "--acc-bound", "100", "--path", "shift"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: multiplier 0.3 is not a power of two") and err.count("\n") == 1
