"""VTA configuration: one frozen object from which every hardware parameter is derived.

A config is read from a TVM-format ``vta_config.json`` (the eleven keys of TVM's default file) plus
optional vtasim timing keys (see ``docs/timing.md``).  Nothing is read at import time::

    >>> from vtasim.hw.config import load_config
    >>> cfg = load_config()              # config/vta_config.json of this checkout
    >>> cfg.bitstream, cfg.inp_depth, cfg.uop_depth
    ('1x16_i8w8a32_15_15_18_17', 2048, 8192)
    >>> load_preset("1x8x8").block_in                # config/presets/1x8x8.json; PRESETS names them
    8

Every validation failure raises :class:`ConfigError` whose message names the key, the value and the
rule that was broken.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from pathlib import Path

# ISA field widths that do not depend on the config (hardware spec 2.2), re-exported for callers.
from vtasim.hw.fields import (ALU_IMM_WIDTH, INSN_BYTES, LOOP_ITER_WIDTH, MEMOP_SRAM_ADDR_WIDTH,  # noqa: F401
                       UOP_BITS, check_isa_fit)
from vtasim.hw.files import brief, load_json
from vtasim.hw.timing import TIMING_KEY_NAMES, TIMING_KEYS

__all__ = [
    "ConfigError",
    "ConfigKey", "CONFIG_KEYS", "CONFIG_KEY_NAMES", "TVM_KEYS", "TVM_KEY_NAMES", "TIMING_KEY_NAMES", "check_key",
    "VTAConfig",
    "MEM_UOP", "MEM_WGT", "MEM_INP", "MEM_ACC", "MEM_OUT", "MEM_ACC_8BIT",
    "MEM_NAMES",
    "default_config_path",
    "load_config",
    "PRESETS",
    "load_preset",
    "get_config",
    "enter_config",
    "exit_config",
    "using_config",
]

# Memory types (hardware spec 2.2).  Kept here because element sizes are config facts.
MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_OUT, MEM_ACC_8BIT = 0, 1, 2, 3, 4, 5
MEM_NAMES = {MEM_UOP: "UOP", MEM_WGT: "WGT", MEM_INP: "INP", MEM_ACC: "ACC", MEM_OUT: "OUT",
             MEM_ACC_8BIT: "ACC_8BIT"}

KNOWN_TARGETS = ("sim", "tsim", "pynq", "ultra96", "zcu104", "de10nano", "intelfocl")
KNOWN_HW_VERS = ("0.0.1", "0.0.2")
MAX_CONFIG_BYTES = 1 << 20        # a config is a few hundred bytes; the bound keeps a huge file out


class ConfigError(ValueError):
    """A config key is missing, mistyped, out of range, or does not fit the ISA."""


@dataclass(frozen=True)
class ConfigKey:
    """One JSON key: its type, range [lo, hi] (ints), power-of-two rule, default (None: required)
    and what it means.  The timing keys' rows come from :data:`vtasim.hw.timing.TIMING_KEYS`."""

    name: str
    type: type
    lo: int | None
    hi: int | None
    pow2: bool
    default: object
    meaning: str


