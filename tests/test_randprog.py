"""The random legal program generator: deterministic per seed, legal (static checks, no deadlock,
no race: bytes independent of the timing parameters), and covering every functional bin."""

import numpy as np
import pytest

from vtasim.hw.config import load_preset
from vtasim.sim import functional
from vtasim.sim.cycle import run_image
from vtasim.sim.program import load_program
from vtasim.sim.programs.randprog import ALL_BINS, coverage_bins, generate

EXPECTED_BINS = (
    {f"op:{n}" for n in ("LOAD", "STORE", "GEMM", "ALU", "FINISH")}
    | {f"load:{n}" for n in ("UOP", "WGT", "INP", "ACC", "ACC_8BIT")}
    | {f"nop:{m}" for m in ("load", "compute", "store")}
    | {f"alu:{op}:{k}" for op in ("min", "max", "add", "shr", "mul") for k in ("imm", "vec")}
    | {"alu:shr:negative", "alu:shr:beyond31"}
    | {f"pad:{p}" for p in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")}
    | {"dma:multi_row", "dma:strided", "gemm:reset", "loop:empty", "loop:2d", "loop:multi_uop"}
    | {"flag:load:pop_next", "flag:load:push_next", "flag:store:pop_prev", "flag:store:push_prev"}
    | {f"flag:compute:{f}" for f in ("pop_prev", "pop_next", "push_prev", "push_next")}
)


def test_same_seed_same_image(cfg):
    a, b = generate(cfg, 7), generate(cfg, 7)
    assert a.insn_bytes() == b.insn_bytes()
    assert np.array_equal(a.dram(), b.dram())
    assert generate(cfg, 8).insn_bytes() != a.insn_bytes()


def test_unknown_knob_is_refused(cfg):
    with pytest.raises(ValueError, match="unknown randprog knob 'blokcs'"):
        generate(cfg, 0, blokcs=3)


def test_coverage_over_200_seeds(cfg):
    total = {}
    for seed in range(200):
        for k, v in coverage_bins(generate(cfg, seed)).items():
            total[k] = total.get(k, 0) + v
    missing = EXPECTED_BINS - set(total)
    assert not missing, f"bins never hit: {sorted(missing)}"
    assert set(ALL_BINS) == EXPECTED_BINS and set(total) <= EXPECTED_BINS


@pytest.mark.parametrize("preset", ["1x8x8", "2x16x16", "1x32x32"])
def test_programs_are_legal_on_presets(preset):
    pcfg = load_preset(preset)
    for seed in range(30):
        img = generate(pcfg, seed)
        load_program(img)                                  # static checks pass
        functional.run_image(img)                          # no deadlock, no index error


def test_leftover_knob(cfg):
    assert functional.run_image(generate(cfg, 3, leftover=False)).leftover_tokens == {}
    left = functional.run_image(generate(cfg, 3, leftover=True, blocks=(3, 3))).leftover_tokens
    assert set(left) == {"g2l"} and left["g2l"] >= 1


@pytest.mark.parametrize("seed", range(40))
def test_bytes_do_not_depend_on_timing(cfg, seed):
    """No races: latency, queue depth and fetch width change the schedule, never the bytes."""
    base = run_image(generate(cfg, seed))
    for variant in (dict(DRAM_LATENCY=1, FETCH_INSNS=1), dict(DRAM_LATENCY=200, CMD_QUEUE_DEPTH=1),
                    dict(LOG_BUS_WIDTH=9, BURST_BEATS=1, GEMM_PIPE_DEPTH=16)):
        other = run_image(generate(cfg.replace(**variant), seed))
        assert np.array_equal(other.dram, base.dram), variant
        timing = lambda r: [(x.program_index, x.start_cycle, x.end_cycle) for x in r.trace]
        assert timing(other) != timing(base), variant      # the schedule did change
