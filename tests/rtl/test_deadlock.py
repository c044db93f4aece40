"""Deadlocks, the watchdog and long programs on the RTL (docs/cosim.md "Deadlocks and the watchdog").

A deadlocked program ends with the cycle engine's DeadlockError line and report (the reference),
found by the testbench's detector within cycles, not by the watchdog; the detector's bound (a live
program is quiet for at most one cycle in a row) holds on every unit program and on random programs;
the watchdog defaults come from the cycle engine's count (diff, fuzz) or the 32-bit counter (run)."""

from __future__ import annotations

import pytest

from vtasim.hw.config import MEM_UOP
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import DeadlockError, RtlStopped, SimError

pytestmark = pytest.mark.rtl

# docs/cosim.md: the longest quiet stretch of a live program (derived from docs/timing.md 2, 3, 5, 6)
LIVE_QUIET_BOUND = 1
# Far below the old 100 M default and far above any detection: a detector that does not fire makes the
# test fail on the watchdog (RtlWatchdog), never hang.
BUDGET = 1_000_000


def _unbalanced(cfg):
    b = ProgramBuilder(cfg)
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1)
    b.nop("compute", pop_prev=1)         # the second l2g token is never pushed
    b.finish()
    return b.build()


def _never_pushed(cfg):
    b = ProgramBuilder(cfg)
    b.nop("compute", pop_prev=1)
    b.finish()
    return b.build()


def _fetch_blocked(cfg):
    """CMD_QUEUE_DEPTH = 2: the load queue holds a NOP waiting for g2l and one more; the compute NOP
    that would push g2l sits behind a third load NOP that fetch cannot dispatch."""
    b = ProgramBuilder(cfg.replace(CMD_QUEUE_DEPTH=2))
    b.nop("load", pop_next=1)
    b.nop("load")
    b.nop("load")
    b.nop("compute", push_prev=1)
    b.finish()
    return b.build()


DEADLOCKS = {"never_pushed": _never_pushed, "unbalanced": _unbalanced, "fetch_blocked": _fetch_blocked}


def _model_deadlock(image) -> DeadlockError:
    from vtasim.sim.cycle import run_image
    with pytest.raises(DeadlockError) as ei:
        run_image(image)
    return ei.value


@pytest.mark.parametrize("name", DEADLOCKS)
def test_deadlock_is_the_models_report(cfg, name):
    """Same one line, same cycle, same multi-line report as the cycle engine; the RTL stopped through
    its detector (an RtlDeadlock carrying what retired), not through the watchdog."""
    from vtasim.sim.rtl import run_images
    from vtasim.sim.rtl.results import RtlDeadlock
    image = DEADLOCKS[name](cfg)
    model = _model_deadlock(image)
    rtl = run_images([image], sim="icarus", max_cycles=BUDGET, errors="return")[0]
    assert isinstance(rtl, RtlDeadlock), f"{type(rtl).__name__}: {rtl}"
    assert isinstance(rtl, DeadlockError) and isinstance(rtl, RtlStopped)
    assert str(rtl) == str(model)
    assert rtl.report == model.report
    assert rtl.stop_cycle == int(str(model).split()[3].rstrip(":"))
    if name == "fetch_blocked":
        assert "fetch blocked on full load queue at insn 2" in str(rtl)


def test_deadlock_cli_is_one_line_like_the_cycle_engine(cfg, tmp_path, capsys):
    """`vtasim run --engine rtl` on a deadlock: exit 2, the cycle engine's error line; -v adds its report.
    The default watchdog (no --max-cycles) is the full 32-bit range: only the detector can end this."""
    from vtasim.sim.cli import main
    img = tmp_path / "img"
    _never_pushed(cfg).save(img)
    assert main(["run", str(img), "--engine", "cycle"]) == 2
    want = capsys.readouterr().err.splitlines()
    assert len(want) == 1 and want[0].startswith("vtasim: error: deadlock at cycle 22: compute insn 0 needs l2g")
    assert main(["-v", "run", str(img), "--engine", "rtl", "--sim", "icarus"]) == 2
    got = capsys.readouterr().err.splitlines()
    assert got[0] == want[0]
    assert got[1:] == _model_deadlock(_never_pushed(cfg)).report.splitlines()


