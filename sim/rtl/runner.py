"""Build the RTL once per (config, simulator) and run batches of memory images on it.

Builds are cached in :func:`cache_root` (``$VTASIM_BUILD_DIR``, else ``$XDG_CACHE_HOME/vtasim/rtl``,
default ``~/.cache/vtasim/rtl``) under a key (:func:`build_key`) that hashes
the config, the simulator and its version, the trace format compiled in, the generated header and the
bytes of every HDL source and of the header generator, so an edit to any of them rebuilds and nothing
stale is ever reused.  One build serves runs with and without waveforms: a Verilator build is always
trace-capable (FST, the default format; ``--trace`` switches the dump on per run, measured once at
about 9 % more simulator CPU time than a build without tracing on the GEMM-bound stream), so ``run``,
``diff``, ``fuzz`` and ``waves --rtl`` share it; only VCD from Verilator needs a build of its own.
Icarus dumps either format from one build.  A build shows its elapsed time on stderr while it runs
(:class:`vtasim.sim.elapsed.Elapsed`); a cache hit prints nothing.  A lock file per build makes concurrent pytest-xdist workers share one build
instead of racing (exclusive while compiling, shared while running it, so pruning never deletes a
build in use).  Each batch runs in a fresh working directory (``$readmemh``/``$writememh`` use
relative names), so batches on the same build can run in parallel.

cocotb's :mod:`cocotb_tools.runner` does the building and launching; the test module is
:mod:`vtasim.sim.rtl.tb_batch`.  Verilator is the main simulator, Icarus the second::

    >>> b = get_build(load_config(), "verilator")          # doctest: +SKIP
    >>> outcomes = run_jobs(b, [Job(dram, insn_addr, insn_count)])   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vtasim import hw
from vtasim.hw.config import VTAConfig
from vtasim.hw.outfiles import open_out
from vtasim.sim.elapsed import Elapsed
from vtasim.sim.errors import BuildError, SimError, SimulatorError
from vtasim.sim.rtl import tools

__all__ = ["Build", "Job", "Outcome", "BuildError", "SimulatorError", "SIMULATORS", "WAVE_FORMATS", "wave_format",
           "CLOCKS", "SIM_CLOCKS", "DEFAULT_CLOCK", "default_clock", "resolve_clock", "CLOCK_NS", "VERILATOR_ARGS", "tb_defines",
           "DUMP_UNIT_NS", "cache_root", "default_rtl_dir", "compiled_trace", "build_key",
           "default_tb_file", "get_build", "run_jobs"]

SIMULATORS = ("verilator", "icarus")
# Waveform formats of an RTL run, the default first: FST (compressed; a full ResNet layer as VCD is
# far too big) is written by both simulators (Verilator --trace-fst, Icarus vvp -fst).
WAVE_FORMATS = ("fst", "vcd")
HW_DIR = Path(hw.__file__).resolve().parent              # the RTL and its testbench are data of hw/
PROJECT_ROOT = Path(__file__).resolve().parents[2]        # the directory holding the sim package
TB_TOP = "tb_top"
TEST_MODULE = "vtasim.sim.rtl.tb_batch"
# Testbench DRAM per simulator: it is cleared on every reset, which costs Icarus about a second
# per 16 MiB, so Icarus builds start small; a batch with a larger image gets a larger build.
TB_DRAM_DEFAULT = {"verilator": 16 << 20, "icarus": 1 << 20}
# The watchdog when no model count is known: the whole 32-bit range of the testbench's cycle counter
# (a deadlock no longer needs it: the testbench's detector stops one within cycles, docs/cosim.md).
MAX_RTL_CYCLES = (1 << 32) - 1     # the testbench's cycle counter and watchdog port are 32 bits
DEFAULT_MAX_CYCLES = MAX_RTL_CYCLES
# Verilator: -O3, no X randomisation, C++ at -O3 (bench/rtl_speed.py --sweep, simulator CPU time on
# C2-C11: 1.13x the -O1 build, -O2 1.07x; a --threads 2 build had not finished the batch after 13
# minutes on two shared cores, where the others took under 35 s).
VERILATOR_ARGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal",
                  "-CFLAGS", "-O3")
# The testbench clock, by who makes it (docs/cosim.md "Where a run's time goes"):
# "loop" = vtasim's own Verilator main loop (hw/rtl/tb/verilator_main.cpp, no --timing) toggles `clk`
#     and evaluates the design, with no VPI work at all while a job runs and cocotb waits only for
#     `done` (Verilator only; its default);
# "hdl" = tb_top makes it (VTASIM_TB_CLOCK_HALF; Verilator needs --timing for the delay), no VPI
#     callback per edge but two scheduler passes per cycle (Icarus's default);
# "cocotb" = cocotb's Clock drives the `clk` port through VPI (every edge a timed callback and a
#     value put: the slowest).
CLOCKS = ("loop", "hdl", "cocotb")
SIM_CLOCKS = {"verilator": CLOCKS, "icarus": ("hdl", "cocotb")}     # each simulator's default first
DEFAULT_CLOCK = None           # the simulator's default: default_clock(sim)
LOOP_MAIN = HW_DIR / "rtl" / "tb" / "verilator_main.cpp"
CLOCK_NS = 10   # one accelerator cycle; the waveform window of a diff report is computed from it
# A coverage build (``get_build(..., coverage=True)``, Verilator only): line/block, branch, expression,
# toggle and user (cover property) points of the design; the testbench is left out (coverage_off).
# Not --coverage-fsm: Verilator 5.48 stops with an internal error when FSM and expression coverage
# meet an expression like the testbench's ``(mem_addr >> LW) == 0``.
COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle", "--coverage-expr", "--coverage-user")
COVERAGE_FILE = "coverage.dat"   # what the simulator writes at its end, in the batch's work directory
TIMESCALE = ("1ns", "1ps")
DUMP_UNIT_NS = 0.001         # waveform files count in the time precision (1 ps)


_ICARUS_DUMP = """// Generated by sim/rtl/runner.py: waves of tb_top (vvp -vcd / -fst) when +vtasim_waves=<path> is given.
module vtasim_dump;
  reg [8*4096-1:0] path;
  initial begin
    if ($value$plusargs("vtasim_waves=%s", path)) begin
      $dumpfile(path);
      $dumpvars(0, tb_top);
    end
  end
