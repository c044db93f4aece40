"""The cycle engine's GEMM fast path (grouped float32 products, vtasim.sim.cycle.gemm_fast) is invisible: it gives
the functional engine's bytes, and the integer kernel's retire records (digests included) and cycles.
Each fallback to the integer kernel is forced here and checked against the functional engine (its numpy
executor, independent of the cycle engine's kernels)."""

import numpy as np
import pytest

from vtasim.hw.config import MEM_INP, MEM_UOP, MEM_WGT, PRESETS, load_config, load_preset
from vtasim.sim import functional
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.cycle import gemm_fast, run_image
from vtasim.sim.errors import SimError
from vtasim.sim.programs.randprog import generate
from vtasim.sim.programs.synthetic import gemm_bound_image
from engine_checks import same_run


def both_paths(img):
    """Functional run, fast-path cycle run (every non-reset GEMM the BLAS grouping can take goes through it),
    integer-kernel cycle run; asserts they agree and returns them."""
    ref, fast, slow = functional.run_image(img, executor="numpy"), run_image(img, gemm="blas"), run_image(img, gemm="int")
    same_run(img, ref, fast, timing=False)
    same_run(img, slow, fast, timing=True)            # same records (digests), cycles and bytes
    return ref, fast, slow


def adversarial_sum_exact(inp_bits, wgt_bits, block_in):
    """Is the worst-case tile lane exact when summed in float32?  block_in - 1 products at the largest
    magnitude then a product of 1, added in order: every partial sum must be held exactly."""
    big = float(1 << (inp_bits + wgt_bits - 2))
    terms = np.array([big] * (block_in - 1) + [1.0], np.float64)
    in_f32 = np.cumsum(terms.astype(np.float32), dtype=np.float32)
    return bool(np.array_equal(in_f32.astype(np.float64), np.cumsum(terms)))


@pytest.mark.parametrize("inp_bits,wgt_bits", [(8, 8), (8, 4), (4, 4), (16, 8), (16, 16)])
@pytest.mark.parametrize("log_block", range(1, 14))
def test_float32_bound_is_the_exactness_limit(inp_bits, wgt_bits, log_block):
    """The bound admits a width/block combination exactly when float32 sums its worst tile lane exactly
    (numpy's float32 cumulative sum is the independent judge)."""
    blk = 1 << log_block
    assert gemm_fast.float32_exact(inp_bits, wgt_bits, blk) == adversarial_sum_exact(inp_bits, wgt_bits, blk)


@pytest.mark.parametrize("preset_name", PRESETS)
def test_every_preset_takes_the_float32_path(preset_name):
    cfg = load_preset(preset_name)
    assert gemm_fast.float32_exact(cfg.inp_width, cfg.wgt_width, cfg.block_in)


RANDOM_PER_PRESET = 200


@pytest.mark.parametrize("preset_name", PRESETS)
@pytest.mark.parametrize("seed", range(RANDOM_PER_PRESET))
def test_random_programs_fast_equals_integer_kernel(preset_name, seed):
    """200 random programs per preset: functional bytes, and the integer kernel's records and cycles."""
    both_paths(generate(load_preset(preset_name), 50_000 + seed))


@pytest.mark.parametrize("preset_name", ["1x16x16", "2x16x16"])
def test_gemm_bound_stream_repeated_tiles(preset_name):
    """Inner loops with src and wgt factors 0: the products are computed once and added 64 times (to one row,
    and in the last GEMM to 64 consecutive rows)."""
    img = gemm_bound_image(load_preset(preset_name), gemms=2, repeat=64)
    both_paths(img)


