"""What the four tutorial scripts share: the command line and the "run on the simulator" part.

TVM's tutorials end with "run the module on the device, compare with numpy, print
``vta.testing.simulator.stats()``".  Here the module is a memory image, the device is the
functional engine (TVM's fsim) and the cycle engine; the counters are fsim's, by name.
"""

from __future__ import annotations

import argparse

import numpy as np

import vtasim.sim.cycle
import vtasim.sim.functional


def parse_args(doc: str, argv=None, reduce: bool = False):
    p = argparse.ArgumentParser(description=" ".join(doc.strip().split("\n\n")[0].split()))
    p.add_argument("--config", default=None, metavar="PATH", help="VTA config file (default: config/vta_config.json)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="save the memory image here (replay: vtasim run DIR --engine cycle --check)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    if reduce:
        p.add_argument("--reduce", type=int, default=1, choices=(1, 2, 4, 8),
                       help="divide the channel counts (and the oc tile) by R for a quick run")
    return p.parse_args(argv)


def run(built, output: str, ref: np.ndarray, out_dir=None) -> int:
    """Run ``built.image`` on the functional and the cycle engine, compare output ``output`` with
    ``ref`` (the tutorial's numpy reference, already packed), print fsim's statistics and the
    cycle count.  0 when both engines match ``ref`` (and agree on the counters), else 1."""
    if out_dir is not None:
        built.image.save(out_dir)
        print(f"memory image saved to {out_dir} (replay: vtasim run {out_dir} --engine cycle --check)")
    ok, counters = True, []
    for engine, run_image in (("functional", vtasim.sim.functional.run_image), ("cycle", vtasim.sim.cycle.run_image)):
        r = run_image(built.image)
        got = np.frombuffer(r.outputs[output], dtype=ref.dtype).reshape(ref.shape)
        if not np.array_equal(got, ref):
            bad = int(np.count_nonzero(got != ref))
            print(f"{engine}: MISMATCH, {bad} of {ref.size} values of `{output}` differ from numpy")
            ok = False
        if r.leftover_tokens:
            print(f"{engine}: tokens left in the queues: {r.leftover_tokens}")
            ok = False
        counters.append(r.counters)
    if counters[0] != counters[1]:
        print(f"counters differ between engines: functional {counters[0]}, cycle {counters[1]}")
        ok = False
    print("Execution statistics:")
    for k, v in counters[1].items():
        print(f"\t{k:<16}: {v:>16}")
    print(f"\t{'cycle_count':<16}: {r.cycles:>16}")
    return 0 if ok else 1