endmodule
"""


def cache_root() -> Path:
    """``$VTASIM_BUILD_DIR``, else ``$XDG_CACHE_HOME/vtasim/rtl``, else ``~/.cache/vtasim/rtl``."""
    env = os.environ.get("VTASIM_BUILD_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "vtasim" / "rtl"


def default_rtl_dir() -> Path:
    return HW_DIR / "rtl"


def default_tb_file() -> Path:
    return HW_DIR / "rtl" / "tb" / "tb_top.v"


@dataclass(frozen=True)
class Build:
    """A compiled simulator for one config; ``dir`` holds the binary and ``vta_params.vh``."""

    cfg: VTAConfig
    sim: str
    waves: str | None          # the trace format compiled in (Verilator); None for Icarus (chosen per run)
    dir: Path
    key: str
    tb_dram_bytes: int
    coverage: bool = False     # compiled with COVERAGE_ARGS: every run writes coverage.dat
    clock: str = "hdl"             # one of SIM_CLOCKS[sim], resolved by get_build
    verilator_args: tuple = VERILATOR_ARGS


@dataclass
class Job:
    """One image to run: its DRAM bytes and where the instructions are."""

    dram: np.ndarray
    insn_addr: int
    insn_count: int
    max_cycles: int = DEFAULT_MAX_CYCLES


@dataclass
class Outcome:
    """What the simulator left for one job: raw file texts and the status the test module read."""

    status: dict
    dram_hex: str
    trace_text: str
    waves: Path | None = None
    log: Path | None = None
    extra: dict = field(default_factory=dict)


def _sources(rtl_dir: Path, tb_file: Path) -> list[Path]:
    rtl = sorted(Path(rtl_dir).glob("*.v"))
    if not rtl:
        raise BuildError(f"no Verilog files (*.v) in {rtl_dir}: the RTL is missing")
    if not Path(tb_file).is_file():
        raise BuildError(f"testbench {tb_file} is missing")
    return rtl + [Path(tb_file)]


def _header_writer():
    from vtasim.hw.rtl_params import write_header
    return write_header


def default_clock(sim: str) -> str:
    """The clock a build for ``sim`` gets when none is asked for (the first of :data:`SIM_CLOCKS`)."""
    return SIM_CLOCKS[sim][0]


def resolve_clock(sim: str, clock: str | None) -> str:
    """``clock``, or ``sim``'s default for None; a clock ``sim`` cannot have is a one-line SimError."""
    clock = clock or default_clock(sim)
    if clock not in SIM_CLOCKS[sim]:
        raise SimError(f"clock={clock!r} is not one of {', '.join(SIM_CLOCKS[sim])} (the clocks of {sim})")
    return clock


