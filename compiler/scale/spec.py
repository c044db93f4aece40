"""Sweep specs: a TOML (``tomllib``) or JSON file naming config points, workloads and a knob source.

::

    base = "1x16x16"              # preset name or config file (default: config/vta_config.json)
    workloads = ["vadd.1024", "resnet18.C10"]
    reduce = 4                    # divide conv layers' H and W (quick sweeps); default 1
    knobs = "tophub"              # fallback | tophub | tuned; or a list of them
    tune_trials = 16              # "tuned": trials of vtasim tune's search per point (default 16)
    tune_seed = 0                 # "tuned": the search's seed (default 0)

    [grid]                        # every combination ...
    LOG_BLOCK = [3, 4, 5]
    LOG_INP_BUFF_SIZE = [15, 16]

    [sample]                      # ... or a random sample of the combinations
    samples = 8
    seed = 0
    LOG_BLOCK = [3, 4, 5]
    DRAM_LATENCY = [16, 64]

    [[points]]                    # explicit points: a preset and/or key overrides
    preset = "1x8x8"

A "tuned" point runs the tuner (:func:`vtasim.compiler.tuning.tune.tune`, its trials one after the other inside the
point's Dask worker) and records the best record's run; its resume key holds the trials and seed.

Every point is ``base`` updated with its keys.  Keys and values are checked here (unknown key, empty
list, value out of the key's range: a one-line :class:`SpecError`); whether a point's buffers fit the
ISA is checked per point when it runs (it is then recorded as skipped, with the rule).

Bounds: a spec is a regular file of at most :data:`MAX_SPEC_BYTES` (``vtasim.hw.files``; JSON strict: no
duplicate key, no NaN, bounded nesting); a sweep has at most :data:`MAX_POINTS` points (configs x
workloads x knob sources), counted before any grid is expanded and after every ``[[points]]`` table
is checked, so a huge grid costs nothing and a bad point is found at once.
"""

from __future__ import annotations

import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from vtasim.hw.config import CONFIG_KEYS, PRESETS, ConfigError, VTAConfig, check_key, load_config, load_preset
from vtasim.hw.files import brief, parse_json, read_regular
from vtasim.sim.errors import SimError

__all__ = ["SpecError", "Spec", "Point", "KNOB_SOURCES", "load_spec", "parse_spec", "point_key"]

KNOB_SOURCES = ("fallback", "tophub", "tuned")
SWEEP_KEYS = tuple(k.name for k in CONFIG_KEYS if k.type is int)
_KEY_SPECS = {k.name: k for k in CONFIG_KEYS}
_TOP_KEYS = ("base", "workloads", "reduce", "knobs", "tune_trials", "tune_seed", "grid", "sample", "points")
MAX_SPEC_BYTES = 1 << 20
MAX_POINTS = 10_000         # configs x workloads x knob sources of one sweep, checked before expanding


class SpecError(SimError):
    """A sweep spec breaks a rule (the message names the key and the rule)."""


def point_key(config: dict, workload: str, reduce: int, knobs: str, tune: tuple | None = None) -> str:
    """The resume key: the full config (sorted keys), the workload, its reduction and the knob source
    (for "tuned", with the tuner's trials and seed)."""
    cfg = ",".join(f"{k}={config[k]}" for k in sorted(config))
    src = f"{knobs}:t{tune[0]}:s{tune[1]}" if knobs == "tuned" and tune else knobs
    return f"{workload}|r{reduce}|{src}|{cfg}"


@dataclass(frozen=True)
class Point:
    config: dict            # the full raw config (base + overrides); may be invalid (checked when run)
    workload: str
    reduce: int
    knobs: str
    tune: tuple = (16, 0)   # (trials, seed) of a "tuned" point

    @property
    def key(self) -> str:
        return point_key(self.config, self.workload, self.reduce, self.knobs, self.tune)

    def as_dict(self) -> dict:
        return {"config": dict(self.config), "workload": self.workload, "reduce": self.reduce, "knobs": self.knobs,
                "tune": list(self.tune)}


@dataclass
class Spec:
    base: dict
    workloads: list
    reduce: int
    knobs: list
    configs: list = field(default_factory=list)     # raw config dicts, in order, without duplicates
    tune: tuple = (16, 0)                           # tune_trials, tune_seed

    def points(self) -> list[Point]:
        return [Point(c, w, self.reduce, k, self.tune) for c in self.configs for w in self.workloads
                for k in self.knobs]


