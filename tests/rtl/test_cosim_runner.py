"""The cocotb runner: build cache, tool paths, error paths, waveforms."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from vtasim.hw.config import MEM_UOP
from vtasim.sim.rtl import runner, tools

pytestmark = pytest.mark.rtl


def test_verilator_first_on_path_during_builds():
    with tools.tool_path("verilator") as bindir:
        assert shutil.which("verilator") == str(tools.verilator_bin())
        assert bindir == tools.verilator_bin().parent
    assert tools.verilator_version() >= tools.MIN_VERILATOR


def test_foreign_verilator_environment_is_ignored_during_builds(tmp_path, monkeypatch):
    """A VERILATOR_ROOT of another install (Debian's) makes the wheel's wrapper refuse to run, a
    VERILATOR_BIN would make it run another binary: tool_path hides both, then restores them."""
    monkeypatch.setenv("VERILATOR_ROOT", str(tmp_path))
    monkeypatch.setenv("VERILATOR_BIN", "/usr/bin/verilator_bin")
    src = tmp_path / "wire_through.v"
    src.write_text("module wire_through (input wire a, output wire b);\n  assign b = a;\nendmodule\n")
    with tools.tool_path("verilator"):
        proc = subprocess.run(["verilator", "--lint-only", "-Wall", str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.environ["VERILATOR_ROOT"] == str(tmp_path)
    assert os.environ["VERILATOR_BIN"] == "/usr/bin/verilator_bin"


def test_prune_never_removes_a_build_in_use(tmp_path, monkeypatch):
    """Only the newest KEEP_BUILDS builds survive pruning, except one that another process is
    running (it holds its lock file shared, as run_jobs does)."""
    monkeypatch.setattr(runner, "KEEP_BUILDS", 1)
    for k in range(3):
        ok = tmp_path / f"icarus-k{k}" / "build.ok"
        ok.parent.mkdir()
        ok.write_text("{}")
        os.utime(ok.parent, (1000 + k, 1000 + k))   # k2 is the most recently used
    with runner._locked(runner._lock_file(tmp_path, "icarus", "k0"), shared=True):
        runner._prune(tmp_path, "icarus")
        assert (tmp_path / "icarus-k0" / "build.ok").is_file()      # running: kept
    assert not (tmp_path / "icarus-k1").exists()                     # old and unused: removed
    assert (tmp_path / "icarus-k2" / "build.ok").is_file()           # newest: kept
    runner._prune(tmp_path, "icarus")                                # k0 no longer in use
    assert not (tmp_path / "icarus-k0").exists()


def test_max_cycles_outside_the_watchdog_port_is_rejected(cfg):
    from vtasim.sim.rtl import run_images
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    with pytest.raises(ValueError, match=r"max_cycles = 4294967296 .*32-bit"):
        run_images([UNIT_PROGRAMS["gemm_smt"](cfg)], sim="icarus", max_cycles=1 << 32)


def test_build_is_cached_and_reused(cfg, icarus_build):
    stamp = (icarus_build.dir / "build.ok").stat().st_mtime_ns
    runner._memo.clear()                       # as a new process would see it
    again = runner.get_build(cfg, "icarus")
    assert again.dir == icarus_build.dir
    assert (again.dir / "build.ok").stat().st_mtime_ns == stamp   # not recompiled


def test_build_key_follows_sources_and_config(cfg, tmp_path):
    rtl = tmp_path / "rtl"
    shutil.copytree(runner.default_rtl_dir(), rtl)
    srcs = runner._sources(rtl, runner.default_tb_file())
    key = runner._build_key(cfg, "icarus", False, srcs)
    assert key == runner._build_key(cfg, "icarus", False, srcs)
    assert key != runner._build_key(cfg.replace(DRAM_LATENCY=17), "icarus", False, srcs)
    assert key != runner._build_key(cfg, "verilator", False, srcs)
    victim = sorted(rtl.glob("*.v"))[0]
    victim.write_text(victim.read_text() + "\n// edited\n")
    assert key != runner._build_key(cfg, "icarus", False, srcs)


def test_build_key_follows_the_generated_header(cfg, monkeypatch):
    """vtasim.hw.isa feeds the header (field positions, opcodes) but is no HDL source: a changed header
    must still give a new build."""
    import vtasim.hw.rtl_params
    srcs = runner._sources(runner.default_rtl_dir(), runner.default_tb_file())
    key = runner._build_key(cfg, "icarus", False, srcs)
    monkeypatch.setattr(vtasim.hw.rtl_params, "OP_ALU", 7)
    assert "`define VTA_OP_ALU 7" in vtasim.hw.rtl_params.header_text(cfg)
    assert key != runner._build_key(cfg, "icarus", False, srcs)


def test_missing_rtl_is_a_clear_error(cfg, tmp_path):
    with pytest.raises(runner.BuildError, match="no Verilog files"):
        runner.get_build(cfg, "icarus", rtl_dir=tmp_path)


def test_watchdog_ends_a_run_at_max_cycles(cfg, icarus_build):
    """A live program (docs/timing.md 10 A: 42 cycles) under a budget of 30: the watchdog stops it at
    cycle 30 with what retired before (a deadlock is the detector's, tests/rtl/test_deadlock.py)."""
    from vtasim.sim.rtl import run_image
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.sim.errors import RtlWatchdog
    b = ProgramBuilder(cfg)
    u = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.finish()
    with pytest.raises(RtlWatchdog, match="watchdog: no FINISH within max_cycles=30 ") as ei:
        run_image(b.build(), sim="icarus", max_cycles=30)
    assert ei.value.stop_cycle == 29 and ei.value.records == []      # LOAD UOP would end at 39


def test_batch_keeps_going_after_a_failing_image(cfg, icarus_build):
    from vtasim.sim.rtl import run_images
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.sim.errors import DeadlockError
    bad = ProgramBuilder(cfg)
    bad.nop("compute", pop_prev=1)
    bad.finish()
    good = ProgramBuilder(cfg)
    u = good.uops([(0, 0, 0)])
    good.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    good.finish()
    res = run_images([bad.build(), good.build()], sim="icarus", max_cycles=3000, errors="return")
    assert isinstance(res[0], DeadlockError) and "deadlock at cycle 22" in str(res[0])
    # docs/timing.md 10 A with the builder's layout: LOAD UOP then FINISH -> 42 cycles.
    assert res[1].cycles == 42
    assert [r.opcode for r in res[1].trace] == [0, 3]


def test_both_testbench_clocks_match_the_cycle_engine(cfg, same_run):
    """Under Icarus the testbench's own clock (the default) and cocotb's Clock on ``clk``
    (``clock="cocotb"``) are separate builds that run a program to the cycle engine's bytes, retire
    records and cycles, with the same launch time and period (what waveform windows are computed
    from); another clock, or Verilator's main loop, is one line naming the choices."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.engines import run_engine
    from vtasim.sim.errors import SimError
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    from vtasim.sim.rtl import run_image as rtl_run
    image = UNIT_PROGRAMS["gemm_smt"](cfg)
    model = run_image(image)
    clocks = runner.SIM_CLOCKS["icarus"]
    assert clocks[0] == "hdl" and runner.default_clock("icarus") == "hdl"
    runs = {clock: rtl_run(image, sim="icarus", clock=clock) for clock in clocks}
    for r in runs.values():
        same_run(image, model, r)
    assert runs["hdl"].launch_ns == runs["cocotb"].launch_ns and runs["hdl"].clock_ns == runs["cocotb"].clock_ns
    dirs = {runner.get_build(cfg, "icarus", clock=clock).dir for clock in clocks}
    assert len(dirs) == len(clocks)
    assert runner.get_build(cfg, "icarus").dir == runner.get_build(cfg, "icarus", clock="hdl").dir
    with pytest.raises(SimError, match=r"option clock = 'tick' is not one of 'loop', 'hdl', 'cocotb'"):
        run_engine("rtl", image, sim="icarus", clock="tick")
    with pytest.raises(SimError, match=r"^clock='loop' is not one of hdl, cocotb \(the clocks of icarus\)$"):
        rtl_run(image, sim="icarus", clock="loop")


def _clock_batch(cfg):
    """A batch whose jobs end in every way a job ends: FINISH after GEMM and ALU work (the fast
    stretch of the main loop ends on ``done``), the deadlock detector, the watchdog, then FINISH again."""
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.sim.programs.randprog import generate
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    dead = ProgramBuilder(cfg)
    dead.nop("compute", pop_prev=1)
    dead.finish()
    images = [UNIT_PROGRAMS["hw_blocked_gemm_vt2"](cfg), dead.build(), UNIT_PROGRAMS["alu_mul_vec"](cfg),
              generate(cfg, 11)]
    return images, [runner.DEFAULT_MAX_CYCLES, 3000, 40, runner.DEFAULT_MAX_CYCLES]


def test_verilator_clocks_agree_with_the_cycle_engine(cfg, same_run, verilator_build):
    """Verilator's three clocks: vtasim's main loop (the default build; no VPI work while a job runs),
    the testbench's own clock under --timing, and cocotb's Clock.  One batch each, with jobs ending on
    FINISH, in a deadlock and at the watchdog: every finished job equals the cycle engine (bytes,
    retire records, cycles), the stopped ones stop at the same cycle with the same records, and the
    launch time and period are the same under every clock."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.errors import DeadlockError, RtlWatchdog
    from vtasim.sim.rtl import run_images
    assert runner.default_clock("verilator") == "loop" and verilator_build.clock == "loop"
    images, limits = _clock_batch(cfg)
    runs = {clock: run_images(images, sim="verilator", clock=clock, max_cycles=limits, errors="return")
            for clock in runner.SIM_CLOCKS["verilator"]}
    for clock, res in runs.items():
        for k in (0, 3):
            same_run(images[k], run_image(images[k]), res[k])
        assert isinstance(res[1], DeadlockError) and "deadlock at cycle 22" in str(res[1]), clock
        assert isinstance(res[2], RtlWatchdog) and res[2].stop_cycle == 39, clock
    loop = runs["loop"]
    for clock, res in runs.items():
        assert [(r.launch_ns, r.clock_ns) for r in (res[0], res[3])] == \
            [(r.launch_ns, r.clock_ns) for r in (loop[0], loop[3])], clock
        assert res[2].records == loop[2].records and str(res[1]) == str(loop[1]), clock