TVM_KEYS = (
    ConfigKey("TARGET", str, None, None, False, None, "device target"),
    ConfigKey("HW_VER", str, None, None, False, None, "hardware/ISA version"),
    ConfigKey("LOG_INP_WIDTH", int, 3, 3, False, None, "log2 of input element bits (vtasim: int8)"),
    ConfigKey("LOG_WGT_WIDTH", int, 3, 3, False, None, "log2 of weight element bits (vtasim: int8)"),
    ConfigKey("LOG_ACC_WIDTH", int, 5, 5, False, None, "log2 of accumulator bits (vtasim: int32)"),
    ConfigKey("LOG_BATCH", int, 0, 4, False, None, "log2 of BATCH"),
    ConfigKey("LOG_BLOCK", int, 1, 6, False, None, "log2 of BLOCK_IN = BLOCK_OUT"),
    ConfigKey("LOG_UOP_BUFF_SIZE", int, 2, 24, False, None, "log2 of uop buffer bytes"),
    ConfigKey("LOG_INP_BUFF_SIZE", int, 2, 24, False, None, "log2 of input buffer bytes"),
    ConfigKey("LOG_WGT_BUFF_SIZE", int, 2, 24, False, None, "log2 of weight buffer bytes"),
    ConfigKey("LOG_ACC_BUFF_SIZE", int, 2, 24, False, None, "log2 of accumulator buffer bytes"),
)
# Every key of a config file, TVM's then vtasim's timing keys (the rows of hw/timing.py).
CONFIG_KEYS = TVM_KEYS + tuple(ConfigKey(k.name, int, k.lo, k.hi, k.pow2, k.default, k.meaning)
                               for k in TIMING_KEYS)
CONFIG_KEY_NAMES = tuple(k.name for k in CONFIG_KEYS)
TVM_KEY_NAMES = tuple(k.name for k in TVM_KEYS)


def check_key(raw: dict, spec: ConfigKey, source: str):
    """The value of ``spec.name`` in ``raw`` (its default when absent), checked against the row."""
    key, typ, lo, hi, pow2, default, meaning = (spec.name, spec.type, spec.lo, spec.hi, spec.pow2, spec.default,
                                                spec.meaning)
    if key not in raw:
        if default is None:
            raise ConfigError(f"{source}: missing key {key!r} ({meaning}); every TVM key is required")
        return default
    val = raw[key]
    if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
        raise ConfigError(f"{source}: key {key!r} = {brief(val)} must be an integer ({meaning})")
    if typ is str and not isinstance(val, str):
        raise ConfigError(f"{source}: key {key!r} = {brief(val)} must be a string ({meaning})")
    if typ is int and not lo <= val <= hi:
        raise ConfigError(f"{source}: key {key!r} = {brief(val)} is out of range [{lo}, {hi}] ({meaning})")
    if pow2 and val & (val - 1):
        raise ConfigError(f"{source}: key {key!r} = {brief(val)} must be a power of two ({meaning})")
    if key == "TARGET" and val not in KNOWN_TARGETS:
        raise ConfigError(f"{source}: key 'TARGET' = {brief(val)} is not one of {', '.join(KNOWN_TARGETS)}")
    if key == "HW_VER" and val not in KNOWN_HW_VERS:
        raise ConfigError(f"{source}: key 'HW_VER' = {brief(val)} is not one of {', '.join(KNOWN_HW_VERS)}")
    return val


# The dataclass fields of VTAConfig, one per row of CONFIG_KEYS (a timing key with the table's
# default), so a key is declared once.
_ConfigFields = make_dataclass("_ConfigFields", [(k.name, k.type) if k.default is None else
                                                 (k.name, k.type, field(default=k.default)) for k in CONFIG_KEYS],
                               frozen=True)
_ConfigFields.__module__ = __name__


