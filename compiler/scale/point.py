"""Evaluate one sweep point (runs on a Dask worker; plain dicts in and out).

Metrics of a point (columns of the results file):

* ``cycles``          cycle-engine cycles of the whole workload
* ``gemm_uops``       GEMM micro-ops executed (``gemm_counter``); ``gemm_util`` = gemm_uops / cycles
* ``macs``            gemm_uops * BATCH * BLOCK_IN * BLOCK_OUT; ``macs_per_cycle`` = macs / cycles
* ``dram_bytes``      sum of the engine's ``*_nbytes`` counters (inp/wgt/acc/uop loads, out stores)
* ``sram_bytes``      2^LOG_UOP_BUFF_SIZE + 2^LOG_INP_BUFF_SIZE + 2^LOG_WGT_BUFF_SIZE + 2^LOG_ACC_BUFF_SIZE
* ``area_proxy``      see :func:`area_proxy`
* ``seconds``         wall time of compile + run on the worker
* ``counters``        every counter of the cycle engine's run, as a JSON object

A config that ``VTAConfig.from_dict`` rejects (e.g. the buffers overflow the ISA) is ``status =
skipped`` with the rule in ``reason``; a compile or simulation error is ``status = error`` with the
error's first line; neither stops the other points.
"""

from __future__ import annotations

import json
import time

__all__ = ["MULT_AREA_BITS", "area_proxy", "sram_bytes", "evaluate_point"]

# One int8 x int8 multiply-accumulate lane, in SRAM-bit equivalents: an 8x8 array multiplier is
# about 64 full adders (~28 transistors each, ~1800 T) plus its share of the 32-bit adder tree;
# a 6T SRAM bit cell is 6 T, so one lane ~ 300-400 bit cells.  The proxy uses 384.
MULT_AREA_BITS = 384


def sram_bytes(cfg: dict) -> int:
    return sum(1 << cfg[k] for k in ("LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
                                     "LOG_ACC_BUFF_SIZE"))


def area_proxy(cfg: dict) -> int:
    """``8 * sram_bytes + MULT_AREA_BITS * BATCH * BLOCK_IN * BLOCK_OUT`` (SRAM-bit equivalents).

    sram_bytes = 2^LOG_UOP_BUFF_SIZE + 2^LOG_INP_BUFF_SIZE + 2^LOG_WGT_BUFF_SIZE + 2^LOG_ACC_BUFF_SIZE,
    BATCH = 2^LOG_BATCH, BLOCK_IN = BLOCK_OUT = 2^LOG_BLOCK, MULT_AREA_BITS = 384 (one int8 MAC lane
    ~ 384 SRAM bit cells).  A ranking proxy, not silicon area: it ignores the bus width, queues and
    control.
    """
    mults = (1 << cfg["LOG_BATCH"]) * (1 << cfg["LOG_BLOCK"]) ** 2
    return 8 * sram_bytes(cfg) + MULT_AREA_BITS * mults


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:500]


def _tuned(wl_name: str, cfg, reduce: int, trials: int, seed: int):
    """Tune in this process (a Dask worker cannot fork a pool) and compile the best knobs."""
    from vtasim.compiler.errors import CompileError
    from vtasim.compiler.ops import compile_workload
    from vtasim.compiler.tuning.knobs import fallback_knobs, knob_space
    from vtasim.compiler.tuning.tune import tune
    from vtasim.compiler.tuning.workloads import parse_workload
    wl = parse_workload(wl_name, cfg, reduce=reduce)
    if not knob_space(wl, cfg):         # nothing to search (e.g. vadd): the one schedule there is
        return (compile_workload(wl_name, cfg, knobs=fallback_knobs(wl, cfg), reduce=reduce, with_expected=False),
                "tuned (no knobs)")
    res = tune(wl_name, cfg, trials=trials, jobs=0, seed=seed, reduce=reduce, progress=None)
    best = res.best()
    if best is None:
        raise CompileError(f"none of the {len(res.records)} tuning trials compiled")
    compiled = compile_workload(wl_name, cfg, knobs=best["knobs"], reduce=reduce, with_expected=False)
    return compiled, f"tuned ({len(res.records)} trials, seed {seed})"


def evaluate_point(point: dict) -> dict:
    """``{config, workload, reduce, knobs}`` -> one results row (see :mod:`vtasim.compiler.scale.results`)."""
    from vtasim.hw.config import ConfigError, VTAConfig
    from vtasim.compiler.scale.spec import point_key
    cfg_raw = point["config"]
    wl_name, reduce, source = point["workload"], point["reduce"], point["knobs"]
    tune_opts = tuple(point.get("tune") or (16, 0))
    row = {"key": point_key(cfg_raw, wl_name, reduce, source, tune_opts), "status": "ok", "reason": "",
           "workload": wl_name, "reduce": reduce, "knobs": source, **cfg_raw,
           "sram_bytes": sram_bytes(cfg_raw), "area_proxy": area_proxy(cfg_raw)}
    t0 = time.perf_counter()
    try:
        cfg = VTAConfig.from_dict(cfg_raw, source="point")
    except ConfigError as exc:
        row.update(status="skipped", reason=_first_line(exc), seconds=0.0)
        return row
    row["bitstream"] = cfg.bitstream
    try:
        from vtasim.compiler.tuning.knobs import fallback_knobs
        from vtasim.compiler.ops import compile_workload
        from vtasim.compiler.tuning.workloads import parse_workload
        from vtasim.sim.cycle import run_image
        if source == "fallback":
            wl = parse_workload(wl_name, cfg, reduce=reduce)
            compiled = compile_workload(wl_name, cfg, knobs=fallback_knobs(wl, cfg), reduce=reduce,
                                        with_expected=False)
            detail = "fallback"
        elif source == "tophub":
            from vtasim.compiler.demo import fitting_knobs
            compiled, detail = fitting_knobs(wl_name, cfg, reduce=reduce)
        elif source == "tuned":
            compiled, detail = _tuned(wl_name, cfg, reduce, *tune_opts)
        else:
            raise ValueError(f"knob source {source!r} is not implemented")
        res = run_image(compiled.image)
    except Exception as exc:        # noqa: BLE001 - a failing point records its error; the sweep goes on
        row.update(status="error", reason=f"{type(exc).__name__}: {_first_line(exc)}",
                   seconds=round(time.perf_counter() - t0, 3))
        return row
    c = res.counters
    cycles = int(res.cycles)
    gemm = int(c["gemm_counter"])
    macs = gemm * cfg.batch * cfg.block_in * cfg.block_out
    row.update(cycles=cycles, gemm_uops=gemm, alu_uops=int(c["alu_counter"]),
               gemm_util=gemm / cycles if cycles else 0.0,
               dram_bytes=sum(int(v) for k, v in c.items() if k.endswith("_nbytes")),
               macs=macs, macs_per_cycle=macs / cycles if cycles else 0.0,
               insns=compiled.image.insn_count, knob_detail=detail,
               knob_values=json.dumps(compiled.knobs, sort_keys=True),
               counters=json.dumps({k: int(v) for k, v in c.items()}, sort_keys=True),
               seconds=round(time.perf_counter() - t0, 3))
    return row