def _values(table: dict, key: str, where: str) -> list:
    if key not in _KEY_SPECS or _KEY_SPECS[key].type is not int:
        raise SpecError(f"sweep spec: {where} has unknown key {brief(key)}; config keys: {', '.join(SWEEP_KEYS)}")
    vals = table[key]
    if not isinstance(vals, list):
        vals = [vals]
    if not vals:
        raise SpecError(f"sweep spec: {where}.{key} is an empty list (rule: at least one value)")
    for v in vals:
        try:
            check_key({key: v}, _KEY_SPECS[key], f"sweep spec: {where}.{key}")
        except ConfigError as exc:
            raise SpecError(str(exc)) from None
    if len(set(vals)) != len(vals):
        raise SpecError(f"sweep spec: {where}.{key} = {brief(vals)} repeats a value (rule: distinct values)")
    return vals


def _int(raw, key: str, lo: int, hi: int, default: int) -> int:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise SpecError(f"sweep spec: {key} = {brief(v)} must be an integer in [{lo}, {hi}]")
    return v


def _base(raw, origin: Path | None) -> dict:
    b = raw.get("base")
    try:
        if b is None:
            return load_config().to_dict()
        if not isinstance(b, str):
            raise SpecError(f"sweep spec: base = {b!r} must be a preset name ({', '.join(PRESETS)}) or a config file")
        if b in PRESETS:
            return load_preset(b).to_dict()
        path = Path(b)
        if origin is not None and not path.is_absolute():
            path = origin.parent / path
        if not path.is_file():
            raise SpecError(f"sweep spec: base = {b!r} is neither a preset ({', '.join(PRESETS)}) nor a config file")
        return VTAConfig.from_file(path).to_dict()
    except ConfigError as exc:
        raise SpecError(f"sweep spec: base: {exc}") from None


def parse_spec(raw, origin: Path | None = None) -> Spec:
    """Check a decoded spec (a dict) and expand it into points; ``origin`` resolves a relative ``base``."""
    if not isinstance(raw, dict):
        raise SpecError(f"sweep spec: top level must be a table/object, got {type(raw).__name__}")
    for k in raw:
        if k not in _TOP_KEYS:
            raise SpecError(f"sweep spec: unknown key {brief(k)}; known keys: {', '.join(_TOP_KEYS)}")
    base = _base(raw, origin)
    wls = raw.get("workloads")
    if isinstance(wls, str):
        wls = [wls]
    if not isinstance(wls, list) or not wls or not all(isinstance(w, str) and w for w in wls):
        raise SpecError("sweep spec: workloads must be a non-empty list of workload names (e.g. [\"vadd.1024\"])")
    from vtasim.compiler.tuning.workloads import parse_workload
    for w in wls:
        try:
            parse_workload(w)
        except SimError as exc:
            raise SpecError(f"sweep spec: workloads: {exc}") from None
    if len(set(wls)) != len(wls):
        raise SpecError("sweep spec: workloads repeats a name (rule: distinct workloads)")
    reduce = _int(raw, "reduce", 1, 1 << 16, 1)
    knobs = raw.get("knobs", "tophub")
    if isinstance(knobs, str):
        knobs = [knobs]
    if not isinstance(knobs, list) or not knobs:
        raise SpecError(f"sweep spec: knobs must be one of {', '.join(KNOB_SOURCES)} or a non-empty list of them")
    for k in knobs:
        if k not in KNOB_SOURCES:
            raise SpecError(f"sweep spec: knobs = {brief(k)} is not one of {', '.join(KNOB_SOURCES)}")
    from vtasim.compiler.tuning.tune import MAX_TUNE_TRIALS
    tune = (_int(raw, "tune_trials", 1, MAX_TUNE_TRIALS, 16), _int(raw, "tune_seed", 0, (1 << 63) - 1, 0))
    if "grid" in raw and "sample" in raw:
        raise SpecError("sweep spec: give either [grid] or [sample], not both (a sample is drawn from its own grid)")
    per_config = len(wls) * len(knobs)
    explicit = _explicit_points(raw, base)          # checked before any grid is expanded
    tables = []                                     # (keys, axes, chosen indices)
    count = len(explicit)
    if count * per_config > MAX_POINTS:
        raise SpecError(f"sweep spec: {count} [[points]] x {len(wls)} workloads x {len(knobs)} knob sources = "
                        f"{count * per_config} points (rule: a sweep has at most MAX_POINTS = {MAX_POINTS} points)")
    for name in ("grid", "sample"):
        if name not in raw:
            continue
        table = raw[name]
        if not isinstance(table, dict):
            raise SpecError(f"sweep spec: [{name}] must be a table of config keys")
        keys = [k for k in table if not (name == "sample" and k in ("samples", "seed"))]
        if not keys:
            raise SpecError(f"sweep spec: [{name}] is empty (rule: at least one config key with values)")
        axes = [_values(table, k, name) for k in keys]
        total = 1
        for a in axes:
            total *= len(a)
        if name == "grid":
            chosen = range(total)
        else:
            n = _int(table, "samples", 1, MAX_POINTS, 0) if "samples" in table else None
            if n is None:
                raise SpecError("sweep spec: [sample] needs samples = N (how many configs to draw)")
            seed = _int(table, "seed", 0, (1 << 63) - 1, 0)
            chosen = range(min(n, total)) if n >= total else sorted(random.Random(seed).sample(range(total), n))
        count += len(chosen)
        if count * per_config > MAX_POINTS:
            raise SpecError(f"sweep spec: [{name}] makes {len(chosen)} configs x {len(wls)} workloads x "
                            f"{len(knobs)} knob sources = {len(chosen) * per_config} points (rule: a sweep has at "
                            f"most MAX_POINTS = {MAX_POINTS} points; use [sample] or fewer values)")
        tables.append((keys, axes, chosen))
    configs: list[dict] = []
    seen: set = set()

    def add(cfg: dict):
        key = tuple(sorted(cfg.items()))
        if key not in seen:
            seen.add(key)
            configs.append(cfg)

    for keys, axes, chosen in tables:
        for idx in chosen:          # mixed-radix decode: the last key varies fastest
            vals, rest = [], idx
            for a in reversed(axes):
                vals.append(a[rest % len(a)])
                rest //= len(a)
            add({**base, **dict(zip(keys, reversed(vals)))})
    for cfg in explicit:
        add(cfg)
    if not configs:
        raise SpecError("sweep spec: no config points (rule: give [grid], [sample] or [[points]])")
    return Spec(base=base, workloads=list(wls), reduce=reduce, knobs=list(knobs), configs=configs, tune=tune)


