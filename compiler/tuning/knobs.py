"""Schedule knobs of ``conv2d_packed`` and ``dense_packed``: the space, the fallback, TopHub, logs.

A knob set is a plain dict, as AutoTVM's config entity prints it::

    {"tile_b": [1, 1], "tile_h": [7, 8], "tile_w": [1, 56], "tile_ci": [4, 1], "tile_co": [2, 2],
     "oc_nthread": 2, "h_nthread": 1}

Each ``tile_*`` is a 2-way split ``[outer, inner]`` of an extent (batch blocks, output rows, output
columns, input-channel blocks, output-channel blocks): the inner factor is the tile held in SRAM.
The fallback is AutoTVM's element 0 of every knob (every inner factor 1, one thread: spec 7.3);
TopHub holds the pre-tuned ResNet-18 records of ``vta_v0.10.log`` for the default config only.

Tuning logs are JSON lines, one trial per line::

    {"workload": "resnet18.C2", "config": "1x16_i8w8a32_15_15_18_17", "knobs": {...},
     "cycles": 535000, "gemm_uops": 451584, "error": null}

``best_from_log`` picks the fewest cycles for a workload, config and size (``reduce``; a record without
it was tuned at full size); ``tuned_sizes`` lists the sizes a log has.  Every record is checked as it
is read: ``workload``/``config`` strings, ``knobs`` an object of integers or ``[outer, inner]`` pairs,
``cycles``/``gemm_uops``/``insns`` non-negative integers or null, ``error`` a string or null (strict
JSON: no NaN, no duplicate keys); a line over ``MAX_LOG_LINE`` bytes or a log over ``MAX_LOG_BYTES``
is refused.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from vtasim.hw.files import brief, iter_json_lines, regular_size
from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.workloads import Conv2d, Dense, VAdd

__all__ = ["knob_space", "fallback_knobs", "tophub_knobs", "fitting_knobs", "check_knobs", "best_from_log", "tuned_sizes",
           "read_log", "iter_log", "knob_value_ok", "append_log", "check_log_target", "split_extents", "MAX_LOG_BYTES",
           "MAX_LOG_LINE"]

MAX_LOG_BYTES = 128 << 20      # a tuning log of about 400k trials; read line by line (vtasim.hw.files)
MAX_LOG_LINE = 1 << 16         # one record is about 300 bytes

TOPHUB_MODEL = "1x16_i8w8a32_15_15_18_17"
_TOPHUB_RESNET18 = {  # layer: tile_h, tile_w, tile_ci, tile_co, oc_nthread, h_nthread (spec 7.3)
    "C2": ([7, 8], [1, 56], [4, 1], [2, 2], 2, 1),
    "C3": ([4, 7], [1, 28], [4, 1], [2, 4], 2, 1),
    "C4": ([4, 7], [1, 28], [4, 1], [2, 4], 1, 2),
    "C5": ([2, 14], [1, 28], [8, 1], [4, 2], 1, 2),
    "C6": ([1, 14], [1, 14], [8, 1], [4, 4], 2, 1),
    "C7": ([2, 7], [1, 14], [8, 1], [2, 8], 2, 1),
    "C8": ([1, 14], [1, 14], [16, 1], [4, 4], 2, 1),
    "C9": ([1, 7], [1, 7], [16, 1], [2, 16], 2, 1),
    "C10": ([1, 7], [1, 7], [16, 1], [2, 16], 2, 1),
    "C11": ([1, 7], [1, 7], [32, 1], [2, 16], 2, 1),
}


def split_extents(wl, cfg) -> dict:
    """The extent each ``tile_*`` knob splits, for workload ``wl`` under ``cfg``."""
    if hasattr(wl, "split_extents"):          # grouped and transposed convolutions say it themselves
        return wl.split_extents(cfg)
    if isinstance(wl, Conv2d):
        return {"tile_b": wl.batch // cfg.batch, "tile_h": wl.oh, "tile_w": wl.ow,
                "tile_ci": wl.cin // cfg.block_in, "tile_co": wl.cout // cfg.block_out}
    if isinstance(wl, Dense):
        return {"tile_b": wl.batch // cfg.batch, "tile_ci": wl.cin // cfg.block_in,
                "tile_co": wl.cout // cfg.block_out}
    return {}


def _thread_knobs(wl) -> tuple:
    if isinstance(wl, Conv2d) or hasattr(wl, "thread_rules"):
        return ("oc_nthread", "h_nthread")
    if isinstance(wl, Dense):
        return ("oc_nthread",)
    return ()


def knob_space(wl, cfg) -> dict:
    """``{knob: [choices]}``: every factor pair of each split, and {1, 2} for each thread knob."""
    space = {}
    for knob, n in split_extents(wl, cfg).items():
        space[knob] = [[n // d, d] for d in range(1, n + 1) if n % d == 0]
    for knob in _thread_knobs(wl):
        space[knob] = [1, 2]
    space.update(getattr(wl, "extra_knobs", lambda: {})())
    return space


def fallback_knobs(wl, cfg) -> dict:
    """AutoTVM's fallback: element 0 of every knob (inner factor 1, one thread)."""
    return {k: v[0] for k, v in knob_space(wl, cfg).items()}