def tb_defines(clock: str) -> dict:
    """The macros tb_top is compiled with for ``clock``: the half period of its own clock (in the
    time unit, ns), or none when cocotb drives ``clk``."""
    return {"VTASIM_TB_CLOCK_HALF": CLOCK_NS // 2} if clock == "hdl" else {}


def wave_format(waves) -> str | None:
    """None for no waves; ``True`` means the default format; else one of :data:`WAVE_FORMATS`."""
    if not waves:
        return None
    if waves is True:
        return WAVE_FORMATS[0]
    if waves not in WAVE_FORMATS:
        raise SimError(f"waves={waves!r} is not one of {', '.join(WAVE_FORMATS)}")
    return waves


def compiled_trace(sim: str, waves=None) -> str | None:
    """The trace format a build for a run with ``waves`` compiles in: every Verilator build can trace
    (FST unless VCD is asked for), so runs with and without waves share one; Icarus chooses per run."""
    if sim != "verilator":
        return None
    return wave_format(waves) or WAVE_FORMATS[0]


def build_key(cfg: VTAConfig, sim: str = "verilator", waves=None, rtl_dir=None, tb_file=None,
              dram_bytes: int = 0, coverage: bool = False, clock: str = DEFAULT_CLOCK,
              verilator_args=VERILATOR_ARGS) -> str:
    """The cache key :func:`get_build` uses for these arguments (nothing is built)."""
    sources = _sources(Path(rtl_dir) if rtl_dir else default_rtl_dir(),
                       Path(tb_file) if tb_file else default_tb_file())
    return _build_key(cfg, sim, compiled_trace(sim, waves), sources, tb_dram_bytes_for(sim, dram_bytes), coverage,
                      clock, tuple(verilator_args))


def _build_key(cfg: VTAConfig, sim: str, waves: str | None, sources: list[Path], tb_dram_bytes: int = 0,
               coverage: bool = False, clock: str | None = DEFAULT_CLOCK,
               verilator_args: tuple = VERILATOR_ARGS) -> str:
    from vtasim.hw import rtl_params
    clock = resolve_clock(sim, clock)
    h = hashlib.sha256()
    h.update(json.dumps(cfg.to_dict(), sort_keys=True).encode())
    h.update(f"{sim}|{waves}|{sys.version_info[:2]}|{tb_dram_bytes}".encode())
    if coverage:
        h.update(repr(COVERAGE_ARGS).encode())
    # The header also depends on vtasim.hw.isa (field positions, opcode and memory-type constants), which
    # the source hashes below do not cover: hash the generated text itself.
    h.update(rtl_params.header_text(cfg, tb_dram_bytes or TB_DRAM_DEFAULT[sim]).encode())
    if sim == "verilator":
        h.update(".".join(map(str, tools.verilator_version())).encode())
    h.update(repr(tuple(verilator_args)).encode())
    h.update(f"clock={clock}|{CLOCK_NS}".encode())
    main = [LOOP_MAIN] if clock == "loop" else []
    for path in sources + main + [HW_DIR / "rtl_params.py", Path(__file__)]:
        h.update(path.name.encode())
        h.update(path.read_bytes() if path.is_file() else b"<missing>")
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path, shared: bool = False):
    """Hold ``flock`` on ``path`` (exclusive to build, shared to run a build).

    :func:`_prune` unlinks the lock files of the builds it removes, so a process that waited on an
    unlinked file would hold a lock nobody else sees: after locking, the file must still be the one
    at ``path``, otherwise lock the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(path, "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            try:
                same = os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
                return
        finally:
            fh.close()


def _lock_file(root: Path, sim: str, key: str) -> Path:
    return root / f"{sim}-{key}.lock"


@contextlib.contextmanager
def _project_on_sys_path():
    """cocotb passes ``sys.path`` as the simulator's PYTHONPATH; '' would mean the test directory."""
    root = str(PROJECT_ROOT)
    added = root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(root)


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def tb_dram_bytes_for(sim: str, nbytes: int = 0) -> int:
    """The testbench DRAM size a build needs for images of up to ``nbytes`` bytes."""
    size = TB_DRAM_DEFAULT[sim]
    while size < nbytes:
        size *= 2
    return size


