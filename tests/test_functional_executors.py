"""The functional engine's executors are one model: the compiled one (the cycle engine's data kernels applied
in the scheduler's order, ``executor="compiled"``) gives the numpy executor's DRAM, outputs, counters,
leftover tokens and execution order, and raises the same errors (a run that fails is run again on the
numpy executor, so an error of an earlier instruction comes before a deadlock); ``"auto"`` picks the numpy
one for nests it counts rather than walks."""

import pytest

from vtasim.hw.config import MEM_UOP, PRESETS, load_config, load_preset
from vtasim.hw.isa import ALU_ADD
from vtasim.sim import functional
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import ProgramError, SimError
from vtasim.sim.programs.randprog import generate
from engine_checks import same_run

CFG = load_config()


def both(img):
    ref, fast = functional.run_image(img, executor="numpy"), functional.run_image(img, executor="compiled")
    same_run(img, ref, fast, timing=False)
    assert fast.order == ref.order
    return ref


@pytest.mark.parametrize("preset_name", PRESETS)
@pytest.mark.parametrize("seed", range(25))
def test_random_large_programs(preset_name, seed):
    both(generate(load_preset(preset_name), 30_000 + seed, blocks=(4, 12), region=48, max_iter=6, max_uops=8,
                  max_pad=4, max_rows=6))


@pytest.mark.parametrize("layer", ["C4", "C7", "C10"])
def test_resnet_layers(layer):
    from vtasim.compiler.ops import compile_workload
    img = compile_workload(f"resnet18.{layer}", CFG, reduce=4).image
    ref = both(img)
    assert ref.counters["gemm_counter"] > 0 and img.expected


def test_an_earlier_error_comes_before_a_deadlock():
    """ALU dst out of range at instruction 1, then a compute NOP that waits forever: both executors raise the
    ProgramError (the compiled scheduler finds the deadlock first; the numpy rerun reports the earlier error)."""
    b = ProgramBuilder(CFG)
    u = b.uops([(CFG.acc_depth - 1, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.alu(alu_opcode=ALU_ADD, use_imm=1, imm=1, uop_end=1, iter_in=2, dst_factor_in=1)
    b.nop("compute", pop_prev=1)
    b.finish()
    img = b.build()
    raised = []
    for executor in ("compiled", "numpy"):
        with pytest.raises(ProgramError, match=r"instruction 1: ALU dst index") as e:
            functional.run_image(img, executor=executor)
        raised.append(str(e.value))
    assert raised[0] == raised[1]


def test_unknown_executor():
    b = ProgramBuilder(CFG)
    b.finish()
    with pytest.raises(SimError, match="executor = 'fast' is not one of auto, compiled, numpy"):
        functional.run_image(b.build(), executor="fast")


@pytest.mark.parametrize("kind", ["gemm", "alu-imm", "alu-vec"])
def test_auto_counts_repeated_loops_on_the_numpy_executor(kind):
    """The largest legal nests (every iteration on the same rows): "auto" takes the numpy executor where it
    counts the repeated loops (GEMM, immediate ALU) and the compiled one where both walk every uop (the
    dependent vector-ALU chain); the rule sees only the instruction fields."""
    from vtasim.sim.programs.synthetic import maximal_nest_image
    from vtasim.sim.program import load_program
    img = maximal_nest_image(CFG, kind, uops=1)
    assert functional._numpy_pays(load_program(img)) == (kind != "alu-vec")
    from vtasim.sim.programs.synthetic import gemm_bound_image
    assert not functional._numpy_pays(load_program(gemm_bound_image(CFG)))     # BLAS grouping reuses products
    small = generate(CFG, 7)
    assert not functional._numpy_pays(load_program(small))
    same_run(small, functional.run_image(small, executor="numpy"), functional.run_image(small), timing=False)
