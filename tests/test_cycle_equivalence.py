"""Cycle engine vs the functional model (the data oracle, on its own numpy executor: independent of the
cycle engine's kernels): byte-identical DRAM, same counters and leftover tokens, on random legal programs
of every preset, plus the run invariants (cycles >= GEMM uops, breakdown sums to cycles, same input ->
same trace).  The unit programs (spec 7.1/7.2) run on every engine in ``test_engines.py``."""

import pytest

from vtasim.hw.config import PRESETS, load_config, load_preset
from vtasim.sim import functional
from vtasim.sim.cycle import run_image
from vtasim.sim.programs.randprog import generate
from engine_checks import cycle_invariants, same_run

RANDOM_PER_PRESET = 200


def check_random(cfg, seed, **knobs):
    img = generate(cfg, seed, **knobs)
    r = run_image(img)
    same_run(img, functional.run_image(img, executor="numpy"), r, timing=False)
    cycle_invariants(img, r)


@pytest.mark.parametrize("preset_name", PRESETS)
@pytest.mark.parametrize("seed", range(RANDOM_PER_PRESET))
def test_random_program(preset_name, seed):
    check_random(load_preset(preset_name), seed)


@pytest.mark.slow
@pytest.mark.parametrize("preset_name", PRESETS)
def test_random_programs_many_large(preset_name):
    for seed in range(10_000, 12_000):
        check_random(load_preset(preset_name), seed, blocks=(4, 12), region=48, max_iter=6, max_uops=8, max_pad=4,
                     max_rows=6)


@pytest.mark.parametrize("kind", ["gemm", "gemm_reset", "alu"])
@pytest.mark.parametrize("iters", [(0, 2), (2, 0)])
def test_empty_loop_checks_no_index(kind, iters):
    """A loop nest with an iteration count of 0 executes nothing, so no index is out of range even
    when ``uop + (iter - 1) * factor`` (with iter - 1 = -1 for the empty count) would be."""
    from vtasim.hw.config import MEM_UOP
    from vtasim.sim.builder import ProgramBuilder
    cfg = load_config()
    b = ProgramBuilder(cfg)
    u = b.uops([(1, 1, 1)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    # the factor of the non-empty loop is large, the other 0: (iter - 1) * factor + 1 = depth
    f_out, f_in = (0, cfg.acc_depth - 1) if iters[0] == 0 else (cfg.acc_depth - 1, 0)
    big = dict(dst_factor_out=f_out, dst_factor_in=f_in, src_factor_out=f_out, src_factor_in=f_in)
    loop = dict(uop_bgn=0, uop_end=1, iter_out=iters[0], iter_in=iters[1], **big)
    if kind == "alu":
        b.alu(alu_opcode=0, **loop)
    else:
        b.gemm(reset_reg=int(kind == "gemm_reset"), **loop)
    b.finish()
    img = b.build()
    same_run(img, functional.run_image(img, executor="numpy"), run_image(img), timing=False)