@dataclass(frozen=True)
class VTAConfig(_ConfigFields):
    """Frozen VTA configuration.  Upper-case attributes are the JSON keys (:data:`CONFIG_KEYS`, the
    timing ones from :data:`vtasim.hw.timing.TIMING_KEYS`); the rest is derived."""

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict, source: str = "config") -> "VTAConfig":
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: top level must be a JSON object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(CONFIG_KEY_NAMES))
        if unknown:
            raise ConfigError(f"{source}: unknown key {brief(unknown[0])}; known keys: "
                              f"{', '.join(sorted(CONFIG_KEY_NAMES))}")
        values = {spec.name: check_key(raw, spec, source) for spec in CONFIG_KEYS}
        cfg = cls(**values)
        cfg._validate(source)
        return cfg

    @classmethod
    def from_file(cls, path) -> "VTAConfig":
        """Read a config file: a regular file of at most :data:`MAX_CONFIG_BYTES`, strict JSON."""
        path = Path(path)
        raw = load_json(path, "config", MAX_CONFIG_BYTES, limit="MAX_CONFIG_BYTES", error=ConfigError)
        return cls.from_dict(raw, source=str(path))

    def to_dict(self, timing: bool = True) -> dict:
        """The JSON keys; with ``timing=False`` only TVM's eleven keys."""
        names = TVM_KEY_NAMES + (TIMING_KEY_NAMES if timing else ())
        return {name: getattr(self, name) for name in names}

    def replace(self, **changes) -> "VTAConfig":
        d = self.to_dict()
        d.update(changes)
        return VTAConfig.from_dict(d, source="config.replace")

    def _validate(self, source: str):
        elem_checks = (("LOG_INP_BUFF_SIZE", self.inp_elem_bytes), ("LOG_WGT_BUFF_SIZE", self.wgt_elem_bytes),
                       ("LOG_ACC_BUFF_SIZE", self.acc_elem_bytes), ("LOG_UOP_BUFF_SIZE", self.uop_elem_bytes))
        for key, ebytes in elem_checks:
            size = 1 << getattr(self, key)
            if size < ebytes:
                raise ConfigError(f"{source}: key {key!r} = {getattr(self, key)} gives {size} bytes, "
                                  f"less than one element of {ebytes} bytes")
            if size < 2 * ebytes:
                # The RTL addresses a buffer with log2(depth) bits and a micro-op holds log2(depth)-bit
                # indices: a one-element buffer would need 0-bit fields, which Verilog cannot declare.
                raise ConfigError(f"{source}: key {key!r} = {getattr(self, key)} gives {size} bytes, one element "
                                  f"of {ebytes} bytes; a buffer holds at least 2 elements (rule: {key} >= "
                                  f"{getattr(self, key) + 1}, so its address fields are at least 1 bit wide)")
        for key, log_depth in (("LOG_UOP_BUFF_SIZE", self.log_uop_depth), ("LOG_INP_BUFF_SIZE", self.log_inp_depth),
                               ("LOG_WGT_BUFF_SIZE", self.log_wgt_depth), ("LOG_ACC_BUFF_SIZE", self.log_acc_depth)):
            if log_depth > MEMOP_SRAM_ADDR_WIDTH:
                raise ConfigError(f"{source}: key {key!r} = {getattr(self, key)} gives a buffer of 2^{log_depth} "
                                  f"elements; sram_base is {MEMOP_SRAM_ADDR_WIDTH} bits (ISA fit)")
        problem = check_isa_fit(self)
        if problem:
            keys = ", ".join(f"{k}={getattr(self, k)}" for k in ("LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE",
                                                                  "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE",
                                                                  "LOG_BATCH", "LOG_BLOCK"))
            raise ConfigError(f"{source}: keys {keys} overflow the ISA: {problem}")

    # ---- element geometry -------------------------------------------------------------------
    @property
    def inp_width(self): return 1 << self.LOG_INP_WIDTH
    @property
    def wgt_width(self): return 1 << self.LOG_WGT_WIDTH
    @property
    def acc_width(self): return 1 << self.LOG_ACC_WIDTH
    @property
    def out_width(self): return self.inp_width
    @property
    def batch(self): return 1 << self.LOG_BATCH
    @property
    def block_in(self): return 1 << self.LOG_BLOCK
    @property
    def block_out(self): return 1 << self.LOG_BLOCK
    @property
    def inp_elem_bits(self): return self.inp_width * self.batch * self.block_in
    @property
    def wgt_elem_bits(self): return self.wgt_width * self.block_out * self.block_in
    @property
    def acc_elem_bits(self): return self.acc_width * self.batch * self.block_out
    @property
    def out_elem_bits(self): return self.out_width * self.batch * self.block_out
    @property
    def uop_elem_bits(self): return UOP_BITS
    @property
    def inp_elem_bytes(self): return self.inp_elem_bits // 8
    @property
    def wgt_elem_bytes(self): return self.wgt_elem_bits // 8
    @property
    def acc_elem_bytes(self): return self.acc_elem_bits // 8
    @property
    def out_elem_bytes(self): return self.out_elem_bits // 8
    @property
    def uop_elem_bytes(self): return UOP_BITS // 8
    @property
    def acc8_elem_bytes(self):
        """DRAM bytes of one ACC_8BIT element: one int8 per accumulator lane."""
        return self.batch * self.block_out

    # ---- buffer sizes and depths ------------------------------------------------------------
    @property
    def log_out_buff_size(self): return self.LOG_ACC_BUFF_SIZE + self.LOG_INP_WIDTH - self.LOG_ACC_WIDTH
    @property
    def log_uop_depth(self): return self.LOG_UOP_BUFF_SIZE - 5 + 3
    @property
    def log_inp_depth(self):
        return self.LOG_INP_BUFF_SIZE - self.LOG_BATCH - self.LOG_BLOCK - self.LOG_INP_WIDTH + 3
    @property
    def log_wgt_depth(self):
        return self.LOG_WGT_BUFF_SIZE - 2 * self.LOG_BLOCK - self.LOG_WGT_WIDTH + 3
    @property
    def log_acc_depth(self):
        return self.LOG_ACC_BUFF_SIZE - self.LOG_BATCH - self.LOG_BLOCK - self.LOG_ACC_WIDTH + 3
    @property
    def log_out_depth(self): return self.log_acc_depth
    @property
    def uop_depth(self): return 1 << self.log_uop_depth
    @property
    def inp_depth(self): return 1 << self.log_inp_depth
    @property
    def wgt_depth(self): return 1 << self.log_wgt_depth
    @property
    def acc_depth(self): return 1 << self.log_acc_depth
    @property
    def out_depth(self): return 1 << self.log_out_depth

    # ---- per memory type --------------------------------------------------------------------
    def sram_elem_bytes(self, mem_type: int) -> int:
        """Bytes of one element in the on-chip buffer a memory type addresses (ACC_8BIT -> ACC)."""
        return {MEM_UOP: self.uop_elem_bytes, MEM_WGT: self.wgt_elem_bytes, MEM_INP: self.inp_elem_bytes,
                MEM_ACC: self.acc_elem_bytes, MEM_OUT: self.out_elem_bytes,
                MEM_ACC_8BIT: self.acc_elem_bytes}[mem_type]

    def dram_elem_bytes(self, mem_type: int) -> int:
        """Bytes of one element in DRAM: the unit of dram_base, x_size and x_stride."""
        if mem_type == MEM_ACC_8BIT:
            return self.acc8_elem_bytes
        return self.sram_elem_bytes(mem_type)

    def sram_depth(self, mem_type: int) -> int:
        return {MEM_UOP: self.uop_depth, MEM_WGT: self.wgt_depth, MEM_INP: self.inp_depth,
                MEM_ACC: self.acc_depth, MEM_OUT: self.out_depth, MEM_ACC_8BIT: self.acc_depth}[mem_type]

    # ---- names and bus ----------------------------------------------------------------------
    @property
    def bus_bits(self): return 1 << self.LOG_BUS_WIDTH
    @property
    def bus_bytes(self): return self.bus_bits // 8
    @property
    def legacy_isa(self) -> bool:
        """HW_VER 0.0.1: 2-bit memory_type and alu_opcode (hardware spec 2.9)."""
        return self.HW_VER == "0.0.1"
    @property
    def bitstream(self) -> str:
        return (f"{self.batch}x{self.block_in}_i{self.inp_width}w{self.wgt_width}a{self.acc_width}"
                f"_{self.LOG_UOP_BUFF_SIZE}_{self.LOG_INP_BUFF_SIZE}_{self.LOG_WGT_BUFF_SIZE}_{self.LOG_ACC_BUFF_SIZE}")
    @property
    def model(self) -> str:
        return f"{self.TARGET}_{self.bitstream}"

    def derived(self) -> dict:
        """Every derived quantity, for ``vtasim config`` and reports."""
        names = ("batch", "block_in", "block_out", "inp_width", "wgt_width", "acc_width", "out_width",
                 "inp_elem_bits", "wgt_elem_bits", "acc_elem_bits", "out_elem_bits", "uop_elem_bits",
                 "inp_elem_bytes", "wgt_elem_bytes", "acc_elem_bytes", "out_elem_bytes", "uop_elem_bytes",
                 "acc8_elem_bytes", "log_out_buff_size",
                 "log_uop_depth", "log_inp_depth", "log_wgt_depth", "log_acc_depth", "log_out_depth",
                 "uop_depth", "inp_depth", "wgt_depth", "acc_depth", "out_depth", "bus_bits", "bus_bytes",
                 "bitstream", "model")
        out = {n: getattr(self, n) for n in names}
        out.update({"inp_dtype": f"int{self.inp_width}", "wgt_dtype": f"int{self.wgt_width}",
                    "acc_dtype": f"int{self.acc_width}", "out_dtype": f"int{self.out_width}"})
        return out