def _explicit_points(raw, base: dict) -> list[dict]:
    """The configs of ``[[points]]``, each checked (a preset and/or single-valued config keys)."""
    pts = raw.get("points", [])
    if not isinstance(pts, list) or not all(isinstance(p, dict) for p in pts):
        raise SpecError("sweep spec: points must be a list of tables ([[points]] with preset and/or config keys)")
    if len(pts) > MAX_POINTS:
        raise SpecError(f"sweep spec: {len(pts)} [[points]] (rule: at most MAX_POINTS = {MAX_POINTS})")
    out = []
    for i, p in enumerate(pts):
        cfg = dict(base)
        if "preset" in p:
            if not isinstance(p["preset"], str) or p["preset"] not in PRESETS:
                raise SpecError(f"sweep spec: points[{i}].preset = {brief(p['preset'])} is not one of "
                                f"{', '.join(PRESETS)}")
            cfg = load_preset(p["preset"]).to_dict()
        for k in p:
            if k != "preset":
                vals = _values(p, k, f"points[{i}]")
                if len(vals) != 1:
                    raise SpecError(f"sweep spec: points[{i}].{k} must be one value (use [grid] for several)")
                cfg[k] = vals[0]
        out.append(cfg)
    return out


def load_spec(path) -> Spec:
    """Read ``path`` (a regular file of at most MAX_SPEC_BYTES, vtasim.hw.files): ``.toml`` with tomllib, ``.json``
    strictly (no duplicate keys, no NaN, bounded nesting)."""
    path = Path(path)
    if path.suffix not in (".toml", ".json"):
        raise SpecError(f"sweep spec {path}: the name must end in .toml or .json")
    data = read_regular(path, "sweep spec", MAX_SPEC_BYTES, limit="MAX_SPEC_BYTES", error=SpecError)
    if path.suffix == ".json":
        raw = parse_json(data, f"sweep spec {path}", SpecError)
    else:
        try:
            raw = tomllib.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise SpecError(f"sweep spec {path}: byte {exc.start} is not UTF-8 text (rule: TOML is UTF-8)") from None
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"sweep spec {path}: not valid TOML: {str(exc).splitlines()[0]}") from None
        except RecursionError:
            raise SpecError(f"sweep spec {path}: not valid TOML for vtasim: nested too deeply "
                            f"(rule: a few levels of tables and arrays)") from None
    return parse_spec(raw, origin=path)
