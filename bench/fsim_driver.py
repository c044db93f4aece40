"""TVM's VTA fsim driven through its C API (vta/driver.h), for bench/fsim_ratio.py and bench/fsim_fuzz.py.

``Fsim(DIR)`` loads ``libtvm_runtime.so`` and ``libvta_fsim.so`` from a TVM build directory
(``bench/build_fsim.sh`` makes one); ``check_config(DIR, cfg)`` holds the build's VTA config to this
run's.  Three things about fsim a harness has to know (read in TVM's ``src/sim/sim_driver.cc`` and
``sim_tlpp.cc``):

* its DRAM starts at physical page 1: an image is relocated into a buffer (:meth:`Fsim.load`,
  ``MemoryImage.relocated``);
* its SRAM is allocated uninitialised, where vtasim defines it as zero: :meth:`Fsim.zero_sram` loads
  zeros over every buffer first;
* its dependency token queues are one process-wide object that a run does not clear, so tokens a
  program leaves over reach the next program in the process: :meth:`Fsim.outputs_in_child` runs a
  program in a forked child of its own.  And its run loop ends only when the last instruction it
  executed was a FINISH (a FINISH that runs before another module's last instruction spins forever):
  the child has a time limit.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_UOP, MEM_WGT  # noqa: E402
from vtasim.hw.isa import INSN_BYTES, OP_FINISH, OP_LOAD, Insn, encode_stream  # noqa: E402

LIBS = ("libtvm_runtime.so", "libvta_fsim.so")     # the runtime first: fsim resolves its symbols there


class BadFsim(Exception):
    """The --fsim directory cannot serve this run (one line, exit 2)."""


class Fsim:
    """TVM's fsim through its C driver API (vta/driver.h): one device, buffers from its DRAM."""

    def __init__(self, build_dir: Path):
        missing = [n for n in LIBS if not (build_dir / n).is_file()]
        if missing:
            raise BadFsim(f"--fsim {build_dir}: no {', '.join(missing)} there (bench/build_fsim.sh builds them)")
        try:
            libs = [ctypes.CDLL(str(build_dir / n), mode=ctypes.RTLD_GLOBAL) for n in LIBS]
        except OSError as exc:
            raise BadFsim(f"--fsim {build_dir}: cannot load its libraries ({exc})") from None
        f = self.lib = libs[-1]
        f.VTAMemAlloc.restype, f.VTAMemAlloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_int]
        f.VTAMemFree.restype, f.VTAMemFree.argtypes = None, [ctypes.c_void_p]
        f.VTAMemGetPhyAddr.restype, f.VTAMemGetPhyAddr.argtypes = ctypes.c_uint32, [ctypes.c_void_p]
        f.VTADeviceAlloc.restype, f.VTADeviceAlloc.argtypes = ctypes.c_void_p, []
        f.VTADeviceRun.restype = ctypes.c_int
        f.VTADeviceRun.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]
        self.device = f.VTADeviceAlloc()

    def load(self, cfg, image):
        """``(buffer, its numpy view, instruction physical address)``: ``image`` relocated into fsim's DRAM."""
        buf = self.lib.VTAMemAlloc(image.dram_size, 0)
        phy = self.lib.VTAMemGetPhyAddr(buf)
        mem = np.ctypeslib.as_array((ctypes.c_uint8 * image.dram_size).from_address(buf))
        mem[:] = image.relocated(phy).dram()[phy:phy + image.dram_size]
        return buf, mem, phy + image.insn_addr

    def run(self, image, insn_phy) -> float:
        t = time.perf_counter()
        self.lib.VTADeviceRun(self.device, insn_phy, image.insn_count, 1 << 31)
        return time.perf_counter() - t

    def zero_sram(self, cfg) -> None:
        """Zeros over every SRAM buffer of the device: one LOAD from a zero DRAM buffer per buffer,
        each a program of its own ending in a FINISH that waits for it (see the module docstring)."""
        depth = {MEM_UOP: cfg.uop_depth, MEM_WGT: cfg.wgt_depth, MEM_INP: cfg.inp_depth, MEM_ACC: cfg.acc_depth}
        nbytes = max(depth[m] * cfg.dram_elem_bytes(m) for m in depth) + 2 * INSN_BYTES
        buf = self.lib.VTAMemAlloc(nbytes, 0)
        phy = self.lib.VTAMemGetPhyAddr(buf)
        mem = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(buf))
        at = nbytes - 2 * INSN_BYTES
        for m, n in depth.items():
            token = int(m in (MEM_INP, MEM_WGT))      # the load module's LOAD hands the FINISH a token
            insns = [Insn(opcode=OP_LOAD, memory_type=m, dram_base=phy // cfg.dram_elem_bytes(m), y_size=1,
                          x_size=n, x_stride=n, push_next=token), Insn(opcode=OP_FINISH, pop_prev=token)]
            mem[:] = 0
            mem[at:] = np.frombuffer(encode_stream(cfg, insns), np.uint8)
            self.lib.VTADeviceRun(self.device, phy + at, len(insns), 1 << 31)
        self.lib.VTAMemFree(buf)

    def outputs_in_child(self, cfg, image, timeout_s: int = 30):
        """``image``'s output bytes (one ``bytes`` per output) as fsim leaves them, run on zeroed SRAM in
        a forked child process of its own; a string saying what happened if the child failed."""
        sizes = [o.nbytes for o in image.outputs]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                                     # the child: run, write the bytes, leave
            try:
                os.close(r)
                signal.alarm(timeout_s)
                self.device = self.lib.VTADeviceAlloc()
                self.zero_sram(cfg)
                buf, mem, insn_phy = self.load(cfg, image)
                self.run(image, insn_phy)
                out = image.outputs_from(mem)
                data = b"".join(bytes(out[o.name]) for o in image.outputs)
                while data:
                    data = data[os.write(w, data):]
            finally:
                os._exit(0)
        os.close(w)
        chunks = []
        while chunk := os.read(r, 1 << 20):
            chunks.append(chunk)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        data = b"".join(chunks)
        if len(data) != sum(sizes):
            if not os.WIFSIGNALED(status):
                return "fsim's child process exited early"
            if os.WTERMSIG(status) == signal.SIGALRM:
                return f"fsim's child process did not end within {timeout_s} s"
            return f"fsim's child process was killed by signal {os.WTERMSIG(status)}"
        out, at = [], 0
        for n in sizes:
            out.append(data[at:at + n])
            at += n
        return out