# ---- default config and the "current" config ------------------------------------------------
def default_config_path() -> Path:
    """The shipped default, ``config/vta_config.json`` (next to ``hw/`` in a checkout and in a wheel)."""
    return Path(__file__).resolve().parent.parent / "config" / "vta_config.json"


# The shipped presets, config/presets/<name>.json; "1x16x16" equals the default config.
PRESETS = ("1x16x16", "2x16x16", "1x32x32", "1x8x8")


def load_preset(name: str) -> VTAConfig:
    """One of the shipped :data:`PRESETS` by name, e.g. ``load_preset("1x8x8")``."""
    if name not in PRESETS:
        raise ConfigError(f"preset {name!r} is not one of {', '.join(PRESETS)} (config/presets/*.json)")
    return VTAConfig.from_file(default_config_path().parent / "presets" / f"{name}.json")


def load_config(path=None) -> VTAConfig:
    """Load a config file (the checkout's ``config/vta_config.json`` when ``path`` is None)."""
    return VTAConfig.from_file(path if path is not None else default_config_path())


# The "current" config of this thread / asyncio task: a stack (a tuple, so a context copied into a
# new thread or task keeps its own) in a context variable.  The compiler's Environment reads it too.
_current: contextvars.ContextVar[tuple] = contextvars.ContextVar("vtasim_current_config", default=())


