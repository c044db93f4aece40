"""The fuzz shrinker (sim/scale/shrink.py) against a mutated model, without a simulator.

The "device under test" is the functional model reading every immediate ALU operand as imm + 1 (a
decoder bug); the reference is the cycle engine on the unmodified program.  Checks are independent of
the shrinker: the result is re-run through the mutant and the static checks / both engines here, it is
1-minimal (dropping any one more instruction makes it illegal or agree), and it is smaller."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vtasim.hw.config import load_preset
from vtasim.hw.isa import OP_ALU, OP_FINISH, decode_stream
from vtasim.sim.engines import run_engine
from vtasim.sim.program import load_program
from vtasim.sim.programs.randprog import generate
from vtasim.sim.scale.shrink import legal_run, shrink, with_insns

CFG = load_preset("1x8x8")


def _mutant(image):
    """The functional model with the imm+1 decoder bug."""
    insns = decode_stream(image.cfg, image.insn_bytes())
    insns = [replace(i, imm=i.imm + 1) if i.opcode == OP_ALU and i.use_imm else i for i in insns]
    return run_engine("functional", with_insns(image, insns))


def _diverges(image) -> bool:
    return _mutant(image).outputs != run_engine("cycle", image).outputs


def _still_fails(pairs):
    return [_mutant(img).outputs != exp.outputs for img, exp in pairs]


def _seeds_that_diverge(n):
    return [s for s in range(40) if _diverges(generate(CFG, s))][:n]


def test_with_insns_of_the_same_stream_runs_identically():
    image = generate(CFG, 7)
    same = with_insns(image, decode_stream(CFG, image.insn_bytes()))
    a, b = run_engine("cycle", image), run_engine("cycle", same)
    assert same.insn_count == image.insn_count and a.cycles == b.cycles and bytes(a.dram) == bytes(b.dram)
    assert list(a.trace) == list(b.trace)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_shrunk_program_still_diverges_is_legal_and_minimal(k):
    seed = _seeds_that_diverge(3)[k]
    image = generate(CFG, seed)
    s = shrink(image, _still_fails)
    small = s.image
    insns = decode_stream(CFG, small.insn_bytes())
    # still diverges, recomputed here
    assert _diverges(small)
    # legal: static checks, both engines run it to FINISH and agree with each other
    load_program(small)
    f, c = run_engine("functional", small), run_engine("cycle", small)
    assert f.outputs == c.outputs and bytes(f.dram) == bytes(c.dram)
    assert insns[-1].opcode == OP_FINISH
    # smaller, and the reported sizes are the real ones
    before = decode_stream(CFG, image.insn_bytes())
    assert (s.insns_before, s.insns_after) == (len(before), len(insns)) and len(insns) < len(before)
    assert s.uops_after == sum(i.uop_count for i in insns) <= s.uops_before == sum(i.uop_count for i in before)
    assert s.tried >= s.calls >= 1
    # 1-minimal: no single instruction can go while the program stays legal and diverges
    for j in range(len(insns) - 1):
        cand = with_insns(image, insns[:j] + insns[j + 1:])
        assert legal_run(cand) is None or not _diverges(cand), f"instruction {j} of {len(insns)} could go"


def test_shrink_refuses_an_illegal_start():
    """A program with two FINISHes fails the static checks: shrink says so instead of shrinking it."""
    from vtasim.sim.errors import ProgramError, SimError
    image = generate(CFG, 3)
    fin = decode_stream(CFG, image.insn_bytes())[-1]
    bad = with_insns(image, [fin, fin])
    with pytest.raises(ProgramError, match="FINISH must be last"):
        load_program(bad)
    assert legal_run(bad) is None
    with pytest.raises(SimError, match="not legal"):
        shrink(bad, _still_fails)