def _gemm_program(cfg, seed, n_uops, iters, reset_between):
    """LOAD inputs, weights and ``n_uops`` uops; GEMM accumulate; optionally a reset GEMM on half the rows
    and a second accumulate; STORE every accumulator row the uops name."""
    rng = np.random.default_rng(seed)
    rows = min(cfg.acc_depth, cfg.inp_depth, 64)
    nw = min(cfg.wgt_depth, 16)
    x = rng.integers(-128, 128, (rows, cfg.batch, cfg.block_in)).astype(np.int8)
    w = rng.integers(-128, 128, (nw, cfg.block_out, cfg.block_in)).astype(np.int8)
    io, ii = iters
    uops = [(int(rng.integers(0, rows - io)), int(rng.integers(0, rows - io - ii)), int(rng.integers(0, nw - ii)))
            for _ in range(n_uops)]
    b = ProgramBuilder(cfg)
    xb, wb = b.data("x", x), b.data("w", w)
    out = b.output("y", rows * cfg.out_elem_bytes)
    b.load(memory_type=MEM_INP, dram_base=xb, x_size=rows)
    b.load(memory_type=MEM_WGT, dram_base=wb, x_size=nw, push_next=1)
    b.load(memory_type=MEM_UOP, dram_base=b.uops(uops), x_size=len(uops), pop_prev=1)
    nest = dict(uop_bgn=0, uop_end=len(uops), iter_out=io, iter_in=ii, dst_factor_out=1, dst_factor_in=0,
                src_factor_out=1, src_factor_in=1, wgt_factor_out=0, wgt_factor_in=1)
    b.gemm(**nest)
    if reset_between:
        b.gemm(reset_reg=1, uop_bgn=0, uop_end=len(uops) // 2, iter_out=io, iter_in=1, dst_factor_out=1)
        b.gemm(**nest)
    b.nop("compute", push_next=1)
    b.store(dram_base=out, x_size=rows, pop_prev=1, push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    return b.build()


@pytest.mark.parametrize("preset_name", PRESETS)
def test_reset_gemm_between_accumulates(preset_name):
    """A reset GEMM (integer kernel) between two fast-path accumulates over overlapping rows."""
    both_paths(_gemm_program(load_preset(preset_name), 3, n_uops=12, iters=(5, 3), reset_between=True))


def test_nest_larger_than_the_product_scratch_uses_the_integer_kernel():
    """One outer iteration with more distinct products than the slab holds takes the integer kernel."""
    cfg = load_config()
    n_uops = cfg.uop_depth
    ii = 3
    assert n_uops * ii * cfg.batch > gemm_fast.SCRATCH_ELEMS // cfg.block_in   # the fallback condition
    both_paths(_gemm_program(cfg, 4, n_uops=n_uops, iters=(2, ii), reset_between=False))


def test_forced_integer_path_on_a_compiled_layer():
    """``gemm="int"`` is the path a config failing the bound would take; on a real layer it matches."""
    from vtasim.compiler.ops import compile_workload
    img = compile_workload("resnet18.C10", load_config(), reduce=7).image
    ref, fast, slow = both_paths(img)
    assert dict(fast.outputs) == img.expected


def test_unknown_gemm_path_is_rejected():
    img = generate(load_config(), 1)
    with pytest.raises(SimError, match="gemm = 'float' is not one of auto, int, simd, blas"):
        run_image(img, gemm="float")


@pytest.mark.parametrize("log_block,log_batch", [(1, 0), (2, 0), (2, 1), (3, 1), (5, 0)])
def test_small_and_odd_lane_counts(log_block, log_batch):
    """Rows of 2, 4, 8 lanes and batches: the plain-loop and 8-lane steps of the fast path."""
    base = load_config()
    d_in = log_batch + log_block - base.LOG_BATCH - base.LOG_BLOCK      # keep every buffer's depth
    d_w = 2 * (log_block - base.LOG_BLOCK)
    cfg = base.replace(LOG_BLOCK=log_block, LOG_BATCH=log_batch, LOG_INP_BUFF_SIZE=base.LOG_INP_BUFF_SIZE + d_in,
                       LOG_WGT_BUFF_SIZE=base.LOG_WGT_BUFF_SIZE + d_w, LOG_ACC_BUFF_SIZE=base.LOG_ACC_BUFF_SIZE + d_in)
    for seed in range(12):
        both_paths(generate(cfg, 70_000 + seed))


def test_alu_vector_step_matches_the_scalar_rule():
    """vtasim.sim.cycle.simd.alu_tile{8,16} against kernels.alu_op lane by lane, on shift amounts around every
    boundary of the SHR rule and on extreme values, for every opcode, vector and immediate forms."""
    from numba import njit
    from vtasim.sim.cycle.kernels import alu_op, mix32, row_hash
    from vtasim.sim.cycle.simd import alu_tile8, alu_tile16

    @njit
    def vector(acc, a, s, op, use_imm, imm, width):
        if width == 16:
            return alu_tile16(acc, a, s, op, use_imm, imm, row_hash(a))
        return alu_tile8(acc, a, s, op, use_imm, imm, row_hash(a))

    @njit
    def scalar(acc, a, s, op, use_imm, imm, width):
        d = np.uint32(0)
        hb = row_hash(a)
        for ln in range(width):
            y = imm if use_imm else acc[s + np.uint64(ln)]
            v = alu_op(op, acc[a + np.uint64(ln)], y)
            acc[a + np.uint64(ln)] = v
            d = np.uint32(d + mix32(hb, np.uint32((np.uint64(ln) * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)), v))
        return d

    rng = np.random.default_rng(0)
    edges = np.array([-2**31, -2**31 + 1, -33, -32, -31, -1, 0, 1, 31, 32, 33, 2**31 - 1], np.int32)
    for width in (8, 16):
        for op in range(5):
            for use_imm in (False, True):
                for trial in range(20):
                    acc = rng.integers(-2**31, 2**31, 4 * width).astype(np.int32)
                    acc[width:2 * width] = rng.choice(edges, width) if trial % 2 else rng.integers(-40, 41, width)
                    imm = np.int32(rng.choice(edges) if trial % 3 else rng.integers(-40, 41))
                    a, s = np.uint64(0 if trial % 4 else width), np.uint64(width)     # s == a: in place
                    ref = acc.copy()
                    got = vector(acc, a, s, op, use_imm, imm, width)
                    want = scalar(ref, a, s, op, use_imm, imm, width)
                    assert np.array_equal(acc, ref) and int(got) == int(want), (width, op, use_imm, trial)
