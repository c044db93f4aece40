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
from vtasim.sim.cycle.simd import VNNI
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


def _row_operands(rng, blk: int, trial: int):
    """Three input rows and two weight tiles of one row step: random, all -128, or 127 against -128."""
    x = rng.integers(-128, 128, 3 * blk).astype(np.int8)
    wgt = rng.integers(-128, 128, (2, blk * blk)).astype(np.int8)
    if trial % 3 == 1:
        x[:], wgt[:] = -128, -128
    elif trial % 3 == 2:
        x[::2], wgt[:, ::3] = 127, -128
    return x, wgt


def _mix_terms(want, a: int, blk: int) -> np.ndarray:
    """The digest's mix term of each word ``want[a:a + blk]`` (kernels.mix, written out in numpy)."""
    idx = np.arange(a, a + blk, dtype=np.uint64)
    v = want[a:a + blk].view(np.uint32).astype(np.uint64)
    return ((v ^ ((idx * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF))) * np.uint64(0x85EBCA77)) & np.uint64(
        0xFFFFFFFF)


@pytest.mark.parametrize("wdtype", [np.int8, np.int16])
@pytest.mark.parametrize("blk", [8, 16, 32, 64])
def test_mac_row_against_numpy(blk, wdtype):
    """vtasim.sim.cycle.simd.mac_row{B}: one batch row of one uop, acc += inp . w over the pair layout of
    kernels.pair_weights (int8, or the same values as int16), against numpy int64 arithmetic wrapped to int32,
    on random and extreme (-128, 127) values; the digest lanes it adds up against kernels.mix, through the
    multiplier the kernel applies at the end (sum of mix terms = MIX_V * sum of value XOR hash, mod 2^32)."""
    from numba import njit
    from vtasim.sim.cycle import simd
    from vtasim.sim.cycle.kernels import MIX_V, pair_weights, row_hash
    step = getattr(simd, f"mac_row{blk}")

    @njit
    def run(acc, a, inp, s, wp, w, dsum):
        step(acc, a, inp, s, wp, w, dsum, row_hash(a))

    rng = np.random.default_rng(blk)
    for trial in range(6):
        x, wgt = _row_operands(rng, blk, trial)
        wp = np.zeros_like(wgt)
        pair_weights(wgt, wp, 0, 2, blk)
        acc = rng.integers(-2**31, 2**31, 4 * blk).astype(np.int32)
        a, s, e = (blk, 2 * blk)[trial % 2], blk, 1
        want = acc.astype(np.int64)
        want[a:a + blk] += wgt[e].reshape(blk, blk).astype(np.int64) @ x[s:s + blk].astype(np.int64)
        want = want.astype(np.uint64).astype(np.uint32).view(np.int32)
        dsum = rng.integers(-2**31, 2**31, 8).astype(np.int32)
        d0 = int(dsum.view(np.uint32).astype(np.uint64).sum())
        run(acc, np.uint64(a), x.astype(np.int16), np.uint64(s), wp.astype(wdtype).reshape(-1), np.uint64(e * blk * blk),
            dsum)
        assert np.array_equal(acc, want), (trial, blk)
        terms = _mix_terms(want, a, blk)
        got = ((int(dsum.view(np.uint32).astype(np.uint64).sum()) - d0) * int(MIX_V)) & 0xFFFFFFFF
        assert got == int(terms.sum() & np.uint64(0xFFFFFFFF)), (trial, blk)


@pytest.mark.parametrize("native", sorted({False, VNNI}))
@pytest.mark.parametrize("blk", [8, 16, 32, 64])
def test_dot_row_against_numpy(blk, native):
    """vtasim.sim.cycle.simd.dot_row{B} (the gemm="vnni" step): acc += inp . w from the int8 inputs as stored,
    the weights + 128 in the quad layout of gemm_simd.quad_weights and the input sums of gemm_simd.input_sums,
    against numpy int64 arithmetic wrapped to int32, on random and extreme (-128, 127) values, for the
    vpdpbusd form (where numba targets VNNI) and the widening-multiply form other CPUs compile; the digest
    lanes against kernels.mix as in test_mac_row_against_numpy, with both running-sum forms (an array and
    the register lane sum of simd.lane_sums)."""
    from numba import njit
    from vtasim.sim.cycle import simd
    from vtasim.sim.cycle.gemm_simd import input_sums, quad_weights
    from vtasim.sim.cycle.kernels import MIX_V, row_hash
    step = getattr(simd, f"dot_row{blk}") if native == simd.VNNI else simd._dot_row(blk, native)
    lane_sums, lane_total = simd.lane_sums, simd.lane_total

    @njit
    def run(acc, a, inp, s, wq, w, xc, c, dsum):
        step(acc, a, inp, s, wq, w, xc, c, dsum, row_hash(a))

    @njit
    def run_reg(acc, a, inp, s, wq, w, xc, c):
        lanes = lane_sums()
        step(acc, a, inp, s, wq, w, xc, c, lanes, row_hash(a))
        return lane_total(lanes)

    rng = np.random.default_rng(100 + blk)
    for trial in range(6):
        x, wgt = _row_operands(rng, blk, trial)
        wq = np.zeros(wgt.shape, np.uint8)
        for e in range(2):
            quad_weights(wgt, wq, e, blk)
        xc = np.zeros((3, 1), np.int32)
        input_sums(x.view(np.uint8), xc, 0, 3, blk, 1)
        acc0 = rng.integers(-2**31, 2**31, 4 * blk).astype(np.int32)
        a, r, e = (blk, 2 * blk)[trial % 2], 1, 1
        want = acc0.astype(np.int64)
        want[a:a + blk] += wgt[e].reshape(blk, blk).astype(np.int64) @ x[r * blk:(r + 1) * blk].astype(np.int64)
        want = want.astype(np.uint64).astype(np.uint32).view(np.int32)
        terms = _mix_terms(want, a, blk)
        args = (np.uint64(a), x, np.uint64(r * blk), wq.reshape(-1), np.uint64(e * blk * blk), xc.reshape(-1),
                np.uint64(r))
        acc = acc0.copy()
        dsum = rng.integers(-2**31, 2**31, 16).astype(np.int32)
        d0 = int(dsum.view(np.uint32).astype(np.uint64).sum())
        run(acc, *args[:6], args[6], dsum)
        assert np.array_equal(acc, want), (trial, blk, native)
        got = ((int(dsum.view(np.uint32).astype(np.uint64).sum()) - d0) * int(MIX_V)) & 0xFFFFFFFF
        assert got == int(terms.sum() & np.uint64(0xFFFFFFFF)), (trial, blk, native)
        acc = acc0.copy()
        got = (int(run_reg(acc, *args)) * int(MIX_V)) & 0xFFFFFFFF
        assert np.array_equal(acc, want) and got == int(terms.sum() & np.uint64(0xFFFFFFFF)), (trial, blk, native)


def test_vector_arrays_start_on_a_cache_line():
    """Every array the vector steps read or write starts on a 64-byte line (engine.new_memories, through
    simd.aligned), on every preset: a row split over two lines is the slow case the kernels avoid."""
    from vtasim.sim.cycle.engine import new_memories
    for name in PRESETS:
        mem = new_memories(load_preset(name))
        for key in ("inp2", "inp16", "xc", "wgt2", "wgt_pairs", "wgt_quads", "acc2", "xf", "wt", "ab", "pb"):
            assert mem[key].ctypes.data % 64 == 0 and mem[key].flags.c_contiguous, (name, key)
        assert not mem["acc2"].any() and not mem["wgt_quads"].any()


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
