"""RTL engine: run memory images on the Verilog VTA under cocotb (Verilator, or Icarus).

The same contract as every engine (:mod:`vtasim.sim.engines`: ``run_image``, ``run_images``, the options
they take in :data:`OPTIONS` / :data:`BATCH_OPTIONS`)::

    >>> from vtasim.sim.rtl import run_image, run_images
    >>> result = run_image(image)                        # doctest: +SKIP
    >>> result.cycles, result.trace[0]                   # doctest: +SKIP
    >>> results = run_images(images, sim="icarus")       # one simulator process for all

The first call for a config compiles the RTL (one to two minutes under Verilator for the default config,
about a second under Icarus) into the build cache
(:func:`vtasim.sim.rtl.runner.cache_root`, default ``~/.cache/vtasim/rtl``); later calls, in any process,
reuse it.  The modules: :mod:`~vtasim.sim.rtl.tools` finds the simulators, :mod:`~vtasim.sim.rtl.runner` builds and
launches them through cocotb, :mod:`~vtasim.sim.rtl.tb_batch` is the cocotb test module that runs inside the
simulator, :mod:`~vtasim.sim.rtl.results` turns what the testbench wrote into a RunResult.  The HDL itself
(``hw/rtl/*.v``, the testbench ``hw/rtl/tb/tb_top.v``) belongs to :mod:`hw`.

Errors: :class:`~vtasim.sim.errors.RtlStopped` subclasses when the design stops early (they carry what it
retired), :class:`~vtasim.sim.errors.ToolError` subclasses when a tool is missing, fails or crashes.
"""

from __future__ import annotations

from pathlib import Path

from vtasim.sim.engines import Option
from vtasim.sim.rtl.coverage import Coverage
from vtasim.sim.rtl.runner import CLOCKS, DEFAULT_CLOCK
from vtasim.sim.rtl.tools import require

__all__ = ["run_image", "run_images", "watchdog_for", "require", "TIMED", "OPTIONS", "BATCH_OPTIONS"]

# The engine contract (vtasim.sim.engines); trace / perfetto files are written by vtasim.sim.engines.run_engine.
TIMED = True
_SHARED = (
    Option("sim", (str,), "HDL simulator: verilator or icarus"),
    Option("waves", (bool, str), "waveforms: True = FST, 'fst' or 'vcd'"),
    Option("waves_file", (str, Path), "the waveform file (default ./vtasim_rtl.<format>)"),
    Option("clock", (str,), "who makes the testbench clock: vtasim's Verilator main loop (loop, Verilator's "
           "default), the testbench (hdl, Icarus's default) or cocotb's Clock (cocotb)", CLOCKS),
)
OPTIONS = _SHARED + (
    Option("max_cycles", (int,), "the HDL watchdog, 1 .. 2^32 - 1"),
    Option("coverage", (str, Path), "a directory the run's RTL coverage is merged into"),
)
BATCH_OPTIONS = _SHARED + (
    Option("max_cycles", (int, list, tuple), "the HDL watchdog: one for all images or one per image"),
    Option("errors", (str,), "a failing image's exception raised, or returned in its slot", ("raise", "return")),
    Option("rtl_dir", (str, Path), "the Verilog directory (default hw/rtl)"),
    Option("tb_file", (str, Path), "the testbench top (default hw/rtl/tb/tb_top.v)"),
    Option("work_dir", (str, Path), "where the simulator runs (default a temp directory)"),
    Option("coverage", (Coverage,), "a Coverage the runs' points are added to (Verilator coverage build)"),
)


