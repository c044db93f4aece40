"""FastMath (Relay's name, its opt_level 4): the host's float ``Exp``, ``Tanh``, ``Erf`` and ``Softmax``
replaced by approximations with a stated error bound.

``vtasim onnx --fast-math`` (off by default) runs :func:`fast_math` after fusion: the float ops left
on the host become ``fast_exp``, ``fast_tanh``, ``fast_erf``, ``fast_softmax``, computed in float32 by
the functions below (quantised activations are int8 lookup tables, :mod:`compiler.frontend.fuse`,
and do not change).  The approximations use only multiply, add, divide, compare and a power-of-two
scaling - what a host without a vector libm runs - and their worst errors over a dense grid of
float32 inputs are within :data:`ERROR_BOUNDS` (``tests/frontend/test_passes_fastmath.py``)::

    fast_exp(x)   x = n ln2 + r (Cody-Waite, |r| <= ln2/2), e^r by its degree-7 Taylor polynomial,
                  times 2^n; inputs clamped to [-87.3, 88.7] (the float32 normal range)
    fast_tanh(x)  |x| < 0.55: the odd Taylor series to x^17; else 1 - 2 / (fast_exp(2|x|) + 1), with
                  the sign of x; |x| > 9 gives +-1
    fast_erf(x)   |x| < 0.8: the Taylor series to x^19; else Abramowitz & Stegun 7.1.26
                  (1 - t (a1 + t (a2 + ...)) e^-x^2, t = 1 / (1 + p|x|)) with the sign of x
    fast_softmax  the exact op's max-subtracted form with fast_exp

``fast_exp``'s bound holds on its clamp range: above 88.7 it gives e^88.7 where float32 ``exp``
overflows to infinity, below -87.3 e^-87.3 (~1.2e-38) where ``exp`` gives a subnormal or 0.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.graph import Graph

__all__ = ["fast_exp", "fast_tanh", "fast_erf", "fast_math", "FAST_OPS", "ERROR_BOUNDS"]

# op -> (max absolute error, max relative error) over float32 inputs; the relative one of fast_softmax
# is per output element against the exact float64 softmax
ERROR_BOUNDS = {
    "Exp": (None, 2e-7),
    "Tanh": (1.5e-7, 3e-7),
    "Erf": (3e-7, 4e-7),
    "Softmax": (1e-6, 1e-6),
}
FAST_OPS = {"Exp": "fast_exp", "Tanh": "fast_tanh", "Erf": "fast_erf", "Softmax": "fast_softmax"}

_F = np.float32
_LOG2E = _F(1.4426950408889634)
_LN2_HI = _F(0.693145751953125)          # ln 2 with its low 16 mantissa bits zero: n * _LN2_HI is exact
_LN2_LO = _F(1.4286068203094173e-06)     # ln 2 - _LN2_HI
_EXP_LO, _EXP_HI = _F(-87.3), _F(88.7)


def _horner(x, coeffs):
    """c0 + x (c1 + x (c2 + ...)) in float32, highest coefficient last."""
    acc = np.full_like(x, _F(coeffs[-1]))
    for c in coeffs[-2::-1]:
        acc *= x
        acc += _F(c)
    return acc


_EXP_TAYLOR = [1.0 / np.prod(np.arange(1, k + 1, dtype=np.float64)) for k in range(8)]   # 1/k!, k = 0..7


def fast_exp(x) -> np.ndarray:
    x = np.clip(np.asarray(x, _F), _EXP_LO, _EXP_HI)
    n = np.rint(x * _LOG2E)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    return np.ldexp(_horner(r, _EXP_TAYLOR), n.astype(np.int32)).astype(_F)


# tanh x = sum_k T_k x^(2k+1): 2^(2k+2) (2^(2k+2) - 1) B_(2k+2) / (2k+2)!, as exact fractions' values
_TANH_ODD = [1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075, -929569 / 638512875,
             6404582 / 10854718875]
# erf x = 2/sqrt(pi) sum_k (-1)^k x^(2k+1) / (k! (2k+1))
_ERF_ODD = [2 / np.sqrt(np.pi) * (-1) ** k / (np.prod(np.arange(1, k + 1, dtype=np.float64)) * (2 * k + 1))
            for k in range(10)]
_AS_P = 0.3275911
_AS_A = [0.0, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429]   # t (a1 + t (a2 + ...))


def _odd_series(x, coeffs):
    return x * _horner(x * x, coeffs)


def fast_tanh(x) -> np.ndarray:
    x = np.asarray(x, _F)
    a = np.minimum(np.abs(x), _F(9.0))
    big = _F(1.0) - _F(2.0) / (fast_exp(_F(2.0) * a) + _F(1.0))
    small = _odd_series(np.minimum(a, _F(0.55)), _TANH_ODD)
    return np.copysign(np.where(a < _F(0.55), small, big), x).astype(_F)


def fast_erf(x) -> np.ndarray:
    x = np.asarray(x, _F)
    a = np.minimum(np.abs(x), _F(10.0))
    t = _F(1.0) / (_F(1.0) + _F(_AS_P) * a)
    big = _F(1.0) - _horner(t, _AS_A) * fast_exp(-(a * a))
    small = _odd_series(np.minimum(a, _F(0.8)), _ERF_ODD)
    return np.copysign(np.where(a < _F(0.8), small, big), x).astype(_F)


def fast_math(g: Graph) -> Graph:
    """``Exp``/``Tanh``/``Erf``/``Softmax`` on the host -> their ``fast_`` forms; the note lists them with
    their error bounds."""
    changed: dict = {}
    for n in g.nodes:
        if n.op in FAST_OPS and n.target == "host":
            changed[n.op] = changed.get(n.op, 0) + 1
            n.op = FAST_OPS[n.op]
    if changed:
        parts = []
        for op, k in sorted(changed.items()):
            ab, rel = ERROR_BOUNDS[op]
            bound = f"relative error <= {rel:g}" + (f", absolute <= {ab:g}" if ab is not None else "")
            parts.append(f"{k} {op} -> {FAST_OPS[op]} ({bound})")
        g.notes.append("fast_math: " + "; ".join(parts))
    return g