def _divisors_desc(n: int) -> list:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _fits(wl, cfg, b, h, w, ci, co, acc_tensors, acc_tiles: int = 1) -> bool:
    """Whether one tile (inner factors ``b, h, w, ci, co``) fits the scratchpads, single-buffered:
    the input window with its halo, the weights, and ``acc_tiles`` accumulator tiles (2: the exact
    requantisation's copy of the tile) plus ``acc_tensors`` per-channel vectors (a bias,
    requantisation multipliers)."""
    if hasattr(wl, "tile_fits"):
        return wl.tile_fits(cfg, b, h, w, ci, co, acc_tensors, acc_tiles)
    if isinstance(wl, Conv2d):
        ih, iw = (h - 1) * wl.stride + wl.k, (w - 1) * wl.stride + wl.k
        inp, wgt = b * ci * ih * iw, co * ci * wl.k * wl.k
        acc = acc_tiles * b * co * h * w + co * acc_tensors
    else:
        inp, wgt, acc = b * ci, co * ci, b * co * (acc_tiles + acc_tensors)
    return inp <= cfg.inp_depth and wgt <= cfg.wgt_depth and acc <= cfg.acc_depth


def fitting_knobs(wl, cfg, acc_tensors: int = 1, acc_tiles: int = 1) -> dict:
    """The largest output tiles that fit the scratchpads (no virtual threads), for a layer without a
    TopHub record: fewest tiles first, then the most output channels per tile (weight reuse); the
    accumulator holds ``acc_tiles`` tiles and ``acc_tensors`` per-channel vectors (:func:`_fits`).  The
    reduction stays split one input-channel block per step (``tile_ci`` inner 1), as in every TopHub
    record: a wider input tile is a 3-D DMA, which the load instruction cannot express.  Far fewer
    instructions than the fallback's unit tiles; whether the lowered program fits (uop kernels,
    instruction fields) is still the compiler's to say."""
    ext = split_extents(wl, cfg)
    conv = isinstance(wl, Conv2d) or hasattr(wl, "tile_fits")
    hs = _divisors_desc(ext["tile_h"]) if conv else [1]
    ws = _divisors_desc(ext["tile_w"]) if conv else [1]
    best, best_key = None, None
    for co in _divisors_desc(ext["tile_co"]):
        for h in hs:
            for w in ws:
                if not _fits(wl, cfg, 1, h, w, 1, co, acc_tensors, acc_tiles):
                    continue
                tiles = (ext["tile_co"] // co) * (ext["tile_h"] // h if conv else 1) * (ext["tile_w"] // w if conv else 1)
                key = (-tiles, co)
                if best_key is None or key > best_key:
                    best, best_key = (co, h, w), key
    knobs = fallback_knobs(wl, cfg)
    if best is None:
        return knobs
    co, h, w = best
    knobs["tile_co"] = [ext["tile_co"] // co, co]
    if conv:
        knobs.update(tile_h=[ext["tile_h"] // h, h], tile_w=[ext["tile_w"] // w, w])
    return knobs


def tophub_knobs(wl, cfg, any_config: bool = False) -> dict | None:
    """The TopHub record of a ResNet-18 layer on the default config, else None.

    The record is adapted where the layer differs from the one it was tuned for: each split's
    inner factor becomes the largest divisor of the extent not above the record's (a spatially
    reduced layer ``C2/r4``; with ``any_config``, also the channel blocks of another config), and a
    thread knob that no longer divides its outer factor drops to 1.  Whether the adapted tiles fit
    another config's SRAMs is for the compiler to say."""
    base = wl.name.split("/")[0] if isinstance(wl, Conv2d) else None
    if base not in _TOPHUB_RESNET18 or (cfg.bitstream != TOPHUB_MODEL and not any_config):
        return None
    h, w, ci, co, oc_t, h_t = _TOPHUB_RESNET18[base]
    knobs = {"tile_b": [1, 1], "tile_h": list(h), "tile_w": list(w), "tile_ci": list(ci),
             "tile_co": list(co), "oc_nthread": oc_t, "h_nthread": h_t}
    for key, n in split_extents(wl, cfg).items():
        inner = max(d for d in range(1, min(n, knobs[key][1]) + 1) if n % d == 0)
        knobs[key] = [n // inner, inner]
    for thread, split in (("oc_nthread", "tile_co"), ("h_nthread", "tile_h")):
        if knobs[split][0] % knobs[thread]:
            knobs[thread] = 1
    return knobs


def check_knobs(wl, cfg, knobs: dict) -> dict:
    """``knobs`` completed with the fallback for missing keys, every value checked against the space."""
    if not isinstance(knobs, dict):
        raise CompileError(f"{wl.name}: knobs = {brief(knobs)} must be a JSON object of knob values")
    if isinstance(wl, VAdd):
        if knobs:
            raise CompileError(f"{wl.name}: unknown knob(s) {', '.join(sorted(map(str, knobs)))[:200]} "
                               f"(rule: a vadd has no knobs)")
        return {}
    space = knob_space(wl, cfg)
    unknown = set(knobs) - set(space)
    if unknown:
        raise CompileError(f"{wl.name}: unknown knob(s) {', '.join(sorted(unknown))}; knobs are {', '.join(space)}")
    out = fallback_knobs(wl, cfg)
    for k, v in knobs.items():
        if not knob_value_ok(v):
            raise CompileError(f"{wl.name}: knob {k} = {brief(v)} must be an integer >= 0 or a split [outer, inner] "
                               f"of two (rule: knob values are integers, as AutoTVM prints them)")
        v = list(v) if isinstance(v, (list, tuple)) else v
        if v not in space[k]:
            if k.startswith("tile_"):
                n = split_extents(wl, cfg)[k]
                raise CompileError(f"{wl.name}: knob {k} = {v!r} is not a split [outer, inner] of extent {n} "
                                   f"(outer * inner must equal {n})")
            raise CompileError(f"{wl.name}: knob {k} = {v!r} must be one of {space[k]}")
        out[k] = v
    rules = wl.thread_rules(cfg) if hasattr(wl, "thread_rules") else \
        (("oc_nthread", None, "tile_co"), ("h_nthread", None, "tile_h"))
    for thread, extent, split in rules:
        if out.get(thread, 1) <= 1:
            continue
        if extent is not None and extent % out[thread]:
            raise CompileError(f"{wl.name}: {thread} = {out[thread]} must divide {split} ({extent})")
        if extent is None and out[split][0] % out[thread]:
            raise CompileError(f"{wl.name}: {thread} = {out[thread]} must divide the outer factor of "
                               f"{split} = {out[split]}")
    return out


_LOG_FIELDS = {"workload": str, "config": str, "knobs": dict, "cycles": int, "gemm_uops": int, "error": str,
               "reduce": int, "insns": int, "seconds": float}


def knob_value_ok(value) -> bool:
    """Whether ``value`` has a knob's type: an integer >= 0 (a thread count, or a 0/1 switch such as
    ``dw_alu``) or a split ``[outer, inner]`` of two integers >= 1 (a bool is not an integer here:
    ``True == 1`` would slip through)."""
    def one(x, least=1):
        return isinstance(x, int) and not isinstance(x, bool) and x >= least
    if isinstance(value, (list, tuple)):
        return len(value) == 2 and all(one(x) for x in value)
    return one(value, 0)


def _check_record(rec, where: str) -> dict:
    """One log record with every field of its type (see the module docstring), else a CompileError."""
    if not isinstance(rec, dict):
        kind = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(rec), "null")
        raise CompileError(f"{where} is a JSON {kind}, not an object (rule: one record a line)")
    missing = [k for k in ("workload", "config", "knobs") if k not in rec]
    if missing:
        raise CompileError(f"{where} lacks {'/'.join(missing)} (rule: every record has workload, config, knobs)")
    for k, v in rec.items():
        typ = _LOG_FIELDS.get(k)
        if typ is None:
            raise CompileError(f"{where}: unknown field {brief(k)} (rule: fields are {', '.join(_LOG_FIELDS)})")
        optional = k not in ("workload", "config", "knobs")
        ok = (v is None and optional) or (
            typ is float and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0) or (
            typ is int and isinstance(v, int) and not isinstance(v, bool) and v >= (1 if k == "reduce" else 0)) or (
            typ in (str, dict) and isinstance(v, typ))
        if not ok:
            kind = {int: "a non-negative integer" if k != "reduce" else "an integer >= 1", float: "a number >= 0",
                    str: "a string", dict: "a JSON object"}[typ]
            raise CompileError(f"{where}: {k} = {brief(v)} must be {kind}{' or null' if optional else ''} "
                               f"(rule: the record vtasim tune writes)")
    for name, value in rec["knobs"].items():
        if not knob_value_ok(value):
            raise CompileError(f"{where}: knob {brief(name)} = {brief(value)} must be an integer >= 0 or a split "
                               f"[outer, inner] of two (rule: the record vtasim tune writes)")
    return rec


def iter_log(path):
    """Yield every record of a JSON-lines tuning log, checked (:func:`_check_record`), one at a time: a
    log is read in bounded memory whatever its length (at most :data:`MAX_LOG_BYTES`)."""
    for n, rec in iter_json_lines(Path(path), "tuning log", MAX_LOG_BYTES, max_line=MAX_LOG_LINE,
                                  limit="MAX_LOG_BYTES", error=CompileError):
        yield _check_record(rec, f"tuning log {path}: line {n}")


def read_log(path) -> list[dict]:
    """Every record of a JSON-lines tuning log; a malformed line is an error naming its number."""
    return list(iter_log(path))


def check_log_target(path) -> None:
    """``path`` can take appended records: absent, or a regular file (a FIFO would block the writer)."""
    if os.path.lexists(path):
        regular_size(path, "tuning log", MAX_LOG_BYTES, limit="MAX_LOG_BYTES", error=CompileError)


def append_log(path, record: dict) -> None:
    """Append one trial (flushed at once, so a crash loses nothing); never blocks on a FIFO."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise CompileError(f"cannot append to tuning log {path}: {exc.strerror}") from None
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CompileError(f"tuning log {path} is not a regular file (rule: vtasim appends only to regular files)")
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()


def _measured(path, workload: str, cfg) -> list[dict]:
    """The error-free, measured records of ``workload`` on ``cfg`` in the log."""
    return [rec for rec in iter_log(path) if rec["workload"] == workload and rec["config"] == cfg.bitstream
            and not rec.get("error") and rec.get("cycles") is not None]


def best_from_log(path, workload: str, cfg, reduce: int = 1) -> dict | None:
    """The fastest error-free record of ``workload`` on ``cfg`` tuned at size ``reduce`` in the log, or
    None (a record without ``reduce`` was tuned at full size)."""
    best = None
    for rec in _measured(path, workload, cfg):
        if rec.get("reduce", 1) == reduce and (best is None or rec["cycles"] < best["cycles"]):
            best = rec
    return best


def tuned_sizes(path, workload: str, cfg) -> list[int]:
    """The ``reduce`` values the log has error-free records of ``workload`` on ``cfg`` for, ascending."""
    return sorted({rec.get("reduce", 1) for rec in _measured(path, workload, cfg)})
