"""The compiled event-skipping engine against a naive per-cycle reading of docs/timing.md
(tests/timing_reference.py) on random legal programs and timing parameter variants: same start,
end and dispatch cycle for every instruction, same total and same per-module breakdown."""

import pytest

from vtasim.hw.config import load_config
from vtasim.sim.cycle import run_image
from vtasim.sim.program import load_program
from vtasim.sim.programs.randprog import generate
from timing_reference import simulate

VARIANTS = {
    "default": {},
    "fast_dram_fetch1": dict(DRAM_LATENCY=1, FETCH_INSNS=1),
    "queue1_slow_dram": dict(CMD_QUEUE_DEPTH=1, DRAM_LATENCY=40),
    "wide_bus_burst1": dict(LOG_BUS_WIDTH=9, BURST_BEATS=1, GEMM_PIPE_DEPTH=1, ALU_PIPE_DEPTH=7),
    "queue2_burst4": dict(CMD_QUEUE_DEPTH=2, BURST_BEATS=4, FETCH_INSNS=2),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("seed", range(12))
def test_engine_matches_per_cycle_reference(variant, seed):
    cfg = load_config().replace(**VARIANTS[variant])
    img = generate(cfg, seed, blocks=(1, 3), max_iter=2, max_uops=3, max_rows=2)
    r = run_image(img)
    ref = simulate(cfg, load_program(img).fields, img.insn_addr)
    got = {x.program_index: (x.start_cycle, x.end_cycle) for x in r.trace}
    want = {j: (ref["start"][j], ref["end"][j]) for j in ref["end"]}
    assert got == want
    assert {j: int(d) for j, d in enumerate(r.dispatch_cycle)} == ref["dispatch"]
    assert r.cycles == ref["cycles"]
    assert r.breakdown == ref["breakdown"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_engine_matches_per_cycle_reference_many(variant):
    cfg = load_config().replace(**VARIANTS[variant])
    for seed in range(1000, 1150):
        img = generate(cfg, seed, blocks=(2, 5))
        r = run_image(img)
        ref = simulate(cfg, load_program(img).fields, img.insn_addr)
        assert {x.program_index: (x.start_cycle, x.end_cycle) for x in r.trace} == \
            {j: (ref["start"][j], ref["end"][j]) for j in ref["end"]}, seed
        assert r.breakdown == ref["breakdown"], seed