def check_config(build_dir: Path, cfg) -> None:
    """The fsim build's VTA config (the ``vta_config.json`` its cmake read) must be this run's."""
    f = build_dir / "vta_config.json"
    if not f.is_file():
        raise BadFsim(f"--fsim {build_dir}: no vta_config.json there (the config fsim was built for)")
    try:
        theirs = json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        raise BadFsim(f"--fsim {build_dir}: vta_config.json is not readable JSON ({exc})") from None
    if not isinstance(theirs, dict):
        raise BadFsim(f"--fsim {build_dir}: vta_config.json is not a JSON object")
    ours = json.loads(json.dumps(cfg.to_dict()))
    diff = sorted(k for k in theirs if k in ours and theirs[k] != ours[k])   # the keys TVM's config has
    if diff:
        raise BadFsim(f"--fsim {build_dir} was built for another VTA config ({', '.join(diff)} differ); "
                         "rebuild it with bench/build_fsim.sh")


def add_arguments(p) -> None:
    """The options every fsim bench takes: ``--fsim DIR`` and ``--config``."""
    p.add_argument("--fsim", type=Path, required=True, help="TVM build directory with libvta_fsim.so")
    p.add_argument("--config", type=Path, default=None)


def open_fsim(args, tool: str):
    """``(config, Fsim)`` for the parsed ``args``; a build that cannot serve them is one line on
    stderr naming ``tool`` and exit 2."""
    from vtasim.hw.config import load_config
    cfg = load_config(args.config)
    try:
        check_config(args.fsim, cfg)
        return cfg, Fsim(args.fsim)
    except BadFsim as exc:
        print(f"{tool}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
