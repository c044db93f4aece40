"""The VTA environment: hardware geometry, dtypes, scopes and the GEMM intrinsic for schedules.

The counterpart of TVM's ``vta.Environment`` / ``vta.get_env()``: schedules read ``BATCH``,
``BLOCK_IN``, ``BLOCK_OUT``, the dtypes, the three SRAM scope names, the pragma names
``dma_copy``/``alu`` and ``gemm`` (the tensor intrinsic ``tensorize`` replaces the inner
(BATCH, BLOCK_OUT, BLOCK_IN) loops with) from here, so one schedule works on every config::

    with Environment(load_config("config/presets/1x8x8.json")) as env:
        ...                    # get_env() is env inside the block
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from vtasim.compiler.lowering import ir
from vtasim.hw.config import VTAConfig, enter_config, exit_config, get_config, load_config

__all__ = ["Environment", "GemmIntrin", "get_env"]


@dataclass(frozen=True)
class GemmIntrin:
    """The GEMM tensor intrinsic (compiler spec 3.1):
    ``out[i, j] += sum_k int32(inp[i, k]) * int32(wgt[j, k])`` over one (BATCH, BLOCK_IN) input
    element, one (BLOCK_OUT, BLOCK_IN) weight element and one (BATCH, BLOCK_OUT) accumulator
    element.  ``lower`` checks a tensorized stage against these fields."""

    batch: int
    block_in: int
    block_out: int
    inp_dtype: str
    wgt_dtype: str
    acc_dtype: str
    name: str = "vta.gemm"
    inp_scope: str = ir.SCOPE_INP
    wgt_scope: str = ir.SCOPE_WGT
    acc_scope: str = ir.SCOPE_ACC

    @property
    def inp_lanes(self) -> int:
        return self.batch * self.block_in

    @property
    def wgt_lanes(self) -> int:
        return self.block_out * self.block_in

    @property
    def acc_lanes(self) -> int:
        return self.batch * self.block_out


class Environment:
    """Everything a VTA schedule needs to know about the hardware, built from a :class:`VTAConfig`
    (the default config file when ``cfg`` is None).  One object per config (``Environment(cfg) is
    Environment(cfg)``).  A context manager: inside ``with env:`` the config context of
    :func:`vtasim.hw.config.using_config` holds ``env.cfg`` (per thread or task), so :func:`get_env`,
    :meth:`Environment.current` and :func:`vtasim.hw.config.get_config` agree."""

    _by_config: "weakref.WeakValueDictionary[VTAConfig, Environment]" = weakref.WeakValueDictionary()
    _lock = threading.Lock()

    def __new__(cls, cfg: VTAConfig | None = None):
        cfg = cfg if cfg is not None else load_config()
        with cls._lock:
            env = cls._by_config.get(cfg)
            if env is None:
                env = super().__new__(cls)
                env._build(cfg)
                cls._by_config[cfg] = env
        return env

    def _build(self, cfg: VTAConfig):
        self.cfg = c = cfg
        self.BATCH = c.batch
        self.BLOCK_IN = c.block_in
        self.BLOCK_OUT = c.block_out
        self.INP_WIDTH, self.WGT_WIDTH = c.inp_width, c.wgt_width
        self.ACC_WIDTH, self.OUT_WIDTH = c.acc_width, c.out_width
        self.inp_dtype = f"int{c.inp_width}"
        self.wgt_dtype = f"int{c.wgt_width}"
        self.acc_dtype = f"int{c.acc_width}"
        self.out_dtype = f"int{c.out_width}"
        self.inp_scope = ir.SCOPE_INP
        self.wgt_scope = ir.SCOPE_WGT
        self.acc_scope = ir.SCOPE_ACC
        self.dma_copy = "dma_copy"
        self.alu = "alu"
        self.gemm = GemmIntrin(self.BATCH, self.BLOCK_IN, self.BLOCK_OUT,
                               self.inp_dtype, self.wgt_dtype, self.acc_dtype)

    def __repr__(self):
        return (f"Environment(BATCH={self.BATCH}, BLOCK_IN={self.BLOCK_IN}, "
                f"BLOCK_OUT={self.BLOCK_OUT}, {self.inp_dtype}/{self.wgt_dtype}/{self.acc_dtype})")

    def __enter__(self):
        enter_config(self.cfg)
        return self

    def __exit__(self, *exc):
        exit_config()
        return False

    @classmethod
    def current(cls) -> "Environment":
        """The environment of the innermost config entered in this context (``with env:`` or
        :func:`vtasim.hw.config.using_config`), else the one of the default config file."""
        return cls(get_config())


def get_env() -> Environment:
    """TVM's ``vta.get_env()``: the current :class:`Environment`."""
    return Environment.current()
