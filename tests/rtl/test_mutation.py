"""Mutation tests of the co-verification: a copy of the RTL with one injected bug must make
``diff`` name the first divergent instruction, its module and its cycle.

The mutants are built with Icarus (a build takes about a second); the program is a unit program
with ALU work, and where the bug must show is worked out from the cycle engine's trace (the
reference), not from the mutant."""

from __future__ import annotations

import shutil

import pytest

from vtasim.hw.isa import OP_ALU

pytestmark = pytest.mark.rtl

TENSOR = "vta_tensor.v"
# One extra cycle for every ALU instruction: its tail is one cycle longer than ALU_PIPE_DEPTH.
EXTRA_CYCLE = ("tail <= r_alu ? ALU_PD : GEMM_PD;", "tail <= r_alu ? ALU_PD + 8'd1 : GEMM_PD;")
# One wrong data bit: bit 0 of the first lane of every ALU result is flipped.
WRONG_BIT = ("assign acc_wd = r_alu ? alu_out :",
             "assign acc_wd = r_alu ? (alu_out ^ {{(`VTA_ACC_ELEM_BITS-1){1'b0}}, 1'b1}) :")


def _mutant(tmp_path, edit):
    from vtasim.sim.rtl.runner import default_rtl_dir
    rtl = tmp_path / "rtl"
    shutil.copytree(default_rtl_dir(), rtl)
    path = rtl / TENSOR
    text = path.read_text()
    old, new = edit
    assert text.count(old) == 1, f"mutation site {old!r} not found once in {TENSOR}: update the test"
    path.write_text(text.replace(old, new))
    return rtl


@pytest.fixture(scope="module")
def program(cfg):
    """A unit program with ALU instructions, its cycle-engine run, and the first ALU that works."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.program import load_program
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    image = UNIT_PROGRAMS["relu"](cfg)
    ref = run_image(image)
    f = load_program(image).fields
    work = lambda i: f["iter_out"][i] * f["iter_in"][i] * max(0, f["uop_end"][i] - f["uop_bgn"][i])
    alus = [r for r in ref.trace if r.opcode == OP_ALU and work(r.program_index) > 0]
    first = min(alus, key=lambda r: r.end_cycle)
    return image, ref, first


@pytest.fixture(autouse=True)
def _private_build_cache(tmp_path, monkeypatch):
    """Mutant builds go to a temporary cache, never next to the real RTL's builds."""
    monkeypatch.setenv("VTASIM_BUILD_DIR", str(tmp_path / "builds"))


def _diff(image, rtl_dir):
    from vtasim.sim.cli.diff import diff_image
    return diff_image(image, against="cycle", sim="icarus", rtl_dir=rtl_dir, reproduce="vtasim diff IMAGE")


@pytest.mark.parametrize("edit, fields, late", [(EXTRA_CYCLE, ("end_cycle",), 1), (WRONG_BIT, ("digest",), 0)],
                         ids=["extra_cycle", "wrong_bit"])
def test_mutant_is_found(program, tmp_path, edit, fields, late):
    """The first working ALU is where either bug shows: at its end cycle, in the compute module;
    the extra cycle moves its end, the wrong bit only its digest (and the stored bytes)."""
    image, ref, first = program
    d = _diff(image, _mutant(tmp_path, edit))
    assert not d.ok
    assert d.first.program_index == first.program_index
    assert d.first.expected.module == d.first.actual.module == "compute"
    assert d.first.cycle == first.end_cycle
    assert d.first.actual.end_cycle == first.end_cycle + late
    assert d.first.fields == fields
    text = d.report()
    assert (f"FIRST DIVERGENCE at cycle {first.end_cycle}: compute module, instruction "
            f"{first.program_index}") in text
    assert " 0 mismatched" not in text.splitlines()[-1]
    if edit is WRONG_BIT:
        assert d.data and d.data[0].name in {o.name for o in image.outputs}
        assert "expected lanes after it (functional model" in text


def test_unmutated_copy_matches(program, tmp_path):
    """The copy mechanism itself changes nothing: an unedited copy agrees with the model."""
    from vtasim.sim.rtl.runner import default_rtl_dir
    image, ref, _ = program
    rtl = tmp_path / "rtl"
    shutil.copytree(default_rtl_dir(), rtl)
    assert _diff(image, rtl).ok


def test_hung_rtl_is_diffed_up_to_where_it_stopped(program, tmp_path):
    """A token counter that reports 'available' only above 1 deadlocks the RTL: the testbench's deadlock
    detector stops it, its report names an instruction queued with its token available (the model's
    counter says so) that the RTL did not start, and the diff points at the first instruction the RTL
    never retired, one that pops a token."""
    from vtasim.sim.program import load_program
    image, ref, _ = program
    rtl = tmp_path / "rtl"
    from vtasim.sim.rtl.runner import default_rtl_dir
    shutil.copytree(default_rtl_dir(), rtl)
    path = rtl / "vta_tokens.v"
    old = "assign avail[t] = (cnt != 17'd0);"
    assert path.read_text().count(old) == 1, "mutation site not found in vta_tokens.v: update the test"
    path.write_text(path.read_text().replace(old, "assign avail[t] = (cnt > 17'd1);"))
    d = _diff(image, rtl)
    assert not d.ok and d.error.startswith("deadlock at cycle ") and "not started with its tokens available" in d.error
    f = load_program(image).fields
    assert d.first.fields == ("missing",)
    i = d.first.program_index
    assert f["pop_prev"][i] or f["pop_next"][i]
    text = d.report()
    assert text.splitlines()[1].startswith("RTL ERROR: deadlock at cycle")
    assert f"instruction {i}" in text