def get_config() -> VTAConfig:
    """The config set by the innermost :func:`using_config` of this context, else the default file
    (read on call)."""
    stack = _current.get()
    if stack:
        return stack[-1]
    return load_config()


def enter_config(cfg: VTAConfig) -> VTAConfig:
    """Push ``cfg`` on this context's stack (what :func:`using_config` and the compiler's
    ``with Environment(...)`` do on entry); pair it with :func:`exit_config`."""
    if not isinstance(cfg, VTAConfig):
        raise TypeError(f"enter_config needs a VTAConfig, got {type(cfg).__name__}")
    _current.set(_current.get() + (cfg,))
    return cfg


def exit_config() -> None:
    """Pop the innermost config of this context's stack."""
    stack = _current.get()
    if not stack:
        raise RuntimeError("exit_config without a matching enter_config")
    _current.set(stack[:-1])


@contextlib.contextmanager
def using_config(cfg):
    """Make ``cfg`` (a VTAConfig or a path) the one :func:`get_config` returns inside the block, in
    this thread or task only (a :mod:`contextvars` variable: other threads keep their own)."""
    if not isinstance(cfg, VTAConfig):
        cfg = load_config(cfg)
    enter_config(cfg)
    try:
        yield cfg
    finally:
        exit_config()


assert [(f.name, f.default) for f in fields(VTAConfig)] == [
    (k.name, MISSING if k.default is None else k.default) for k in CONFIG_KEYS]