# The only signals Python touches (interface of hw/rtl/tb/tb_top.v); everything else stays private to
# Verilator so it can optimise the design.
TB_OUTPUTS = ("done", "finish", "error", "error_code", "cycles", "max_quiet")
TB_PORTS = ("clk", "rst", "launch", "insn_addr", "insn_count", "max_cycles", "cmd_load", "cmd_dump",
            "dump_first", "dump_last") + TB_OUTPUTS


def _runner(sim: str, fmt: str | None = None, no_coverage=(), clock: str | None = None):
    """cocotb's runner for ``sim``; ``clock`` (resolved) shapes only the build command."""
    from cocotb_tools.runner import Icarus, Verilator

    class _DumpIcarus(Icarus):
        """cocotb's Icarus runner forces ``-none``/``-fst``; our dump root's format is ``fmt``."""

        def _test_command(self):
            cmds = super()._test_command()
            return [[a for a in cmd if a not in ("-none", "-fst")] + [f"-{fmt or 'vcd'}"] for cmd in cmds]

    class _PortsVerilator(Verilator):
        """cocotb makes every signal VPI-visible (``--public-flat-rw``), which stops Verilator from
        optimising; a control file makes only the testbench ports visible instead."""

        def _build_command(self):
            cmds = super()._build_command()
            if clock == "loop":
                cmds[0] = [str(LOOP_MAIN) if a.endswith("verilator.cpp") else a for a in cmds[0]] + \
                    ["-CFLAGS", f"-DVTASIM_CLOCK_HALF_NS={CLOCK_NS // 2}"]
            vlt = Path(self.build_dir) / "vtasim_ports.vlt"
            # what Python only reads (the outputs; the clock when the testbench makes it) is read-only
            read_only = TB_OUTPUTS + (("clk",) if clock != "cocotb" else ())
            vlt.write_text("`verilator_config\n" + "".join(
                f'public_flat_{"rd" if p in read_only else "rw"} -module "{TB_TOP}" -var "{p}"\n'
                for p in TB_PORTS) + "".join(
                f'coverage_off -file "{f}"\n' for f in no_coverage))
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"] + [str(vlt)]
            return cmds

    return _DumpIcarus() if sim == "icarus" else _PortsVerilator()


_memo: dict = {}


