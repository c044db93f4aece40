"""Micro-op kernels: recording (the ``k`` a record callback receives) and the recorded kernel.

A lowered program describes each GEMM/ALU kernel by calls on a recorder, as TVM's uop-scope body
calls ``VTAUopLoopBegin`` / ``VTAUopPush`` / ``VTAUopLoopEnd`` (compiler spec 4.4, 5.2)::

    def record(k):
        k.loop_begin(16, 1, 0, 1)            # extent, dst_factor, src_factor, wgt_factor
        k.push(0, 0, 0, 0, 0)                # mode, reset, dst, src, wgt[, opcode, use_imm, imm]
        k.loop_end()

The recorder enforces the runtime's kernel invariants, each violation a
:class:`~vtasim.compiler.runtime.errors.RuntimeContractError` naming the call, the kernel key and the rule:

* every loop begins before the first uop, at most two loop levels, ``loop_end`` balances;
* all uops share mode, reset and (ALU) opcode / use_imm / imm, and the mode is the one of the
  push call (0 GEMM for ``push_gemm_op``, 1 ALU for ``push_alu_op``);
* VerifyDep: a uop may not write the dst index of either of the two uops before it (the
  accumulator write of a uop is not visible to the next two; TVM CHECKs the same);
* at least one uop, at most the uop SRAM depth;
* every index the kernel's loops reach lies inside its buffer (dst: acc; src: inp for GEMM, acc for
  ALU; wgt: wgt) and every loop field fits its instruction field.

TVM's runtime checks the first three and leaves the rest to the hardware; here they fail at the call
that made the kernel, not as an engine error about some instruction index later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasim.hw.config import LOOP_ITER_WIDTH, VTAConfig
from vtasim.hw.alu import ALU_NAMES, IMM_MAX, IMM_MIN, by_opcode
from vtasim.hw.isa import layout

from .errors import RuntimeContractError

__all__ = ["MODE_GEMM", "MODE_ALU", "MODE_NAMES", "Loop", "UopKernel", "KernelRecorder", "check_int"]

MODE_GEMM, MODE_ALU = 0, 1
MODE_NAMES = {MODE_GEMM: "GEMM", MODE_ALU: "ALU"}
MAX_LOOPS = 2                      # the instruction has an outer and an inner loop, no more
VERIFY_DEP_WINDOW = 2              # uops whose dst a new uop may not write (TVM VerifyDep)


def check_int(where: str, name: str, value, lo: int | None = 0, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]`` (inclusive), else a RuntimeContractError naming it."""
    if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value                   # the common case, kept cheap: every runtime call checks ~10 ints
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise RuntimeContractError(f"{where}: {name} = {value!r} must be an integer")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        lo_s = "-inf" if lo is None else lo
        hi_s = "inf" if hi is None else hi
        raise RuntimeContractError(f"{where}: {name} = {value} is out of range [{lo_s}, {hi_s}]")
    return value


@dataclass(frozen=True)
class Loop:
    extent: int
    dst_factor: int
    src_factor: int
    wgt_factor: int


@dataclass
class UopKernel:
    """A recorded kernel: its uops, loops and the fields every uop shares."""

    key: object
    mode: int
    reset: int
    opcode: int
    use_imm: int
    imm: int
    loops: tuple
    uops: list                     # [(dst, src, wgt), ...]
    dram_offset: int = 0           # first uop's index in the image's uop segment (set by the queue)
    # SRAM residency [sram_begin, sram_end); equal means not resident (TVM's cached() test)
    sram_begin: int = 0
    sram_end: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.uops)

    @property
    def resident(self) -> bool:
        return self.sram_begin != self.sram_end

    def loop_fields(self) -> dict:
        """The GEMM/ALU instruction's loop fields (compiler spec 5.2, hardware spec 5.2).

        GEMM: loop[0] -> outer, loop[1] -> inner.  ALU: one loop -> *inner* (outer stays 1), two
        loops -> outer/inner.  A missing loop is extent 1 with factors 0.  Computed once per kernel
        (a kernel's loops never change after recording)."""
        cached = self.meta.get("loop_fields")
        if cached is None:
            cached = self.meta["loop_fields"] = self._loop_fields()
        return cached

    def _loop_fields(self) -> dict:
        loops = list(self.loops)
        if self.mode == MODE_ALU and len(loops) == 1:
            loops = [None, loops[0]]
        loops += [None] * (MAX_LOOPS - len(loops))
        f = {}
        for suffix, lp in zip(("out", "in"), loops):
            f[f"iter_{suffix}"] = lp.extent if lp else 1
            f[f"dst_factor_{suffix}"] = lp.dst_factor if lp else 0
            f[f"src_factor_{suffix}"] = lp.src_factor if lp else 0
            if self.mode == MODE_GEMM:
                f[f"wgt_factor_{suffix}"] = lp.wgt_factor if lp else 0
        return f


