"""TVM's fsim next to vtasim's functional and cycle engines on the compiled ResNet-18 C2-C11, one run.

    python bench/fsim_ratio.py --fsim ~/tvm/build                  # C2-C11 full size, best of 3
    python bench/fsim_ratio.py --fsim ~/tvm/build --layers C2,C4 --repeat 5

``--fsim DIR``: a TVM build directory holding ``libvta_fsim.so`` and ``libtvm_runtime.so`` (TVM's
fast functional simulator of VTA and the runtime it links against).  No TVM wheel has VTA any more
(it left TVM after 0.14), so build it from a TVM source tree that still has it:
``bench/build_fsim.sh TVM_SOURCE_DIR`` (a checkout of TVM v0.14.0, or of any commit before VTA was
phased out, with its submodules ``3rdparty/vta-hw``, ``dlpack`` and ``dmlc-core``) configures it for
this checkout's ``config/vta_config.json`` and builds only those two libraries (minutes on two
cores).  The build's ``vta_config.json`` must be the config of this run (``--config``).

Per layer: the compiled image is copied into fsim's DRAM and relocated there (fsim's DRAM starts at
physical page 1, not at address 0: every LOAD/STORE's ``dram_base`` is moved by the buffer's physical
address over that memory type's element size, and the instructions start at that address plus the
image's ``insn_addr``); ``VTADeviceRun`` runs the stream; its output bytes must equal the
functional engine's (a row that differs is flagged: a ratio of a wrong run means nothing).

Times are the best of ``--repeat`` runs, taken in turn (fsim, functional, cycle, fsim, ...): fsim's
is the ``VTADeviceRun`` call alone (the copy into its DRAM and the relocation are not counted), ours
are ``run_image`` end to end (program decode, machine set-up and result objects included; the cycle
engine's JIT warmed up first).  It prints each engine's time over fsim's, per layer and in total.
The machine is shared and noisy: ratios measured in one run are what this prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vtasim.hw.config import load_config  # noqa: E402
from vtasim.hw.isa import INSN_BYTES, OP_LOAD, OP_STORE, decode_stream, encode_stream  # noqa: E402

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
        mem[:] = image.dram()
        insns = decode_stream(cfg, image.insn_bytes())
        for insn in insns:
            if insn.opcode in (OP_LOAD, OP_STORE):
                elem = cfg.dram_elem_bytes(insn.memory_type)
                if phy % elem:
                    raise BadFsim(f"fsim's buffer at physical 0x{phy:x} is not aligned to {elem}-byte elements")
                insn.dram_base += phy // elem
        raw = np.frombuffer(encode_stream(cfg, insns), np.uint8)
        mem[image.insn_addr:image.insn_addr + image.insn_count * INSN_BYTES] = raw
        return buf, mem, phy + image.insn_addr

    def run(self, image, insn_phy) -> float:
        t = time.perf_counter()
        self.lib.VTADeviceRun(self.device, insn_phy, image.insn_count, 1 << 31)
        return time.perf_counter() - t


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fsim", type=Path, required=True, help="TVM build directory with libvta_fsim.so")
    p.add_argument("--layers", default="C2,C3,C4,C5,C6,C7,C8,C9,C10,C11")
    p.add_argument("--reduce", type=int, default=1, help="spatial reduction of the layers (1 = full)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--config", type=Path, default=None)
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: must be at least 1")
    cfg = load_config(args.config)
    try:
        check_config(args.fsim, cfg)
        fsim = Fsim(args.fsim)
    except BadFsim as exc:
        print(f"fsim_ratio: {exc}", file=sys.stderr)
        return 2
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim import cycle, functional

    names = args.layers.split(",")
    images = [compile_workload(f"resnet18.{n}", cfg, reduce=args.reduce).image for n in names]
    cycle.run_image(images[0], progress=False)            # JIT warm-up, not timed
    head = (f"{'layer':<7}{'cycles':>9}{'fsim s':>10}{'func s':>10}{'cycle s':>10}"
            f"{'func/fsim':>11}{'cycle/fsim':>12}  outputs vs functional")
    print(f"best of {args.repeat}; fsim = TVM's VTA fsim ({args.fsim}), func/cycle = vtasim's engines\n")
    print(head)
    print("-" * len(head))
    tot = np.zeros(3)
    for name, image in zip(names, images):
        best = np.full(3, np.inf)
        same = True
        for _ in range(args.repeat):
            buf, mem, insn_phy = fsim.load(cfg, image)
            best[0] = min(best[0], fsim.run(image, insn_phy))
            t = time.perf_counter()
            ref = functional.run_image(image)
            best[1] = min(best[1], time.perf_counter() - t)
            t = time.perf_counter()
            res = cycle.run_image(image, progress=False)
            best[2] = min(best[2], time.perf_counter() - t)
            fsim_out = image.outputs_from(mem)
            same = same and all(bytes(fsim_out[o.name]) == bytes(ref.outputs[o.name]) == bytes(res.outputs[o.name])
                                for o in image.outputs)
            fsim.lib.VTAMemFree(buf)
        tot += best
        print(f"{name:<7}{res.cycles:>9}{best[0]:>10.4f}{best[1]:>10.4f}{best[2]:>10.4f}"
              f"{best[1] / best[0]:>11.2f}{best[2] / best[0]:>12.2f}  {'equal' if same else 'DIFFER'}")
    print("-" * len(head))
    print(f"{'all':<7}{'':>9}{tot[0]:>10.4f}{tot[1]:>10.4f}{tot[2]:>10.4f}{tot[1] / tot[0]:>11.2f}{tot[2] / tot[0]:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
