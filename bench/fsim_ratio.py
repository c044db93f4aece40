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
image's ``insn_addr``; bench/fsim_driver.py); ``VTADeviceRun`` runs the stream, all layers in this
process (a compiled layer leaves no tokens; one that did would be flagged); its output bytes must
equal both engines' (a row that differs is flagged: a ratio of a wrong run means nothing).

Times are the best of ``--repeat`` runs, taken in turn (fsim, functional, cycle, fsim, ...): fsim's
is the ``VTADeviceRun`` call alone (the copy into its DRAM and the relocation are not counted), ours
are ``run_image`` end to end (program decode, machine set-up and result objects included; the cycle
engine's JIT warmed up first).  It prints each engine's time over fsim's, per layer and in total.
The machine is shared and noisy: ratios measured in one run are what this prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fsim_driver import add_arguments, open_fsim  # noqa: E402

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--layers", default="C2,C3,C4,C5,C6,C7,C8,C9,C10,C11")
    p.add_argument("--reduce", type=int, default=1, help="spatial reduction of the layers (1 = full)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: must be at least 1")
    cfg, fsim = open_fsim(args, "fsim_ratio")
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim import cycle, functional

    names = args.layers.split(",")
    images = [compile_workload(f"resnet18.{n}", cfg, reduce=args.reduce).image for n in names]
    cycle.run_image(images[0], progress=False)            # JIT warm-up of both engines, not timed
    functional.run_image(images[0])
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
        # fsim keeps its token queues from run to run (bench/fsim_driver.py): a layer that leaves tokens
        # would change the runs after it
        left = f"  leaves tokens {ref.leftover_tokens}: later rows ran with them" if ref.leftover_tokens else ""
        print(f"{name:<7}{res.cycles:>9}{best[0]:>10.4f}{best[1]:>10.4f}{best[2]:>10.4f}"
              f"{best[1] / best[0]:>11.2f}{best[2] / best[0]:>12.2f}  {'equal' if same else 'DIFFER'}{left}")
    print("-" * len(head))
    print(f"{'all':<7}{'':>9}{tot[0]:>10.4f}{tot[1]:>10.4f}{tot[2]:>10.4f}{tot[1] / tot[0]:>11.2f}{tot[2] / tot[0]:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
