"""FastMath (Relay's name, its opt_level 4): the host's float ``Exp``, ``Tanh``, ``Erf`` and ``Softmax``
replaced by approximations with a stated error bound.

``vtasim onnx --fast-math`` (off by default) runs :func:`fast_math` after fusion: the float ops left
on the host become ``fast_exp``, ``fast_tanh``, ``fast_erf``, ``fast_softmax``, computed in float32 by
the functions below (quantised activations are int8 lookup tables, :mod:`vtasim.compiler.frontend.fuse`,
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

Each is one numba-compiled loop over the array (``cache=True``).  ``python bench/fastmath.py`` times
them beside the exact ops: numpy's ``exp``/``tanh`` are vectorised library calls that these loops do
not beat, scipy's ``erf`` is slower than ``fast_erf``.

``fast_exp``'s bound holds on its clamp range: above 88.7 it gives e^88.7 where float32 ``exp``
overflows to infinity, below -87.3 e^-87.3 (~1.2e-38) where ``exp`` gives a subnormal or 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vtasim.compiler.frontend.graph import Graph

__all__ = ["fast_exp", "fast_tanh", "fast_erf", "fast_math", "FAST_OPS", "ERROR_BOUNDS"]

# op -> (max absolute error, max relative error) over float32 inputs, against the float64 function;
# fast_softmax against the exact op as the host runs it (float32, max-subtracted), the relative error
# where that output is at least 1e-30 (below, float32 exp underflows where fast_exp saturates)
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


_EXP_TAYLOR = np.array([1.0 / math.factorial(k) for k in range(8)], _F)          # 1/k!, k = 0..7
# tanh x = sum_k T_k x^(2k+1), T_k = 2^(2k+2) (2^(2k+2) - 1) B_(2k+2) / (2k+2)!
_TANH_ODD = np.array([1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075,
                      -929569 / 638512875, 6404582 / 10854718875], _F)
# erf x = 2/sqrt(pi) sum_k (-1)^k x^(2k+1) / (k! (2k+1))
_ERF_ODD = np.array([2 / math.sqrt(math.pi) * (-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(10)], _F)
_AS_P = _F(0.3275911)
_AS_A = np.array([0.0, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429], _F)  # t (a1 + t (a2 ...))
_ONE, _TWO = _F(1.0), _F(2.0)
_POW2 = 2.0 ** np.arange(-127, 130, dtype=np.float64)     # 2^n for the n of fast_exp's clamp range
_TANH_SMALL, _TANH_BIG, _ERF_SMALL, _ERF_BIG = _F(0.55), _F(9.0), _F(0.8), _F(10.0)


@njit(cache=True, error_model="numpy")
def _horner(x, coeffs):
    """c0 + x (c1 + x (c2 + ...)) in float32, highest coefficient last."""
    acc = coeffs[-1]
    for k in range(coeffs.size - 2, -1, -1):
        acc = acc * x + coeffs[k]
    return acc


@njit(cache=True, error_model="numpy")
def _exp1(x):
    x = min(max(x, _EXP_LO), _EXP_HI)
    n = math.floor(x * _LOG2E + np.float32(0.5))
    nf = np.float32(n)
    r = (x - nf * _LN2_HI) - nf * _LN2_LO
    return np.float32(np.float64(_horner(r, _EXP_TAYLOR)) * _POW2[n + 127])


@njit(cache=True, error_model="numpy")
def _tanh1(x):
    a = min(abs(x), _TANH_BIG)
    s = min(a, _TANH_SMALL)                   # both branches computed, one chosen: no jump in the loop
    small = s * _horner(s * s, _TANH_ODD)
    big = _ONE - _TWO / (_exp1(_TWO * a) + _ONE)
    y = small if a < _TANH_SMALL else big
    return y if x >= 0 else -y


@njit(cache=True, error_model="numpy")
def _erf1(x):
    a = min(abs(x), _ERF_BIG)
    s = min(a, _ERF_SMALL)
    small = s * _horner(s * s, _ERF_ODD)
    t = _ONE / (_ONE + _AS_P * a)
    big = _ONE - _horner(t, _AS_A) * _exp1(-(a * a))
    y = small if a < _ERF_SMALL else big
    return y if x >= 0 else -y


@njit(cache=True, error_model="numpy")
def _map_exp(x, out):
    for k in range(x.size):
        out[k] = _exp1(x[k])


@njit(cache=True, error_model="numpy")
def _map_tanh(x, out):
    for k in range(x.size):
        out[k] = _tanh1(x[k])


@njit(cache=True, error_model="numpy")
def _map_erf(x, out):
    for k in range(x.size):
        out[k] = _erf1(x[k])


def _apply(loop, x) -> np.ndarray:
    """``loop`` (one compiled region over the flat array) on ``x`` as float32."""
    x = np.asarray(x, _F)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    loop(flat, out)
    return out.reshape(x.shape)


def fast_exp(x) -> np.ndarray:
    return _apply(_map_exp, x)


def fast_tanh(x) -> np.ndarray:
    return _apply(_map_tanh, x)


def fast_erf(x) -> np.ndarray:
    return _apply(_map_erf, x)


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
