"""cocotb test module run inside the simulator: one batch of memory images per simulator process.

Orchestration only, never per cycle: the clock is made by vtasim's Verilator main loop
(``$VTASIM_CLOCK`` = ``loop``, ``hw/rtl/tb/verilator_main.cpp``) or by the testbench (``hdl``); the
DRAM model and the retire monitor are HDL (``hw/rtl/tb/tb_top.v``), and Python waits on ``done`` with
one edge trigger; a ``cocotb`` clock build gets cocotb's C-level Clock on ``clk`` instead.
While a job runs (``launch`` high, ``done`` low) that trigger must stay the only thing this module
waits for: the ``loop`` main loop runs the clock without any VPI work then, until ``done`` rises.  For
each job of the manifest named by ``$VTASIM_BATCH`` (written by :mod:`vtasim.sim.rtl.runner`):

reset -> move the job's ``dram_in.hex`` into the working directory -> pulse ``cmd_load`` -> raise
``launch`` -> await ``done`` -> pulse ``cmd_dump`` -> move ``dram_out.hex`` and ``trace.txt`` back
into the job directory and write ``status.json`` there.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer
from cocotb.utils import get_sim_time

async def _cycles(dut, n):
    for _ in range(n):
        await FallingEdge(dut.clk)


async def _pulse(dut, signal):
    signal.value = 1
    await FallingEdge(dut.clk)
    signal.value = 0
    await FallingEdge(dut.clk)


async def _run_job(dut, job: dict, workdir: Path, clock_ns: int):
    jobdir = Path(job["dir"])
    for name in ("dram_out.hex", "trace.txt"):
        (workdir / name).unlink(missing_ok=True)
    dut.launch.value = 0
    dut.cmd_load.value = 0
    dut.cmd_dump.value = 0
    dut.rst.value = 1
    dut.insn_addr.value = job["insn_addr"]
    dut.insn_count.value = job["insn_count"]
    dut.max_cycles.value = job["max_cycles"]
    dut.dump_first.value = job["dump_first"]
    dut.dump_last.value = job["dump_last"]
    await _cycles(dut, 3)
    dut.rst.value = 0
    await FallingEdge(dut.clk)
    os.replace(jobdir / "dram_in.hex", workdir / "dram_in.hex")
    await _pulse(dut, dut.cmd_load)
    dut.launch.value = 1
    # The launch level is sampled at the next rising edge: that cycle is the accelerator's cycle 0.
    launch_ns = get_sim_time("ns") + clock_ns / 2
    t0, c0 = time.perf_counter(), time.process_time()
    if not int(dut.done.value):
        await RisingEdge(dut.done)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    await FallingEdge(dut.clk)
    status = {"finish": int(dut.finish.value), "error": int(dut.error.value),
              "error_code": int(dut.error_code.value), "cycles": int(dut.cycles.value),
              "max_quiet": int(dut.max_quiet.value),
              "launch_ns": launch_ns, "clock_ns": clock_ns, "wall_s": wall_s,
              "cpu_s": cpu_s}
    dut.launch.value = 0
    await _pulse(dut, dut.cmd_dump)
    await FallingEdge(dut.clk)
    for name in ("dram_out.hex", "trace.txt"):
        if (workdir / name).exists():
            os.replace(workdir / name, jobdir / name)
    (workdir / "dram_in.hex").unlink(missing_ok=True)
    (jobdir / "status.json").write_text(json.dumps(status))


@cocotb.test()
async def run_batch(dut):
    """Run every job of the manifest back to back in this simulator process."""
    manifest = json.loads(Path(os.environ["VTASIM_BATCH"]).read_text())
    workdir = Path.cwd()
    clock_ns = int(os.environ["VTASIM_CLOCK_NS"])       # vtasim.sim.rtl.runner.CLOCK_NS
    if os.environ["VTASIM_CLOCK"] == "cocotb":
        cocotb.start_soon(Clock(dut.clk, clock_ns, unit="ns").start())
    await Timer(1, unit="ns")
    for job in manifest["jobs"]:
        await _run_job(dut, job, workdir, clock_ns)
