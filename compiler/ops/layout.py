"""Packed tensor layouts (compiler spec 2.1-2.4) as numpy transforms, and their inverses.

* activations NCHW -> ``(N/b, C/c, H, W, b, c)`` (``NCHW{b}n{c}c``);
* conv weights OIHW -> ``(O/o, I/i, KH, KW, o, i)`` (``OIHW{o}o{i}i``);
* dense data (N, K) -> ``(N/b, K/c, b, c)``, dense weights (O, K) -> ``(O/o, K/i, o, i)``;
* per-channel constants (C,) -> ``(1, C/c, 1, 1, b, c)`` broadcast over the batch block.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_nchw", "unpack_nchw", "pack_oihw", "pack_dense_data", "pack_dense_weight",
           "unpack_dense_out", "pack_channel_const"]


def _check(shape, factors, what):
    for n, f, axis in zip(shape, factors, range(len(shape))):
        if f and n % f:
            raise ValueError(f"{what}: dimension {axis} = {n} is not a multiple of the block {f}")


def pack_nchw(x: np.ndarray, bn: int, bc: int) -> np.ndarray:
    n, c, h, w = x.shape
    _check((n, c), (bn, bc), "pack_nchw")
    return np.ascontiguousarray(x.reshape(n // bn, bn, c // bc, bc, h, w).transpose(0, 2, 4, 5, 1, 3))


def unpack_nchw(x: np.ndarray) -> np.ndarray:
    nb, cb, h, w, bn, bc = x.shape
    return np.ascontiguousarray(x.transpose(0, 4, 1, 5, 2, 3).reshape(nb * bn, cb * bc, h, w))


def pack_oihw(w: np.ndarray, bo: int, bi: int) -> np.ndarray:
    o, i, kh, kw = w.shape
    _check((o, i), (bo, bi), "pack_oihw")
    return np.ascontiguousarray(w.reshape(o // bo, bo, i // bi, bi, kh, kw).transpose(0, 2, 4, 5, 1, 3))


def pack_dense_data(x: np.ndarray, bn: int, bc: int) -> np.ndarray:
    n, k = x.shape
    _check((n, k), (bn, bc), "pack_dense_data")
    return np.ascontiguousarray(x.reshape(n // bn, bn, k // bc, bc).transpose(0, 2, 1, 3))


def pack_dense_weight(w: np.ndarray, bo: int, bi: int) -> np.ndarray:
    o, k = w.shape
    _check((o, k), (bo, bi), "pack_dense_weight")
    return np.ascontiguousarray(w.reshape(o // bo, bo, k // bi, bi).transpose(0, 2, 1, 3))


def unpack_dense_out(y: np.ndarray) -> np.ndarray:
    nb, ob, bn, bo = y.shape
    return np.ascontiguousarray(y.transpose(0, 2, 1, 3).reshape(nb * bn, ob * bo))


def pack_channel_const(v: np.ndarray, bn: int, bc: int) -> np.ndarray:
    (c,) = v.shape
    _check((c,), (bc,), "pack_channel_const")
    packed = v.reshape(1, c // bc, 1, 1, 1, bc)
    return np.ascontiguousarray(np.broadcast_to(packed, (1, c // bc, 1, 1, bn, bc)))
