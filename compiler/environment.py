"""The VTA environment: hardware geometry, dtypes, scopes and the GEMM intrinsic for schedules.

The counterpart of TVM's ``vta.Environment`` / ``vta.get_env()``: schedules read ``BATCH``,
``BLOCK_IN``, ``BLOCK_OUT``, the dtypes, the three SRAM scope names, the pragma names
``dma_copy``/``alu`` and ``gemm`` (the tensor intrinsic ``tensorize`` replaces the inner
(BATCH, BLOCK_OUT, BLOCK_IN) loops with) from here, so one schedule works on every config::

    with Environment(load_config("config/presets/1x8x8.json")) as env:
        ...                    # get_env() is env inside the block
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler import ir
from hw.config import VTAConfig, load_config

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
    (the default config file when ``cfg`` is None).  A context manager: inside ``with env:``,
    :func:`get_env` and :meth:`Environment.current` return it."""

    _stack: list["Environment"] = []
    _default: "Environment | None" = None

    def __init__(self, cfg: VTAConfig | None = None):
        self.cfg = cfg if cfg is not None else load_config()
        c = self.cfg
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
        Environment._stack.append(self)
        return self

    def __exit__(self, *exc):
        Environment._stack.pop()
        return False

    @classmethod
    def current(cls) -> "Environment":
        """The innermost environment entered with ``with``, else one for the default config
        (built once: the default config file is read the first time it is needed)."""
        if cls._stack:
            return cls._stack[-1]
        if cls._default is None:
            cls._default = Environment()
        return cls._default


def get_env() -> Environment:
    """TVM's ``vta.get_env()``: the current :class:`Environment`."""
    return Environment.current()
