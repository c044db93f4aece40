"""Cycle engine vs the functional model (the data oracle): byte-identical DRAM, same counters and
leftover tokens, on every unit program (spec 7.1/7.2) and on random legal programs of every preset;
plus the run invariants (cycles >= GEMM uops, breakdown sums to cycles, same input -> same trace)."""

import numpy as np
import pytest

from hw.config import default_config_path, load_config
from hw.isa import OP_GEMM
from sim import functional
from sim.cycle import run_image
from sim.randprog import generate
from sim.unit_programs import UNIT_PROGRAMS, build

PRESETS = ["default", "1x16x16", "2x16x16", "1x32x32", "1x8x8"]
RANDOM_PER_PRESET = 200


def preset(name):
    if name == "default":
        return load_config()
    return load_config(default_config_path().parent / "presets" / f"{name}.json")


_CFGS = {}


def cfg_of(name):
    if name not in _CFGS:
        _CFGS[name] = preset(name)
    return _CFGS[name]


def gemm_uops(image, result) -> int:
    """GEMM uops executed (reset ones included), from the decoded stream of retired instructions."""
    from sim.program import load_program
    f = load_program(image).fields
    g = f["opcode"] == OP_GEMM
    n = f["iter_out"] * f["iter_in"] * np.maximum(0, f["uop_end"] - f["uop_bgn"])
    return int(n[g].sum())


def check_against_functional(image, result, ref):
    assert np.array_equal(result.dram, ref.dram), \
        f"DRAM differs at bytes {np.flatnonzero(result.dram != ref.dram)[:8].tolist()}"
    assert result.outputs == ref.outputs
    assert result.counters == ref.counters
    assert result.leftover_tokens == ref.leftover_tokens


def check_invariants(image, result):
    assert result.cycles >= gemm_uops(image, result)
    for module, buckets in result.breakdown.items():
        assert sum(buckets.values()) == result.cycles, module
    assert len(result.trace) == image.insn_count
    ends = [(r.end_cycle, ("load", "compute", "store").index(r.module)) for r in result.trace]
    assert ends == sorted(ends) and len(set(ends)) == len(ends)
    assert result.trace[-1].end_cycle == result.cycles - 1
    for r in result.trace:
        assert r.start_cycle < r.end_cycle
        assert r.start_cycle > result.extra["dispatch_cycle"][r.program_index]
    again = run_image(image)
    assert again.trace == result.trace and again.breakdown == result.breakdown


@pytest.mark.parametrize("preset_name", ["default", "1x8x8", "2x16x16", "1x32x32"])
@pytest.mark.parametrize("name", list(UNIT_PROGRAMS))
def test_unit_program(preset_name, name):
    cfg = cfg_of(preset_name)
    img = build(name, cfg)
    r = run_image(img)
    ref = functional.run_image(img)
    check_against_functional(img, r, ref)
    for out, want in img.expected.items():
        assert r.outputs[out] == want, out
    check_invariants(img, r)


def check_random(cfg, seed, **knobs):
    img = generate(cfg, seed, **knobs)
    r = run_image(img)
    check_against_functional(img, r, functional.run_image(img))
    check_invariants(img, r)


@pytest.mark.parametrize("preset_name", PRESETS)
@pytest.mark.parametrize("seed", range(RANDOM_PER_PRESET))
def test_random_program(preset_name, seed):
    check_random(cfg_of(preset_name), seed)


@pytest.mark.slow
@pytest.mark.parametrize("preset_name", PRESETS)
def test_random_programs_many_large(preset_name):
    for seed in range(10_000, 12_000):
        check_random(cfg_of(preset_name), seed, blocks=(4, 12), region=48, max_iter=6, max_uops=8, max_pad=4,
                     max_rows=6)


@pytest.mark.parametrize("kind", ["gemm", "gemm_reset", "alu"])
@pytest.mark.parametrize("iters", [(0, 2), (2, 0)])
def test_empty_loop_checks_no_index(kind, iters):
    """A loop nest with an iteration count of 0 executes nothing, so no index is out of range even
    when ``uop + (iter - 1) * factor`` (with iter - 1 = -1 for the empty count) would be."""
    from hw.config import MEM_UOP
    from sim.builder import ProgramBuilder
    cfg = cfg_of("default")
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
    check_against_functional(img, run_image(img), functional.run_image(img))
