"""Where the wall time of a cycle-engine run goes, stage by stage (what ``bench/engine_speed.py`` prints).

    >>> from vtasim.sim.cycle.profile import stage_times
    >>> t = stage_times(image, repeat=10)
    >>> t["total"] - t["data"]          # seconds above the data work

Stages, each the best of ``repeat`` timings (seconds): ``decode`` = :func:`vtasim.sim.program.load_program` from
scratch (decode + static checks), ``decode_cached`` = what ``run_image`` pays for it with the per-image cache,
``setup`` = building the machine (state arrays, parameters, module queues, clearing pooled memories as
``run_image`` does), ``dispatch`` = one call into
the compiled core that does nothing (numba's argument checks), ``core`` = the compiled run, ``data`` = the
data kernels alone on the same instructions in start order with no event loop
(:meth:`~vtasim.sim.cycle.engine.CycleMachine.replay`), ``total`` = ``run_image`` end to end and ``result`` =
``total`` minus the stages above it (result and trace objects, output views).  The event loop's share is
``core - data - dispatch``.
"""

from __future__ import annotations

import time

import numpy as np

from vtasim.sim.cycle.engine import CycleMachine, memory_pool, cached_program, run_image, warm_up
from vtasim.sim.program import load_program

__all__ = ["stage_times"]


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def stage_times(image, repeat: int = 5, gemm: str = "auto") -> dict:
    warm_up(image.cfg)
    prog = cached_program(image)
    cfg = image.cfg

    def timed(use):
        """Seconds of ``use(machine)`` on a machine built as run_image builds it (pooled memories)."""
        mem = memory_pool.take(cfg)
        try:
            m = CycleMachine(prog, image.dram(), image.insn_addr, gemm, mem)
            t = time.perf_counter()
            use(m)
            return time.perf_counter() - t
        finally:
            memory_pool.give(cfg, mem)

    first = CycleMachine(prog, image.dram(), image.insn_addr, gemm)
    first.run(progress=False)
    order = np.argsort(first.s_cyc, kind="stable")
    order = order[first.s_cyc[order] >= 0]
    kinds = np.ones(8, np.int64)
    core = min(timed(lambda m: m.run(progress=False)) for _ in range(repeat))
    data = min(timed(lambda m: m.replay(order, kinds)) for _ in range(repeat))

    def setup():
        mem = memory_pool.take(cfg)
        CycleMachine(prog, image.dram(), image.insn_addr, gemm, mem)
        memory_pool.give(cfg, mem)

    idle = CycleMachine(prog, image.dram(), image.insn_addr, gemm)
    out = {"decode": _best(lambda: load_program(image), repeat),
           "decode_cached": _best(lambda: cached_program(image), repeat),
           "setup": _best(setup, repeat),
           "dispatch": _best(lambda: idle.step(0), repeat),
           "core": core, "data": data,
           "total": _best(lambda: run_image(image, progress=False, gemm=gemm), repeat)}
    out["result"] = max(0.0, out["total"] - out["decode_cached"] - out["setup"] - out["core"])
    return out
