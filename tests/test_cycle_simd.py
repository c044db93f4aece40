"""The cycle engine's integer SIMD GEMM kernel (vtasim.sim.cycle.gemm_simd) and the choice between it and the float32
BLAS grouping are invisible: every GEMM path gives the functional engine's bytes and the integer kernel's retire
records (digests included) and cycles, on random programs of every preset and on the irregular streams.  The
functional engine's compiled executor (the cycle engine's kernels in the scheduler's order) gives its numpy
executor's bytes, counters, leftover tokens and execution order on the same programs."""

import numpy as np
import pytest

from vtasim.hw.config import PRESETS, load_config, load_preset
from vtasim.sim import functional
from vtasim.sim.cycle import run_image
from vtasim.sim.cycle.engine import GEMM_PATHS
from vtasim.sim.programs.randprog import generate
from vtasim.sim.programs.streams import alu_bound_image, irregular_gemm_image
from engine_checks import same_run

PATHS = [p for p in GEMM_PATHS if p != "int"]


def every_path(img):
    """Functional runs (its numpy executor, the reference, and its compiled one) and one cycle run per GEMM
    path; asserts they agree with the integer kernel's run."""
    ref, slow = functional.run_image(img, executor="numpy"), run_image(img, gemm="int")
    same_run(img, ref, slow, timing=False)
    compiled = functional.run_image(img, executor="compiled")
    same_run(img, ref, compiled, timing=False)
    assert compiled.order == ref.order
    for path in PATHS:
        same_run(img, slow, run_image(img, gemm=path), timing=True)     # records (digests), cycles, bytes
    return ref


RANDOM_PER_PRESET = 60


@pytest.mark.parametrize("preset_name", PRESETS)
@pytest.mark.parametrize("seed", range(RANDOM_PER_PRESET))
def test_random_programs_every_gemm_path(preset_name, seed):
    every_path(generate(load_preset(preset_name), 90_000 + seed))


def varied(out: bytes) -> bool:
    """Output bytes neither constant nor saturated: most byte values occur, none dominates."""
    counts = np.bincount(np.frombuffer(out, np.uint8), minlength=256)
    return (counts > 0).sum() >= 200 and counts.max() < len(out) / 32


@pytest.mark.parametrize("preset_name", PRESETS)
@pytest.mark.parametrize("seed", range(3))
def test_irregular_gemm_stream(preset_name, seed):
    ref = every_path(irregular_gemm_image(load_preset(preset_name), gemms=24, seed=seed))
    assert ref.counters["gemm_counter"] > 0 and varied(ref.outputs["y"])


@pytest.mark.parametrize("preset_name", PRESETS)
def test_alu_bound_stream(preset_name):
    ref = every_path(alu_bound_image(load_preset(preset_name), insns=48, seed=1))
    assert ref.counters["alu_counter"] > 0 and varied(ref.outputs["y"])


@pytest.mark.parametrize("width,blk", [(w, b) for w in (8, 16) for b in (8, 16, 32, 64) if w <= b])
def test_dot_tile_against_numpy(width, blk):
    """vtasim.sim.cycle.simd.dot_tile{W}_{B}: W lanes of acc += inp . w over the pair layout of kernels.pair_weights,
    against numpy int64 arithmetic wrapped to int32, on random and extreme (-128, 127) values; the digest
    terms against kernels.mix."""
    from numba import njit
    from vtasim.sim.cycle import simd
    from vtasim.sim.cycle.kernels import pair_weights, row_hash
    tile = getattr(simd, f"dot_tile{width}_{blk}")

    @njit
    def step(acc, a, inp, s, wp, w):
        return tile(acc, a, inp, s, wp, w, np.uint64(2 * blk), row_hash(a))

    rng = np.random.default_rng(width * 100 + blk)
    for trial in range(6):
        x = rng.integers(-128, 128, 3 * blk).astype(np.int8)
        wgt = rng.integers(-128, 128, (2, blk * blk)).astype(np.int8)
        if trial % 3 == 1:
            x[:], wgt[:] = -128, -128
        elif trial % 3 == 2:
            x[::2], wgt[:, ::3] = 127, -128
        wp = np.zeros_like(wgt)
        pair_weights(wgt, wp, 0, 2, blk)
        acc = rng.integers(-2**31, 2**31, 4 * blk).astype(np.int32)
        a, s, e, c = blk, blk, 1, (blk - width) if trial % 2 else 0           # last or first chunk of outputs
        want = acc.astype(np.int64)
        dots = wgt[e].reshape(blk, blk).astype(np.int64) @ x[s:s + blk].astype(np.int64)
        want[a:a + width] += dots[c:c + width]
        want = want.astype(np.uint64).astype(np.uint32).view(np.int32)
        got = step(acc, np.uint64(a), x, np.uint64(s), wp.reshape(-1), np.uint64(e * blk * blk + 2 * c))
        assert np.array_equal(acc, want), (trial, width, blk)
        idx = np.arange(a, a + width, dtype=np.uint64)
        v = want[a:a + width].view(np.uint32).astype(np.uint64)
        terms = ((v ^ ((idx * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF))) * np.uint64(0x85EBCA77)) & np.uint64(
            0xFFFFFFFF)
        assert int(got) == int(terms.sum() & np.uint64(0xFFFFFFFF))


def test_cost_rule_picks_each_path():
    """The documented rule (vtasim.sim.cycle.gemm_simd) on three nests: products reused by an inner loop that moves
    neither src nor wgt, and uops sharing one weight element, take BLAS; unrelated indices take SIMD."""
    from vtasim.sim.cycle.engine import params
    from vtasim.sim.cycle.gemm_simd import BLAS_MIN_REUSE, BLAS_MIN_ROWS, blas_pays
    from vtasim.sim.cycle import layout as L
    cfg = load_config()
    P = params(cfg, 0, 1)
    rng = np.random.default_rng(0)

    def pays(uops, iters, factors):
        words = np.array([d | (s << P[L.P_UOP_SRC_LO]) | (w << P[L.P_UOP_WGT_LO]) for d, s, w in uops], np.uint32)
        row = np.zeros((1, L.N_FIELDS), np.int64)
        row[0, [L.F_UOP_BGN, L.F_UOP_END, L.F_ITER_OUT, L.F_ITER_IN]] = 0, len(uops), *iters
        row[0, [L.F_DST_FACTOR_OUT, L.F_DST_FACTOR_IN, L.F_SRC_FACTOR_OUT, L.F_SRC_FACTOR_IN, L.F_WGT_FACTOR_OUT,
                L.F_WGT_FACTOR_IN]] = factors
        return blas_pays(row, 0, words, P, cfg.wgt_depth)

    distinct = [(int(d), int(s), int(w)) for d, s, w in zip(rng.permutation(64), rng.permutation(64),
                                                              rng.permutation(64))]
    moving = (1, 1, 1, 1, 1, 1)
    assert pays(distinct[:16], (4, BLAS_MIN_REUSE), (16, 0, 16, 0, 0, 0))          # reused: BLAS
    assert not pays(distinct[:16], (4, BLAS_MIN_REUSE - 1), (16, 0, 16, 0, 0, 0))  # too little reuse
    assert not pays(distinct, (2, 2), moving)                                       # unrelated: SIMD
    shared = [(int(d), int(s), 0) for d, s in zip(rng.integers(0, 64, BLAS_MIN_ROWS), rng.integers(0, 64, BLAS_MIN_ROWS))]
    assert pays(shared, (1, 1), moving) and not pays(shared[:-1], (1, 1), moving)