def get_build(cfg: VTAConfig, sim: str = "verilator", waves=None, rtl_dir=None,
              tb_file=None, root=None, dram_bytes: int = 0, coverage: bool = False,
              clock: str = DEFAULT_CLOCK, verilator_args=VERILATOR_ARGS) -> Build:
    """The cached build for this config and simulator (with a testbench DRAM of at least
    ``dram_bytes``), compiling it first if needed.  ``waves``: see :func:`wave_format`.
    ``coverage``: a coverage build (Verilator; its own cache entry, ``verilator-cov-<key>``).
    ``clock``: one of ``SIM_CLOCKS[sim]`` (who makes the testbench clock; None = the simulator's default).  ``verilator_args``: the
    Verilator options (default :data:`VERILATOR_ARGS`; ``bench/rtl_speed.py`` measures others)."""
    if sim not in SIMULATORS:
        raise SimError(f"--sim {sim!r} is not one of {', '.join(SIMULATORS)}")
    clock = resolve_clock(sim, clock)
    verilator_args = tuple(verilator_args)
    tools.require(sim)
    if coverage and sim != "verilator":
        raise SimError(f"RTL coverage needs --sim verilator (Verilator's coverage points); {sim} has none")
    waves = compiled_trace(sim, waves)
    rtl_dir = Path(rtl_dir) if rtl_dir else default_rtl_dir()
    tb_file = Path(tb_file) if tb_file else default_tb_file()
    sources = _sources(rtl_dir, tb_file)
    tb_bytes = tb_dram_bytes_for(sim, dram_bytes)
    key = _build_key(cfg, sim, waves, sources, tb_bytes, coverage, clock, verilator_args)
    root = Path(root) if root else cache_root()
    memo_key = (root, key)
    bdir = root / (f"{sim}-{'cov-' if coverage else ''}{f'trace-{waves}-' if waves else ''}"
                   f"{'' if clock == default_clock(sim) else f'{clock}clk-'}{key}")
    done = bdir / "build.ok"
    if memo_key in _memo and done.is_file():
        # Another process may prune builds it thinks unused: mark this one as used now.
        with contextlib.suppress(OSError):
            os.utime(bdir)
        return _memo[memo_key]
    lock = _lock_file(root, sim, key)
    with _locked(lock, shared=True):        # shared: runs of this build may hold it for long
        cached = done.is_file()
        if cached:
            os.utime(bdir)                  # last use (build.ok keeps the build time)
    if not cached:
        with _locked(lock):
            if not done.is_file():
                # A build takes minutes under Verilator: show the time passing instead of going quiet.
                with Elapsed(f"vtasim: building the RTL for {cfg.bitstream} with {sim}",
                             f"into {bdir} (cached for later runs)"):
                    _compile(cfg, sim, waves, sources, bdir, tb_bytes, coverage, clock, verilator_args)
                done.write_text(json.dumps({"sim": sim, "waves": waves, "clock": clock,
                                            "verilator_args": list(verilator_args), "config": cfg.to_dict()}))
                _prune(root, sim)
    build = Build(cfg=cfg, sim=sim, waves=waves, dir=bdir, key=key,
                  tb_dram_bytes=tb_bytes, coverage=coverage, clock=clock, verilator_args=verilator_args)
    _memo[memo_key] = build
    return build


KEEP_BUILDS = 8      # per simulator; older builds (of RTL sources since edited) are removed


def _prune(root: Path, sim: str):
    """Remove all but the :data:`KEEP_BUILDS` most recently used builds of ``sim`` (the build
    directory's mtime is its last use, :func:`get_build` touches it).

    A build that another process (a pytest-xdist worker, another user of the cache) is compiling
    or running holds its lock file, so it is skipped, never deleted under that process."""
    def used(p):
        try:
            return p.stat().st_mtime if (p / "build.ok").is_file() else None
        except OSError:
            return None
    stamped = [(t, p) for p in root.glob(f"{sim}-*") if p.is_dir() for t in [used(p)] if t is not None]
    stamped.sort(key=lambda tp: tp[0], reverse=True)
    for _, old in stamped[KEEP_BUILDS:]:
        lock = _lock_file(root, sim, old.name.rsplit("-", 1)[-1])
        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue            # in use right now
            try:
                shutil.rmtree(old, ignore_errors=True)
                lock.unlink(missing_ok=True)     # waiters re-check the inode (_locked)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _compile(cfg, sim, waves, sources, bdir: Path, tb_bytes: int, coverage: bool, clock: str,
             verilator_args: tuple):
    if bdir.exists():
        shutil.rmtree(bdir)
    bdir.mkdir(parents=True)
    _header_writer()(cfg, bdir / "vta_params.vh", tb_dram_bytes=tb_bytes)
    log = bdir / "build.log"
    import cocotb_tools.runner as cocotb_runner
    cocotb_runner.MAX_PARALLEL_BUILD_JOBS = 2      # the machines this runs on share two cores
    with tools.tool_path(sim):
        if sim == "verilator":
            args = list(verilator_args) + (["--trace-fst"] if waves == "fst" else []) + \
                (list(COVERAGE_ARGS) if coverage else []) + (["--timing"] if clock == "hdl" else [])
        else:
            # Icarus: our own dump root writes waves when +vtasim_waves=<path> is given (in the
            # format of vvp's -vcd/-fst), so one build serves runs with and without waves.
            dump = bdir / "vtasim_dump.v"
            dump.write_text(_ICARUS_DUMP)
            sources = sources + [dump]
            args = ["-g2005", "-s", "vtasim_dump"]
        try:
            tb_only = [str(sources[-1])] if coverage else ()    # _sources puts the testbench last
            _runner(sim, no_coverage=tb_only, clock=clock).build(
                               sources=sources, includes=[bdir], hdl_toplevel=TB_TOP, build_dir=bdir,
                               defines=tb_defines(clock),
                               build_args=args, timescale=TIMESCALE, waves=bool(waves) and sim == "verilator",
                               always=True, log_file=log)
        except _TOOL_FAILURES as exc:
            raise BuildError(f"{sim} build of the RTL failed ({_why(exc)}); log {log}", _tail(log)) from None


