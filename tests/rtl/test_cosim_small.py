"""Short co-simulations that CI runs on every build: a small CMD_QUEUE_DEPTH (the queues fill and
fetch stalls) and a GEMM program on every preset (batch 2 included).  RTL on Icarus (a build takes
about a second, once per config per session through the build cache); the reference is the cycle
engine (bytes, retire records, cycles) and the program's numpy outputs."""

from __future__ import annotations

import pytest

from vtasim.hw.config import PRESETS, load_preset

pytestmark = pytest.mark.rtl


def _gemm_pair(cfg, n0: int, n1: int):
    """GEMM with n0 uop iterations; GEMM with n1; FINISH (docs/timing.md 10 I; uop memory is zero)."""
    from vtasim.sim.builder import ProgramBuilder
    b = ProgramBuilder(cfg)
    b.gemm(uop_bgn=0, uop_end=1, iter_in=n0)
    b.gemm(uop_bgn=0, uop_end=1, iter_in=n1)
    b.finish()
    return b.build()


def test_full_command_queue_timeline_on_the_rtl(cfg, same_run):
    """docs/timing.md 10 I on the RTL, CMD_QUEUE_DEPTH = 1: GEMM1 is dispatched at 24, the cycle after
    GEMM0 left the full queue (not at 23, the cycle it left), FINISH at 39; cycles 46."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.rtl import run_image as rtl_run
    image = _gemm_pair(cfg.replace(CMD_QUEUE_DEPTH=1), 10, 1)
    rtl = rtl_run(image, sim="icarus")
    assert rtl.dispatch_cycle.tolist() == [22, 24, 39]
    assert [(r.start_cycle, r.end_cycle) for r in rtl.trace] == [(23, 37), (38, 43), (44, 45)]
    assert rtl.cycles == 46
    same_run(image, run_image(image), rtl)


def test_queue_filling_programs_match_the_cycle_engine(cfg, same_run):
    """CMD_QUEUE_DEPTH = 2 on random programs: fetch stalls on full queues (the model's breakdown says
    so) and the RTL dispatches and retires every instruction in the cycle engine's cycles (a queue that
    takes an entry in the cycle its head leaves while full dispatches a cycle early)."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.programs.randprog import generate
    from vtasim.sim.rtl import run_images
    small = cfg.replace(CMD_QUEUE_DEPTH=2)
    images = [generate(small, s) for s in range(3000, 3004)]
    model = [run_image(im) for im in images]
    assert all(m.breakdown["fetch"]["queue_stall"] > 0 for m in model)
    rtl = run_images(images, sim="icarus", errors="return")
    for image, exp, act in zip(images, model, rtl):
        same_run(image, exp, act)
        assert act.dispatch_cycle.tolist() == exp.dispatch_cycle.tolist()


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_on_every_preset(preset, same_run):
    """TVM's GEMM unit test on each preset: the RTL's bytes equal numpy's and the cycle engine's, and so
    do its retire records (on 2x16x16 every GEMM uop reads two input rows: the batch offset)."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    from vtasim.sim.rtl import run_image as rtl_run
    cfg = load_preset(preset)
    image = UNIT_PROGRAMS["gemm"](cfg)
    assert image.expected
    same_run(image, run_image(image), rtl_run(image, sim="icarus"))


def test_burst_split_at_the_aligned_boundary_on_the_rtl(cfg):
    """tests/test_cycle_timing.py's 16-word LOAD ACC from mid-block on the RTL: two 8-beat bursts
    (22 -> 46, 46 -> 70 = e), FINISH (71, 72), cycles 73 (capping alone would end the load at 38)."""
    import numpy as np

    from vtasim.hw.config import MEM_ACC
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.sim.rtl import run_image as rtl_run
    b = ProgramBuilder(cfg)
    a = b.data("a", np.arange(4 * 16, dtype=np.int32))
    b.load(memory_type=MEM_ACC, dram_base=a.elem(MEM_ACC, 1), x_size=2)
    b.finish()
    rtl = rtl_run(b.build(), sim="icarus")
    assert [(r.start_cycle, r.end_cycle) for r in rtl.trace] == [(21, 70), (71, 72)]
    assert rtl.cycles == 73