def watchdog_for(model_cycles: int) -> int:
    """The RTL watchdog for a program the cycle engine ran in ``model_cycles`` cycles: that count plus a
    margin of an eighth of it and 10,000 cycles (an RTL slower than the contract still runs to its end,
    so ``diff`` names the first late retirement), capped at the 32-bit counter.  A program longer than
    the counter cannot run on the RTL: a one-line :class:`~vtasim.sim.errors.SimError`."""
    from vtasim.sim.errors import SimError
    from vtasim.sim.rtl.runner import MAX_RTL_CYCLES
    model_cycles = int(model_cycles)
    if model_cycles > MAX_RTL_CYCLES:
        raise SimError(f"the cycle engine runs this program in {model_cycles} cycles; the RTL's cycle counter "
                       f"is 32 bits (at most {MAX_RTL_CYCLES} cycles): it cannot run on the RTL")
    return min(MAX_RTL_CYCLES, model_cycles + model_cycles // 8 + 10_000)


def _check(image):
    """The static program checks every engine runs first (bad programs never reach the RTL)."""
    from vtasim.sim.program import load_program
    load_program(image)


def run_images(images, sim: str = "verilator", waves=False, max_cycles: int | None = None,
               errors: str = "raise", waves_file=None, rtl_dir=None, tb_file=None, work_dir=None, coverage=None,
               clock: str = DEFAULT_CLOCK):
    """Run ``images`` in one simulator process per config; a list of RunResult in input order.

    ``errors="return"`` puts the exception of a failing image in its slot instead of raising
    (fuzzing keeps going); ``"raise"`` raises the first one after the batch ran.  ``max_cycles`` is
    the HDL watchdog: one number for all images or one per image, 1 .. 2^32 - 1 (default 2^32 - 1, the
    testbench's 32-bit cycle counter; a deadlock is stopped by the testbench's detector within cycles,
    whatever the watchdog, and raises :class:`~vtasim.sim.rtl.results.RtlDeadlock`, a DeadlockError).
    ``waves``: False, True (FST), ``"fst"`` or ``"vcd"``, written to ``waves_file`` (default
    ``./vtasim_rtl.<format>``).  ``coverage``: a :class:`vtasim.sim.rtl.coverage.Coverage`; the images then
    run on the coverage build (Verilator) and its points are added to it, once per simulator process.
    ``clock``: None (the simulator's default), ``"loop"`` (Verilator: vtasim's main loop makes the clock and
    does no VPI work while a job runs), ``"hdl"`` (the testbench makes it: no simulator callback per edge)
    or ``"cocotb"`` (cocotb's Clock drives it through VPI, the slowest; :data:`vtasim.sim.rtl.runner.SIM_CLOCKS`)."""
    from vtasim.sim.errors import SimError
    from vtasim.sim.rtl import runner
    from vtasim.sim.rtl.results import to_run_result
    if errors not in ("raise", "return"):
        raise ValueError(f"errors={errors!r} is not 'raise' or 'return'")
    images = list(images)
    if max_cycles is None or isinstance(max_cycles, int):
        limits = [runner.DEFAULT_MAX_CYCLES if max_cycles is None else int(max_cycles)] * len(images)
    else:
        limits = [int(m) for m in max_cycles]       # one watchdog per image
        if len(limits) != len(images):
            raise SimError(f"max_cycles has {len(limits)} entries for {len(images)} images")
    for k, m in enumerate(limits):
        # the testbench watchdog and cycle counter are 32-bit ports: a larger value cannot be driven
        if not 1 <= m < 1 << 32:
            raise SimError(f"max_cycles = {m} (image {k}) is outside 1 .. 2^32 - 1 (the 32-bit watchdog port)")
    fmt = runner.wave_format(waves)
    results: list = [None] * len(images)
    groups: dict = {}
    for k, image in enumerate(images):
        try:
            _check(image)
        except Exception as exc:          # noqa: BLE001 - reported per image
            results[k] = exc
            continue
        groups.setdefault(image.cfg, []).append(k)
    for cfg, idxs in groups.items():
        build = runner.get_build(cfg, sim, waves=fmt, rtl_dir=rtl_dir, tb_file=tb_file,
                                 dram_bytes=max(images[k].dram_size for k in idxs), coverage=coverage is not None,
                                 clock=clock)
        if fmt and waves_file is None:
            waves_file = Path.cwd() / f"vtasim_rtl.{fmt}"
        jobs = [runner.Job(images[k].dram(), images[k].insn_addr, images[k].insn_count, limits[k]) for k in idxs]
        outcomes = runner.run_jobs(build, jobs, work_dir=work_dir, waves_file=waves_file if fmt else None, waves=fmt,
                                   coverage=coverage)
        for k, outcome in zip(idxs, outcomes):
            try:
                results[k] = to_run_result(images[k], outcome, limits[k])
            except Exception as exc:      # noqa: BLE001 - reported per image
                results[k] = exc
    if errors == "raise":
        for r in results:
            if isinstance(r, BaseException):
                raise r
    return results


def run_image(image, sim: str = "verilator", waves=False, max_cycles: int | None = None,
              waves_file=None, coverage=None, clock: str = DEFAULT_CLOCK):
    """Run one image on the RTL.

    ``waves`` (True = FST, ``"fst"``, ``"vcd"``) also writes waveforms (``waves_file``, default
    ``./vtasim_rtl.<format>``; path in ``result.waves``).
    ``coverage``: a directory; the run's RTL coverage is merged into what it holds (:mod:`vtasim.sim.rtl.coverage`),
    also when the run stops with an error, and its reports are rewritten.  Trace files:
    ``vtasim.sim.engines.run_engine("rtl", image, trace=..., perfetto=...)``."""
    if coverage is None:
        return run_images([image], sim=sim or "verilator", waves=waves, max_cycles=max_cycles,
                          waves_file=waves_file, clock=clock)[0]
    return _run_with_coverage(image, Path(coverage), sim=sim or "verilator", waves=waves,
                              max_cycles=max_cycles, waves_file=waves_file, clock=clock)


def _run_with_coverage(image, directory: Path, **opts):
    from vtasim.sim.programs.randprog import coverage_bins
    from vtasim.sim.rtl.coverage import Coverage
    from vtasim.sim.rtl.coverage_report import save_report
    cov = Coverage()
    try:
        return run_images([image], coverage=cov, **opts)[0]
    finally:
        if cov.points:
            cov.add_bins({b: 1 for b, c in coverage_bins(image).items() if c}, 1)
            save_report(cov.merge_into(directory), directory)