# What cocotb's runner raises when a tool fails: SystemExit (executable not on PATH, a failed test
# run), RuntimeError (a command's non-zero exit), CalledProcessError/OSError (could not be started).
_TOOL_FAILURES = (SystemExit, RuntimeError, subprocess.CalledProcessError, OSError)


def _why(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"exit status {exc.code}" if isinstance(exc.code, int) or exc.code is None else str(exc.code)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _write_hex(path: Path, dram: np.ndarray, bus_bytes: int) -> int:
    """One bus word per line, most significant byte first; returns the number of words."""
    data = np.asarray(dram, dtype=np.uint8)
    pad = (-data.size) % bus_bytes
    if pad:
        data = np.concatenate([data, np.zeros(pad, np.uint8)])
    words = data.reshape(-1, bus_bytes)[:, ::-1]
    width = 2 * bus_bytes
    step = max(1, (1 << 16) // bus_bytes)          # 64 KiB of DRAM per write, never the whole text
    with open(path, "w") as fh:
        for k in range(0, words.shape[0], step):
            text = words[k:k + step].tobytes().hex()
            fh.write("\n".join(text[i:i + width] for i in range(0, len(text), width)))
            fh.write("\n")
    return words.shape[0]


def parse_hex(text: str, bus_bytes: int, nbytes: int) -> np.ndarray:
    """Inverse of the hex writer for ``$writememh`` output (address/comment lines skipped)."""
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("//") and not ln.startswith("@")]
    width = 2 * bus_bytes
    bad = next((i for i, ln in enumerate(lines) if len(ln) != width or not re.fullmatch(r"[0-9a-fA-F]+", ln)), None)
    if bad is not None:
        raise SimError(f"dram_out.hex word {bad} = {lines[bad]!r} is not {width} hex digits "
                       f"(X/Z bits written by the RTL, or a truncated dump)")
    raw = np.frombuffer(bytes.fromhex("".join(lines)), dtype=np.uint8).reshape(-1, bus_bytes)[:, ::-1]
    return raw.reshape(-1)[:nbytes].copy()


class _Terminated(BaseException):
    """SIGTERM arrived: unwinds through everything (cocotb's SystemExit handling included)."""


@contextlib.contextmanager
def _sigterm_unwinds():
    """While the block runs, SIGTERM unwinds the stack instead of ending the process at once, so
    ``finally`` clauses (the work directory's removal, the simulator's kill) run; the process then
    exits 143 as it would have.  Only where Python's default handler is in place and only in the
    main thread (signal handlers can be set nowhere else)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def unwind(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    except _Terminated:
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_jobs(build: Build, jobs: list, work_dir=None, waves_file=None, waves=None, coverage=None) -> list:
    """Run ``jobs`` back to back in one simulator process; one :class:`Outcome` per job.

    ``waves_file``: write waveforms there, in format ``waves`` (Icarus; a Verilator build's format
    is the one it was compiled with).  ``coverage``: a :class:`vtasim.sim.rtl.coverage.Coverage` that the
    process's coverage points (of a coverage build) are added to.  A temporary work directory is
    removed however the run ends, SIGTERM included."""
    with _sigterm_unwinds():
        return _run_jobs(build, jobs, work_dir, waves_file, waves, coverage)


def _run_jobs(build: Build, jobs: list, work_dir=None, waves_file=None, waves=None, coverage=None) -> list:
    B = build.cfg.bus_bytes
    tmp = None
    if work_dir is None:
        tmp = tempfile.mkdtemp(prefix="vtasim-rtl-")
        work_dir = tmp
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if waves_file:          # a regular file the simulator fills, never a link (vtasim.hw.outfiles)
        open_out(waves_file, "wb", "waveform file").close()
    manifest = []
    try:
        for k, job in enumerate(jobs):
            if job.dram.size > build.tb_dram_bytes:
                raise SimError(f"image DRAM of {job.dram.size} bytes exceeds the testbench DRAM of "
                               f"{build.tb_dram_bytes} bytes (TB_DRAM_BYTES)")
            jdir = work / f"job{k:05d}"
            jdir.mkdir()
            nwords = _write_hex(jdir / "dram_in.hex", job.dram, B)
            manifest.append({"dir": str(jdir), "insn_addr": int(job.insn_addr),
                             "insn_count": int(job.insn_count), "max_cycles": int(job.max_cycles),
                             "dump_first": 0, "dump_last": nwords - 1})
        (work / "batch.json").write_text(json.dumps({"jobs": manifest}))
        log = work / "sim.log"
        # A shared lock on the build keeps _prune (in any process) from deleting it mid-run.
        with _locked(_lock_file(build.dir.parent, build.sim, build.key), shared=True):
            if not (build.dir / "build.ok").is_file():
                raise SimError(f"the {build.sim} build {build.dir} was removed from the cache before this "
                               f"run; run again to rebuild it")
            _simulate(build, work, log, waves_file, build.waves or wave_format(waves or True))
        if build.coverage and coverage is not None:
            dat = work / COVERAGE_FILE
            if not dat.is_file():
                raise SimulatorError(f"the coverage build wrote no {COVERAGE_FILE}; simulator log {log}", _tail(log))
            coverage.add_file(dat)
        outcomes = []
        for k, entry in enumerate(manifest):
            jdir = Path(entry["dir"])
            status_file = jdir / "status.json"
            if not status_file.is_file():
                raise SimulatorError(f"{build.sim} stopped before job {k} finished; simulator log {log}", _tail(log))
            status = json.loads(status_file.read_text())
            trace = (jdir / "trace.txt").read_text() if (jdir / "trace.txt").exists() else ""
            dram_hex = (jdir / "dram_out.hex").read_text() if (jdir / "dram_out.hex").exists() else ""
            outcomes.append(Outcome(status=status, dram_hex=dram_hex, trace_text=trace,
                                    waves=Path(waves_file) if waves_file else None, log=log))
        return outcomes
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _simulate(build: Build, work: Path, log: Path, waves_file, fmt: str):
    test_args, plusargs = [], []
    if waves_file:
        if build.sim == "verilator":
            test_args = ["--trace-file", str(waves_file)]
        else:
            plusargs = [f"+vtasim_waves={waves_file}"]
    if build.coverage:
        plusargs = plusargs + [f"+verilator+coverage+file+{work / COVERAGE_FILE}"]
    env = {"VTASIM_BATCH": str(work / "batch.json"), "COCOTB_TRUST_INERTIAL_WRITES": "1",
           "COCOTB_LOG_LEVEL": "WARNING", "VTASIM_CLOCK": build.clock, "VTASIM_CLOCK_NS": str(CLOCK_NS)}
    # Inside pytest the runner turns a failed cocotb test into sys.exit; we report from our own files.
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        # The simulator (vvp for Icarus) is looked up on PATH by cocotb: tool_path checks it is there
        # (a ToolError naming what to install) and puts it first.
        with tools.tool_path(build.sim), _project_on_sys_path():
            _runner(build.sim, fmt).test(test_module=TEST_MODULE, hdl_toplevel=TB_TOP, hdl_toplevel_lang="verilog",
                                    build_dir=build.dir, test_dir=work, extra_env=env,
                                    waves=build.sim == "verilator" and waves_file is not None,
                                    test_args=test_args, plusargs=plusargs, timescale=TIMESCALE, log_file=log,
                                    results_xml=str(work / "results.xml"))
    except _TOOL_FAILURES as exc:
        raise SimulatorError(f"{build.sim} simulation failed ({_why(exc)}); log {log}", _tail(log)) from None
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