class KernelRecorder:
    """The object a record callback receives; build a kernel with loop_begin / push / loop_end."""

    def __init__(self, cfg: VTAConfig, key, call: str, mode: int):
        self.cfg = cfg
        self.key = key
        self.mode = mode
        self.where = f"{call}(key={key!r})"
        self.loops: list[Loop] = []
        self.open_loops = 0
        self.uops: list[tuple] = []
        self.shared: dict | None = None
        self.closed = False
        lay = layout(cfg)
        src_bits = lay.gemm if mode == MODE_GEMM else lay.alu
        # loop factor limits come from the instruction layout, so they follow the config
        self.factor_limit = {"dst_factor": (1 << src_bits["dst_factor_in"][1]) - 1,
                             "src_factor": (1 << src_bits["src_factor_in"][1]) - 1,
                             "wgt_factor": ((1 << lay.gemm["wgt_factor_in"][1]) - 1) if mode == MODE_GEMM else 0}

    def _fail(self, msg: str):
        raise RuntimeContractError(f"{self.where}: {msg}")

    def _check_recording(self, what: str) -> None:
        if self.closed:
            self._fail(f"{what} after the record callback returned (rule: a kernel is recorded once, "
                       f"inside its record callback)")

    # ---- the calls a record callback makes -----------------------------------------------------
    def loop_begin(self, extent, dst_factor, src_factor, wgt_factor=0) -> None:
        where = f"{self.where}: loop_begin"
        self._check_recording("loop_begin")
        if self.uops:
            self._fail(f"loop_begin after uop {len(self.uops) - 1} (rule: every loop begins before the "
                       f"first uop, compiler spec 5.2)")
        if len(self.loops) >= MAX_LOOPS:
            self._fail(f"loop_begin of a loop level {len(self.loops) + 1} (rule: at most {MAX_LOOPS} loop "
                       f"levels, the instruction's outer and inner loop)")
        extent = check_int(where, "extent", extent, 1, (1 << LOOP_ITER_WIDTH) - 1)
        vals = {}
        for name, value in (("dst_factor", dst_factor), ("src_factor", src_factor), ("wgt_factor", wgt_factor)):
            limit = self.factor_limit[name]
            if name == "wgt_factor" and self.mode == MODE_ALU and value != 0:
                self._fail(f"loop_begin wgt_factor = {value!r} (rule: an ALU loop has no weight factor, "
                           f"it must be 0)")
            vals[name] = check_int(where, name, value, 0, limit)
        self.loops.append(Loop(extent, **vals))
        self.open_loops += 1

    def loop_end(self) -> None:
        self._check_recording("loop_end")
        if self.open_loops == 0:
            self._fail("loop_end without an open loop_begin")
        self.open_loops -= 1

    def push(self, mode, reset, dst, src, wgt, opcode=0, use_imm=0, imm=0) -> None:
        self._check_recording("push")
        n = len(self.uops)
        where = f"{self.where}: uop {n}"
        mode = check_int(where, "mode", mode, 0, 1)
        if mode != self.mode:
            self._fail(f"uop {n} has mode {mode} ({MODE_NAMES[mode]}); this call records a "
                       f"{MODE_NAMES[self.mode]} kernel (rule: mode {self.mode})")
        reset = check_int(where, "reset", reset, 0, 1)
        cfg = self.cfg
        dst = check_int(where, "dst", dst, 0, cfg.acc_depth - 1)
        if mode == MODE_GEMM:
            src = check_int(where, "src", src, 0, cfg.inp_depth - 1)
            wgt = check_int(where, "wgt", wgt, 0, cfg.wgt_depth - 1)
            # GEMM ignores the ALU fields (TVM does not look at them); still they must be integers
            opcode = check_int(where, "opcode", opcode, None, None)
            use_imm = check_int(where, "use_imm", use_imm, None, None)
            imm = check_int(where, "imm", imm, None, None)
            shared = {"mode": mode, "reset": reset}
        else:
            src = check_int(where, "src", src, 0, cfg.acc_depth - 1)
            wgt = check_int(where, "wgt", wgt, 0, 0)
            opcode = check_int(where, "opcode", opcode, 0, None)
            if opcode not in ALU_NAMES:         # a row of vtasim.hw.alu; one its HW_VER lacks fails at encoding
                self._fail(f"uop {n} opcode = {opcode} is not an ALU opcode "
                           f"({', '.join(f'{k} {v}' for k, v in ALU_NAMES.items())})")
            use_imm = check_int(where, "use_imm", use_imm, 0, 1)
            lo, hi = by_opcode(opcode).imm_range if use_imm else (IMM_MIN, IMM_MAX)
            imm = check_int(where, "imm", imm, lo, hi)
            shared = {"mode": mode, "reset": reset, "opcode": opcode, "use_imm": use_imm, "imm": imm}
        if self.shared is None:
            self.shared = shared
        elif shared != self.shared:
            diff = next(k for k in shared if shared[k] != self.shared[k])
            self._fail(f"uop {n} has {diff} = {shared[diff]}, uop 0 has {self.shared[diff]} (rule: all uops "
                       f"of a kernel share mode, reset{', opcode, use_imm and imm' if mode == MODE_ALU else ''})")
        for i in range(max(0, n - VERIFY_DEP_WINDOW), n):
            if self.uops[i][0] == dst:
                self._fail(f"uop {n} writes dst {dst}, which uop {i} also writes (rule VerifyDep: a uop may "
                           f"not write the dst of either of the {VERIFY_DEP_WINDOW} uops before it)")
        self.uops.append((dst, src, wgt))
        if n + 1 > cfg.uop_depth:
            self._fail(f"kernel has {n + 1} uops, more than the uop SRAM holds ({cfg.uop_depth}; "
                       f"rule: a kernel fits the uop buffer)")

    # ---- closing --------------------------------------------------------------------------------
    def finish(self) -> UopKernel:
        self.closed = True
        if self.open_loops:
            self._fail(f"{self.open_loops} loop_begin without loop_end when the record callback returned")
        if not self.uops:
            self._fail("the record callback pushed no uop (rule: a kernel has at least one uop)")
        s = self.shared
        kernel = UopKernel(key=self.key, mode=s["mode"], reset=s["reset"], opcode=s.get("opcode", 0),
                           use_imm=s.get("use_imm", 0), imm=s.get("imm", 0), loops=tuple(self.loops),
                           uops=list(self.uops))
        self._check_reach(kernel)
        return kernel

    def _check_reach(self, kernel: UopKernel) -> None:
        """Every index the loops reach lies inside its buffer (factors are unsigned, so the largest
        index is the largest uop index plus (extent - 1) * factor of each loop)."""
        cfg = self.cfg
        arr = np.asarray(kernel.uops, dtype=np.int64)
        names = [("dst", 0, cfg.acc_depth, "acc")]
        if kernel.mode == MODE_GEMM and not kernel.reset:
            names += [("src", 1, cfg.inp_depth, "inp"), ("wgt", 2, cfg.wgt_depth, "wgt")]
        elif kernel.mode == MODE_ALU and not kernel.use_imm:
            names += [("src", 1, cfg.acc_depth, "acc")]
        for name, col, depth, buf in names:
            reach = sum((lp.extent - 1) * getattr(lp, f"{name}_factor") for lp in kernel.loops)
            top = int(arr[:, col].max()) + reach
            if top >= depth:
                self._fail(f"{name} index reaches {top} (largest uop {name} {int(arr[:, col].max())} + loops "
                           f"{reach}), beyond the {buf} buffer depth {depth}")
