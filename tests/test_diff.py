"""vtasim.sim.diff without a simulator: a run compared with a copy of itself carrying known mutations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_UOP, load_config
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.diff import compare, machine_state
from vtasim.sim.program import load_program
from vtasim.sim.result import RetireRecord, RunResult


@pytest.fixture(scope="module")
def case():
    """A 5-instruction program, its functional run and a hand-made trace of it (timing.md shape)."""
    from vtasim.sim.functional import run_image
    cfg = load_config()
    b = ProgramBuilder(cfg)
    acc = b.data("acc", np.arange(4 * cfg.acc_elem_bytes // 4, dtype="<i4"))
    out = b.output("out", 4 * cfg.out_elem_bytes)
    u = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.load(memory_type=MEM_ACC, dram_base=acc, x_size=4)
    b.alu(alu_opcode=2, use_imm=1, imm=3, uop_end=1, iter_in=4, dst_factor_in=1, src_factor_in=1, push_next=1)
    b.store(dram_base=out, x_size=4, pop_prev=1, push_prev=1)
    b.finish(pop_next=1)
    image = b.build()
    r = run_image(image)
    trace = [RetireRecord("compute", 0, 0, 0, 21, 39, 0x11), RetireRecord("compute", 1, 1, 0, 40, 70, 0x22),
             RetireRecord("compute", 2, 2, 4, 71, 79, 0x33), RetireRecord("store", 0, 3, 1, 80, 100, 0x44),
             RetireRecord("compute", 3, 4, 3, 101, 102, 0)]
    disp = np.array([20, 21, 22, 23, 24])
    run = RunResult("cycle", r.dram.copy(), r.counters, r.outputs, cycles=103, trace=trace,
                    dispatch_cycle=disp)
    return image, run, out.addr


def _mutant(run, trace=None, dram=None, cycles=None):
    return dataclasses.replace(run, engine="rtl", trace=trace if trace is not None else list(run.trace),
                               dram=dram if dram is not None else run.dram.copy(),
                               cycles=cycles if cycles is not None else run.cycles)


def test_identical_runs_match(case):
    image, run, _ = case
    d = compare(run, _mutant(run), image)
    assert d.ok and d.first is None and not d.data
    assert (d.matched, d.mismatched) == (5 + 1, 0)          # 5 records + 1 output region
    assert d.report().endswith("5 instructions and 1 output matched, 0 mismatched")


def test_extra_cycle_is_reported_at_its_instruction_and_cycle(case):
    image, run, _ = case
    t = list(run.trace)
    # One extra cycle in the ALU (instruction 2): it and everything after it shift by one.
    t[2] = dataclasses.replace(t[2], end_cycle=80)
    t[3] = dataclasses.replace(t[3], start_cycle=81, end_cycle=101)
    t[4] = dataclasses.replace(t[4], start_cycle=102, end_cycle=103)
    d = compare(run, _mutant(run, trace=t, cycles=104), image)
    assert not d.ok
    assert d.first.program_index == 2 and d.first.cycle == 79 and d.first.fields == ("end_cycle",)
    text = d.report()
    assert "FIRST DIVERGENCE at cycle 79: compute module, instruction 2" in text
    assert "ALU add imm 3" in text
    assert text.endswith("2 instructions and 1 output matched, 3 mismatched")


def test_data_bit_is_reported_with_lanes(case):
    image, run, out_addr = case
    dram = run.dram.copy()
    dram[out_addr + 5] ^= 1
    t = list(run.trace)
    t[3] = dataclasses.replace(t[3], digest=0x45)
    d = compare(run, _mutant(run, trace=t, dram=dram), image)
    assert d.first.program_index == 3 and d.first.fields == ("digest",) and d.first.cycle == 100
    assert [x.name for x in d.data] == ["out"] and d.data[0].offset == 5
    assert d.data[0].expected[5] != d.data[0].actual[5]
    # The functional model re-run shows the bytes instruction 3 (the STORE) wrote: acc 0..15 + 3.
    assert d.expected_lanes.endswith("[" + " ".join(str(v) for v in range(3, 19)) + "]")


def test_machine_state_follows_the_contract(case):
    image, run, _ = case
    prog = load_program(image)
    # Cycle 80: the ALU (push_next -> g2s) ended at 79, the STORE popped g2s at 80 (not yet visible).
    st = machine_state(prog, run.trace, run.dispatch_cycle, 80)
    assert st["tokens"] == {"l2g": 0, "g2l": 0, "s2g": 0, "g2s": 1}
    assert st["running"]["store"].program_index == 3
    st = machine_state(prog, run.trace, run.dispatch_cycle, 81)
    assert st["tokens"]["g2s"] == 0
    # Queues at cycle 22: dispatched before 22 = insns 0, 1 (compute); started before 22 = insn 0.
    st = machine_state(prog, run.trace, run.dispatch_cycle, 22)
    assert st["queues"] == {"load": 0, "compute": 1, "store": 0}


def test_the_tally_names_instructions_and_outputs(case):
    """One retire record per instruction: the count next to 'instructions' is the image's instruction
    count; a data-only diff (against the functional model) counts outputs alone."""
    image, run, _ = case
    d = compare(run, _mutant(run), image)
    assert d.report().splitlines()[-1] == f"{image.insn_count} instructions and {len(image.outputs)} output matched, 0 mismatched"
    d = compare(run, _mutant(run), image, timing=False)
    assert d.report().splitlines()[-1] == "1 output matched, 0 mismatched"
