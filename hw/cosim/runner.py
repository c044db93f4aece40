"""Build the RTL once per (config, simulator, waves) and run batches of memory images on it.

Builds are cached in ``$VTASIM_BUILD_DIR`` (default ``~/.cache/vtasim/rtl``) under a key that hashes
the config, the simulator and its version, the waves flag and the bytes of every HDL source and of
the header generator, so an edit to any of them rebuilds and nothing stale is ever reused.  A file
lock makes concurrent pytest-xdist workers share one build instead of racing.  Each batch runs in a
fresh working directory (``$readmemh``/``$writememh`` use relative names), so batches on the same
build can run in parallel.

cocotb's :mod:`cocotb_tools.runner` does the building and launching; the test module is
:mod:`hw.cosim.tb_batch`.  Verilator is the main simulator, Icarus the second::

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
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hw.config import VTAConfig
from hw.cosim import tools
from sim.errors import SimError

__all__ = ["Build", "Job", "Outcome", "BuildError", "SIMULATORS", "cache_root", "default_rtl_dir",
           "default_tb_file", "get_build", "run_jobs"]

SIMULATORS = ("verilator", "icarus")
HW_DIR = Path(__file__).resolve().parent.parent
PROJECT_ROOT = HW_DIR.parent
TB_TOP = "tb_top"
TEST_MODULE = "hw.cosim.tb_batch"
DEFAULT_TB_DRAM_BYTES = 16 << 20
DEFAULT_MAX_CYCLES = 100_000_000
# Verilator: fast C++ and no X randomisation (the contract has no X); two make jobs at most.
VERILATOR_ARGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal",
                  "-CFLAGS", "-O1")
TIMESCALE = ("1ns", "1ps")


class BuildError(SimError):
    """The HDL did not compile; the message names the log file and quotes its last lines."""


def cache_root() -> Path:
    env = os.environ.get("VTASIM_BUILD_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vtasim" / "rtl"


def default_rtl_dir() -> Path:
    return HW_DIR / "rtl"


def default_tb_file() -> Path:
    return HW_DIR / "cosim" / "hdl" / "tb_top.v"


@dataclass(frozen=True)
class Build:
    """A compiled simulator for one config; ``dir`` holds the binary and ``vta_params.vh``."""

    cfg: VTAConfig
    sim: str
    waves: bool
    dir: Path
    key: str
    tb_dram_bytes: int


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
    from hw.rtl_params import write_header
    return write_header


def _build_key(cfg: VTAConfig, sim: str, waves: bool, sources: list[Path]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(cfg.to_dict(), sort_keys=True).encode())
    h.update(f"{sim}|{waves}|{sys.version_info[:2]}".encode())
    if sim == "verilator":
        h.update(".".join(map(str, tools.verilator_version())).encode())
    h.update(repr(VERILATOR_ARGS).encode())
    for path in sources + [HW_DIR / "rtl_params.py", Path(__file__)]:
        h.update(path.name.encode())
        h.update(path.read_bytes() if path.is_file() else b"<missing>")
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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


def _tb_dram_bytes(header: Path) -> int:
    m = re.search(r"TB_DRAM_BYTES\D*?(\d+)", header.read_text())
    return int(m.group(1)) if m else DEFAULT_TB_DRAM_BYTES


def _runner(sim: str):
    from cocotb_tools.runner import get_runner
    return get_runner(sim)


_memo: dict = {}


def get_build(cfg: VTAConfig, sim: str = "verilator", waves: bool = False, rtl_dir=None,
              tb_file=None, root=None) -> Build:
    """The cached build for this config and simulator, compiling it first if needed."""
    if sim not in SIMULATORS:
        raise SimError(f"--sim {sim!r} is not one of {', '.join(SIMULATORS)}")
    rtl_dir = Path(rtl_dir) if rtl_dir else default_rtl_dir()
    tb_file = Path(tb_file) if tb_file else default_tb_file()
    sources = _sources(rtl_dir, tb_file)
    key = _build_key(cfg, sim, waves, sources)
    root = Path(root) if root else cache_root()
    memo_key = (root, key)
    if memo_key in _memo:
        return _memo[memo_key]
    bdir = root / f"{sim}-{'waves-' if waves else ''}{key}"
    done = bdir / "build.ok"
    with _locked(root / f"{sim}-{key}.lock"):
        if not done.is_file():
            _compile(cfg, sim, waves, sources, bdir)
            done.write_text(json.dumps({"sim": sim, "waves": waves, "config": cfg.to_dict()}))
    build = Build(cfg=cfg, sim=sim, waves=waves, dir=bdir, key=key,
                  tb_dram_bytes=_tb_dram_bytes(bdir / "vta_params.vh"))
    _memo[memo_key] = build
    return build


def _compile(cfg, sim, waves, sources, bdir: Path):
    if bdir.exists():
        shutil.rmtree(bdir)
    bdir.mkdir(parents=True)
    _header_writer()(cfg, bdir / "vta_params.vh")
    log = bdir / "build.log"
    with tools.tool_path(sim):
        runner = _runner(sim)
        if sim == "verilator":
            args = list(VERILATOR_ARGS) + (["--trace-fst", "--trace-structs"] if waves else [])
        else:
            args = ["-g2005"]
        try:
            runner.build(sources=sources, includes=[bdir], hdl_toplevel=TB_TOP, build_dir=bdir,
                         build_args=args, timescale=TIMESCALE, waves=waves, always=True, log_file=log)
        except (RuntimeError, SystemExit) as exc:
            raise BuildError(f"{sim} build of the RTL failed ({exc}); log {log}:\n{_tail(log)}") from None


def _write_hex(path: Path, dram: np.ndarray, bus_bytes: int) -> int:
    """One bus word per line, most significant byte first; returns the number of words."""
    data = np.asarray(dram, dtype=np.uint8)
    pad = (-data.size) % bus_bytes
    if pad:
        data = np.concatenate([data, np.zeros(pad, np.uint8)])
    words = data.reshape(-1, bus_bytes)[:, ::-1]
    text = words.tobytes().hex()
    width = 2 * bus_bytes
    with open(path, "w") as fh:
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


def run_jobs(build: Build, jobs: list, work_dir=None, waves_file=None) -> list:
    """Run ``jobs`` back to back in one simulator process; one :class:`Outcome` per job."""
    B = build.cfg.bus_bytes
    tmp = None
    if work_dir is None:
        tmp = tempfile.mkdtemp(prefix="vtasim-rtl-")
        work_dir = tmp
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
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
        _simulate(build, work, log, waves_file)
        outcomes = []
        for k, (job, entry) in enumerate(zip(jobs, manifest)):
            jdir = Path(entry["dir"])
            status_file = jdir / "status.json"
            if not status_file.is_file():
                raise SimError(f"{build.sim} stopped before job {k} finished; simulator log {log}:\n{_tail(log)}")
            status = json.loads(status_file.read_text())
            trace = (jdir / "trace.txt").read_text() if (jdir / "trace.txt").exists() else ""
            dram_hex = (jdir / "dram_out.hex").read_text() if (jdir / "dram_out.hex").exists() else ""
            outcomes.append(Outcome(status=status, dram_hex=dram_hex, trace_text=trace,
                                    waves=Path(waves_file) if waves_file else None, log=log))
        return outcomes
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _simulate(build: Build, work: Path, log: Path, waves_file):
    runner = _runner(build.sim)
    test_args, plusargs = [], []
    if build.waves and waves_file:
        if build.sim == "verilator":
            test_args = ["--trace-file", str(waves_file)]
        else:
            plusargs = [f"+dumpfile_path={waves_file}"]
    env = {"VTASIM_BATCH": str(work / "batch.json"), "COCOTB_TRUST_INERTIAL_WRITES": "1",
           "COCOTB_LOG_LEVEL": "WARNING"}
    # Inside pytest the runner turns a failed cocotb test into sys.exit; we report from our own files.
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        with _project_on_sys_path():
            runner.test(test_module=TEST_MODULE, hdl_toplevel=TB_TOP, hdl_toplevel_lang="verilog", build_dir=build.dir, test_dir=work,
                        extra_env=env, waves=build.waves and waves_file is not None, test_args=test_args,
                        plusargs=plusargs, timescale=TIMESCALE, log_file=log,
                        results_xml=str(work / "results.xml"))
    except SystemExit as exc:
        raise SimError(f"{build.sim} simulation exited with {exc.code}; log {log}:\n{_tail(log)}") from None
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
