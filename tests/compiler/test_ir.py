"""Loop IR: affine analysis and evaluation checked against direct integer arithmetic."""

import itertools

import pytest

from vtasim.compiler.lowering.ir import (Buffer, For, IRError, IntImm, Load, Store, Var, evaluate, linear, simplify,
                         substitute, to_text)


def test_linear_matches_direct_evaluation():
    i, j, k = Var("i"), Var("j"), Var("k")
    expr = (i * 16 + j + 3) * 2 - i - 6 + k * 5
    coeffs, base = linear(expr, [i, j])
    assert coeffs == [31, 2]
    for vi, vj, vk in itertools.product(range(3), range(4), range(2)):
        env = {i: vi, j: vj, k: vk}
        assert evaluate(expr, env) == 31 * vi + 2 * vj + evaluate(base, env)


def test_nonlinear_is_refused():
    i, j = Var("i"), Var("j")
    assert linear(i * j + 1, [i]) is None
    a = Buffer("A", (8,), "int32")
    assert linear(Load(a, i) + i, [i]) is None          # i inside an opaque atom


def test_simplify_keeps_value_and_folds_exact_division():
    i, j = Var("i"), Var("j")
    e = (i * 32 + j * 16) // 16
    s = simplify(e)
    assert to_text(s) == "((i * 2) + j)"
    for vi, vj in itertools.product(range(5), range(5)):
        assert evaluate(s, {i: vi, j: vj}) == evaluate(e, {i: vi, j: vj})
    with pytest.raises(IRError, match="division by zero"):
        simplify(IntImm(3) // 0)


def test_substitute_and_print():
    i = Var("i")
    a = Buffer("A", (64, 16), "int32")
    s = For(i, 64, Store(a, a.flat_index([i, 0]), Load(a, i) + 1))
    assert to_text(s) == "for (i, 0, 64) {\n  A[(i * 16)] = (A[i] + 1)\n}"
    body = simplify(substitute(s.body, {i: 3}))
    assert to_text(body) == "A[48] = (A[3] + 1)"