def test_live_programs_stay_within_the_quiet_bound(cfg):
    """The testbench's longest quiet stretch is at most the derived bound on every unit program and on
    random programs (so the detector, at 4 cycles, never stops a live program), and those runs end
    in the cycle engine's cycle count."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.programs.randprog import generate
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    from vtasim.sim.rtl import runner
    images = [f(cfg) for f in UNIT_PROGRAMS.values()] + [generate(cfg, s) for s in range(500, 520)]
    build = runner.get_build(cfg, "verilator", dram_bytes=max(im.dram_size for im in images))
    outcomes = runner.run_jobs(build, [runner.Job(im.dram(), im.insn_addr, im.insn_count) for im in images])
    quiet = [o.status["max_quiet"] for o in outcomes]
    assert max(quiet) == LIVE_QUIET_BOUND, quiet
    assert [o.status["finish"] for o in outcomes] == [1] * len(images)
    assert [o.status["cycles"] for o in outcomes] == [run_image(im).cycles for im in images]


def _load_uop_finish(cfg):
    """docs/timing.md 10 A: LOAD UOP; FINISH -> 42 cycles."""
    b = ProgramBuilder(cfg)
    u = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.finish()
    return b.build()


def test_watchdog_defaults(cfg, monkeypatch):
    """diff: the cycle engine's count + 1/8 + 10,000 (42 -> 10,047); run: the 32-bit counter's range."""
    import vtasim.sim.rtl as rtl_pkg
    from vtasim.sim.cli.diff import diff_image
    from vtasim.sim.rtl import runner
    seen = []
    real = runner.run_jobs

    def spy(build, jobs, **kw):
        seen.extend(j.max_cycles for j in jobs)
        return real(build, jobs, **kw)
    monkeypatch.setattr(runner, "run_jobs", spy)
    image = _load_uop_finish(cfg)
    assert diff_image(image, sim="icarus").ok
    assert rtl_pkg.run_image(image, sim="icarus").cycles == 42
    assert seen == [42 + 42 // 8 + 10_000, (1 << 32) - 1]


def test_watchdog_for_refuses_programs_beyond_the_counter():
    from vtasim.sim.rtl import watchdog_for
    assert watchdog_for(0) == 10_000
    assert watchdog_for(800_000_000) == 900_010_000          # a 0.8 G-cycle program runs (no 100 M cap)
    assert watchdog_for((1 << 32) - 1) == (1 << 32) - 1      # capped at the counter
    with pytest.raises(SimError, match=r"4294967296 cycles; .*32 bits .*cannot run on the RTL"):
        watchdog_for(1 << 32)


def test_diff_of_a_program_longer_than_the_counter_is_one_line(cfg, tmp_path, monkeypatch, capsys):
    """The model says 5e9 cycles: diff refuses before the RTL runs (exit 2, one line)."""
    import vtasim.sim.cli.diff as cli_diff
    import vtasim.sim.rtl as rtl_pkg
    from vtasim.sim.cli import main
    from vtasim.sim.cycle import run_image
    img = tmp_path / "img"
    _load_uop_finish(cfg).save(img)

    def long_model(name, image, **kw):
        r = run_image(image)
        r.cycles = 5_000_000_000
        return r

    def no_rtl(*a, **k):
        raise AssertionError("the RTL must not run")
    monkeypatch.setattr(cli_diff, "run_engine", long_model)
    monkeypatch.setattr(rtl_pkg, "run_images", no_rtl)
    assert main(["diff", str(img)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "5000000000 cycles" in err[0] and "cannot run on the RTL" in err[0]


def test_max_cycles_option(cfg, tmp_path, capsys):
    """--max-cycles reaches the watchdog (diff: a 42-cycle program under a budget of 30 stops at the
    watchdog, exit 1, diffed up to there); out of range or on a model engine: exit 2, one line."""
    from vtasim.sim.cli import main
    img = tmp_path / "img"
    _load_uop_finish(cfg).save(img)
    assert main(["diff", str(img), "--sim", "icarus", "--max-cycles", "30"]) == 1
    out = capsys.readouterr().out
    assert "watchdog: no FINISH within max_cycles=30" in out and "--max-cycles 30" in out
    for argv in (["run", str(img), "--engine", "rtl", "--sim", "icarus", "--max-cycles", "0"],
                 ["diff", str(img), "--sim", "icarus", "--max-cycles", str(1 << 32)],
                 ["run", str(img), "--engine", "cycle", "--max-cycles", "100"],
                 ["fuzz", "--n", "1", "--max-cycles", "0"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and "max-cycles" in err[0].replace("max_cycles", "max-cycles"), (argv, err)


@pytest.mark.slow
def test_program_longer_than_100m_cycles_runs_on_the_rtl(cfg):
    """One GEMM of 7,000 x 2,000 x 8 uops (1.12e8 cycles) with the default watchdog: the RTL finishes at
    the cycle engine's count with its bytes (the old 100 M default called it a possible deadlock)."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.rtl import run_image as rtl_run
    b = ProgramBuilder(cfg)
    u = b.uops([(i, i, i) for i in range(8)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=8)
    b.gemm(uop_bgn=0, uop_end=8, iter_out=7000, iter_in=2000)
    b.finish()
    image = b.build()
    model = run_image(image)
    assert model.cycles > 100_000_000
    rtl = rtl_run(image)
    assert rtl.cycles == model.cycles and rtl.dram.tobytes() == model.dram.tobytes()
