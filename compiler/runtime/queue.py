"""CommandQueue: the runtime calls of a lowered program, turned into one memory image.

A Python re-implementation of the behaviour of TVM's VTA runtime (``vta/runtime/runtime.cc``;
compiler spec 5, hardware spec 5): the lowered program calls ``load_buffer_2d`` / ``store_buffer_2d``
/ ``push_gemm_op`` / ``push_alu_op`` / ``dep_push`` / ``dep_pop`` / ``synchronize`` exactly where TVM's
generated host code calls ``VTALoadBuffer2D`` ... ``VTASynchronize``, and :meth:`CommandQueue.build`
returns a :class:`vtasim.sim.image.MemoryImage` (inputs, outputs, expected outputs, one uop segment, the
instructions) assembled by :class:`vtasim.sim.builder.ProgramBuilder`.

Where this differs from TVM, and why:

* **One image is one device launch.**  ``synchronize()`` appends the closing sequence and FINISH and
  closes the queue; every later call is an error (a drain ``dep_pop`` after ``coproc_sync``, the quirk
  of compiler spec 5.4, must be moved before it).
* **Automatic flush is an in-stream barrier.**  TVM's runtime ends each ``VTALoadBuffer2D``,
  ``VTAStoreBuffer2D``, ``VTAPushGEMMOp`` and ``VTAPushALUOp`` with ``CheckInsnOverFlow``: when
  ``(count + 6) * 16 > VTA_MAX_XFER`` it synchronises at once (closing sequence, FINISH, device run)
  and starts an empty instruction buffer; ``VTADepPush`` / ``VTADepPop`` append NOPs but never check.
  Here the same test runs at the same place -- after the call's instructions (a push's LOAD UOP and
  GEMM/ALU both) are appended, with the instructions since the last barrier and ``max_insns``
  (default ``VTA_MAX_XFER / 16``) -- and the barrier is the closing sequence *without* FINISH: store
  and load push to compute, compute pops both.  So a ``dep_push`` right after the crossing call does
  not merge into it but starts the next segment (a NOP there), exactly where TVM's next launch has
  it.  Uop residency is reset as TVM does after every run, so the next kernels are reloaded.  Tokens
  the program has in flight stay in their queues, as they would across TVM's runs.
  ``stats["flushes"]`` counts barriers.  ``max_insns`` bounds a segment as TVM's test bounds a
  launch: the last test that passed saw at most ``max_insns - 6`` instructions; the NOPs of later
  dependence calls, the crossing call's instructions (at most 2) and the closing sequence follow.
* **Each kernel has one fixed place in the image's uop segment** (in recording order), and every
  LOAD UOP of it reads from there.  This is not what TVM does, and TVM's layout is wrong after an
  eviction within a launch: its LOAD UOP takes the kernel's offset among the resident kernels *at
  the time of the load*, but the uop DMA buffer is written once, at the sync, from the kernels
  resident *then*.  Example (uop buffer of 8): A (3 uops) at [0, 3), B (3) at [3, 6); C (3) does not
  fit, wraps to 0 and evicts A; at the sync the buffer holds C then B, so A's earlier LOAD UOP
  (offset 0) loads C's uops and A's GEMM runs C's kernel.  Here every LOAD UOP loads its own
  kernel's uops; streams without an eviction inside a launch differ from TVM's at most in LOAD UOP
  ``dram_base``.  TVM's uop-staging overflow sync in ``UopQueue::Push`` has no counterpart; it never
  fires in TVM either (its staging vector stays empty, so the test is ``size > VTA_MAX_XFER / 4``,
  beyond the uop SRAM).
* ACC_8BIT loads run in the compute stage, like ACC, as in TVM's final runtime
  (``GetMemPipelineStage``), with a DRAM element of ``VTA_ACC_ELEM_BYTES / 4`` bytes (one int8 per
  accumulator lane, ``cfg.acc8_elem_bytes``); the hardware executes them there (hardware spec 4.1).
* TVM's ``(signature + 1) < 100`` limit on cache keys is not kept: any hashable key works (the
  lowering uses (site id, virtual-thread index)).
* Arguments are checked at the call (buffer ownership, memory types, DRAM and SRAM ranges, ISA field
  widths, kernel invariants); each failure is a :class:`RuntimeContractError` naming the call, the
  value and the rule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from vtasim.hw.config import INSN_BYTES, MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_NAMES, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig
from vtasim.hw.isa import (OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, OPCODE_NAMES, TOKEN_POPS, TOKEN_PUSHES,
                    TOKEN_QUEUES, Insn, IsaError, module_of, store_mem_type)
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import ImageError
from vtasim.sim.image import MemoryImage, Output, check_output_name
from vtasim.sim.result import COUNTER_NAMES

from .errors import RuntimeContractError
from .kernel import MODE_ALU, MODE_GEMM, MODE_NAMES, KernelRecorder, UopKernel, check_int
from .stream import STAGE_COMPUTE, STAGE_LOAD, STAGE_STORE, InsnStream, check_stage_pair, stage_module
from .uop_ring import UopRing

__all__ = ["CommandQueue", "DramBuffer", "VTA_MAX_XFER", "CLOSING_HEADROOM"]

# tvm-vta include/vta/driver.h: bytes of the instruction (and uop) DMA buffer (hardware spec 5.6)
VTA_MAX_XFER = 1 << 25
# TVM's CheckInsnOverFlow keeps room for this many closing instructions (NOPs + FINISH)
CLOSING_HEADROOM = 6
# a segment must hold the closing slots plus the most one call appends (LOAD UOP + GEMM/ALU)
MIN_MAX_INSNS = CLOSING_HEADROOM + 2
LOAD_TYPES = (MEM_INP, MEM_WGT, MEM_ACC, MEM_ACC_8BIT)
# the origin strings of dependence calls, made once (they are the most frequent calls)
_ORIGINS = {(call, a, b): f"{call}({a}, {b})" for call in ("dep_push", "dep_pop")
            for a, b in ((1, 2), (2, 1), (2, 3), (3, 2))}
_queue_ids = itertools.count(1)        # tells one queue's buffers from another's (id() can be reused)


@dataclass(frozen=True)
class DramBuffer:
    """A DRAM region of one queue's image: ``addr`` byte address, ``nbytes`` size."""

    name: str
    addr: int
    nbytes: int
    is_output: bool
    queue_id: int

    def elem(self, cfg: VTAConfig, mem_type: int, offset: int = 0) -> int:
        """``dram_base`` of element ``offset`` for ``mem_type`` (address / element bytes + offset)."""
        return self.addr // cfg.dram_elem_bytes(mem_type) + offset


class CommandQueue:
    """Builds one instruction stream, its uop kernels and memory image from runtime calls."""

    def __init__(self, cfg: VTAConfig, *, max_insns: int | None = None, name: str = "prog"):
        if not isinstance(cfg, VTAConfig):
            raise RuntimeContractError(f"CommandQueue: cfg must be a vtasim.hw.config.VTAConfig, got {type(cfg).__name__}")
        try:
            check_output_name(name)
        except ImageError:
            raise RuntimeContractError(f"CommandQueue: name = {name!r} is not a plain name "
                                       f"(rule: [A-Za-z0-9_.-]+)") from None
        if max_insns is None:
            max_insns = VTA_MAX_XFER // INSN_BYTES
        self.max_insns = check_int("CommandQueue", "max_insns", max_insns, MIN_MAX_INSNS)
        self.cfg = cfg
        self.name = name
        self._id = next(_queue_ids)
        self._uop_name = f"{name}.uops"
        # per memory type, looked up on every DMA call (the config computes them on each access)
        self._dram_eb = {m: cfg.dram_elem_bytes(m) for m in MEM_NAMES}
        self._depth = {m: cfg.sram_depth(m) for m in MEM_NAMES}
        self._store_type = store_mem_type(cfg)
        self._builder = ProgramBuilder(cfg)
        self._stream = InsnStream(cfg)
        # fast-path tables: LOAD/STORE field limits from the ISA layout; per load type its DRAM
        # element bytes, SRAM depth, stage and name
        self._mem_limit = dict(self._stream.limits(OP_LOAD))
        self._load_spec = {m: (self._dram_eb[m], self._depth[m], module_of(OP_LOAD, m) + 1, f"mem {MEM_NAMES[m]}")
                           for m in LOAD_TYPES}
        self._ring = UopRing(cfg.uop_depth)
        self._kernels: dict = {}              # key -> UopKernel, recorded once (TVM's UopKernelMap)
        self._kernel_order: list[UopKernel] = []
        self._uop_total = 0
        self._buffers: dict[str, DramBuffer] = {}
        self._expected_counters = None
        self._segment_start = 0               # first instruction after the last flush barrier
        self._closed = False                  # synchronize() ran
        self._image = None
        self._counts = {"uop_loads": 0, "flushes": 0, "kernel_hits": 0}

    # ---- DRAM ------------------------------------------------------------------------------------
    def _check_new_name(self, call: str, name) -> None:
        self._check_open(call)
        try:
            check_output_name(name)
        except ImageError:
            raise RuntimeContractError(f"{call}({name!r}): not a plain buffer name (rule: [A-Za-z0-9_.-]+)") from None
        if name in self._buffers or name == self._uop_name:
            raise RuntimeContractError(f"{call}({name!r}): the name is already used in this queue")

    def alloc_input(self, name: str, array) -> DramBuffer:
        """Place ``array``'s bytes (already in the packed layout) in DRAM."""
        self._check_new_name("alloc_input", name)
        if isinstance(array, (bytes, bytearray, memoryview)):
            array = np.frombuffer(bytes(array), dtype=np.uint8)
        if not isinstance(array, np.ndarray):
            raise RuntimeContractError(f"alloc_input({name!r}): data must be a numpy array or bytes, "
                                       f"got {type(array).__name__}")
        b = self._builder.data(name, array)
        buf = DramBuffer(name, b.addr, b.nbytes, False, self._id)
        self._buffers[name] = buf
        return buf

    def alloc_inout(self, name: str, array) -> DramBuffer:
        """Place ``array``'s bytes in DRAM and report the region as output ``name`` too: a buffer a chain of
        kernels both starts from (its initial bytes, e.g. a padding border) and reads back."""
        buf = self.alloc_input(name, array)
        self._builder.outputs.append(Output(name, buf.addr, buf.nbytes))
        return buf

    def alloc_output(self, name: str, nbytes) -> DramBuffer:
        """Reserve a zero-filled region the program writes; it becomes output ``name`` of the image."""
        self._check_new_name("alloc_output", name)
        nbytes = check_int(f"alloc_output({name!r})", "nbytes", nbytes, 1)
        b = self._builder.output(name, nbytes)
        buf = DramBuffer(name, b.addr, b.nbytes, True, self._id)
        self._buffers[name] = buf
        return buf

    def expect(self, name: str, data) -> None:
        """Expected final bytes of output ``name`` (from an independent reference)."""
        self._check_not_built(f"expect({name!r})")
        buf = self._buffers.get(name)
        if buf is None or not buf.is_output:
            raise RuntimeContractError(f"expect({name!r}): no output of that name (outputs: "
                                       f"{', '.join(n for n, b in self._buffers.items() if b.is_output) or 'none'})")
        raw = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else np.ascontiguousarray(data).tobytes()
        if len(raw) != buf.nbytes:
            raise RuntimeContractError(f"expect({name!r}): {len(raw)} bytes given, the output has {buf.nbytes}")
        self._builder.expect(name, raw)

    def expect_counters(self, counters: dict) -> None:
        """fsim counters (``vtasim.sim.result.COUNTER_NAMES``) an independent reference predicts."""
        self._check_not_built("expect_counters")
        bad = [k for k in counters if k not in COUNTER_NAMES]
        if bad:
            raise RuntimeContractError(f"expect_counters: {bad[0]!r} is not one of {', '.join(COUNTER_NAMES)}")
        self._expected_counters = {k: check_int("expect_counters", k, v) for k, v in counters.items()}

    def _own(self, call: str, buf) -> DramBuffer:
        if not isinstance(buf, DramBuffer) or buf.queue_id != self._id or self._buffers.get(buf.name) is not buf:
            raise RuntimeContractError(f"{call}: {buf!r} is not a DramBuffer of this queue "
                                       f"(rule: buffers come from alloc_input/alloc_output of the same queue)")
        return buf

    # ---- DMA -------------------------------------------------------------------------------------
    # A ResNet layer makes ~100k of these calls, so each has a fast path: plain ints that pass every
    # check go straight to the stream; anything else takes the checked path, which names the problem.
    def load_buffer_2d(self, src, src_elem_offset, x_size, y_size, x_stride, x_pad_before, y_pad_before,
                       x_pad_after, y_pad_after, dst_sram_index, dst_mem_type) -> None:
        """VTALoadBuffer2D: one LOAD; INP/WGT in the load stage, ACC/ACC_8BIT in compute."""
        spec = self._load_spec.get(dst_mem_type) if type(dst_mem_type) is int else None
        if (spec is not None and not self._closed and self._buffers.get(getattr(src, "name", None)) is src
                and type(src_elem_offset) is int and type(x_size) is int and type(y_size) is int
                and type(x_stride) is int and type(x_pad_before) is int and type(y_pad_before) is int
                and type(x_pad_after) is int and type(y_pad_after) is int and type(dst_sram_index) is int):
            eb, depth, stage, where = spec
            lim = self._mem_limit
            dram = src.addr // eb + src_elem_offset
            if (0 <= src_elem_offset and 0 < x_size < lim["x_size"] and 0 < y_size < lim["y_size"]
                    and 0 <= x_stride < lim["x_stride"] and 0 <= x_pad_before < lim["x_pad_0"]
                    and 0 <= x_pad_after < lim["x_pad_1"] and 0 <= y_pad_before < lim["y_pad_0"]
                    and 0 <= y_pad_after < lim["y_pad_1"] and 0 <= dst_sram_index < lim["sram_base"]
                    and dram < lim["dram_base"]
                    and (src_elem_offset + (y_size - 1) * x_stride + x_size) * eb <= src.nbytes
                    and dst_sram_index + (y_pad_before + y_size + y_pad_after) * (x_pad_before + x_size + x_pad_after)
                    <= depth):
                self._stream.create(stage, Insn(opcode=OP_LOAD, memory_type=dst_mem_type, sram_base=dst_sram_index,
                                                dram_base=dram, y_size=y_size, x_size=x_size, x_stride=x_stride,
                                                x_pad_0=x_pad_before, y_pad_0=y_pad_before, x_pad_1=x_pad_after,
                                                y_pad_1=y_pad_after), f"load_buffer_2d({src.name}, {where})")
                self._check_overflow()
                return
        self._load_checked(src, src_elem_offset, x_size, y_size, x_stride, x_pad_before, y_pad_before,
                           x_pad_after, y_pad_after, dst_sram_index, dst_mem_type)

    def _load_checked(self, src, src_elem_offset, x_size, y_size, x_stride, x_pad_before, y_pad_before,
                      x_pad_after, y_pad_after, dst_sram_index, dst_mem_type) -> None:
        call = "load_buffer_2d"
        self._check_open(call)
        src = self._own(call, src)
        mem = check_int(f"{call}({src.name})", "dst_mem_type", dst_mem_type, 0, None)
        where = f"{call}({src.name}, mem {MEM_NAMES.get(mem, mem)})"
        if mem == MEM_UOP:
            raise RuntimeContractError(f"{where}: dst_mem_type UOP: uop loads are made by push_gemm_op/"
                                       f"push_alu_op (rule: the runtime owns the uop buffer)")
        if mem not in LOAD_TYPES:
            raise RuntimeContractError(f"{where}: dst_mem_type = {mem} is not a load type "
                                       f"({', '.join(f'{t} {MEM_NAMES[t]}' for t in LOAD_TYPES)})")
        off = check_int(where, "src_elem_offset", src_elem_offset)
        x = check_int(where, "x_size", x_size, 1)
        y = check_int(where, "y_size", y_size, 1)
        stride = check_int(where, "x_stride", x_stride)
        pads = [check_int(where, n, v) for n, v in (("x_pad_before", x_pad_before), ("y_pad_before", y_pad_before),
                                                    ("x_pad_after", x_pad_after), ("y_pad_after", y_pad_after))]
        sram = check_int(where, "dst_sram_index", dst_sram_index)
        insn = Insn(opcode=OP_LOAD, memory_type=mem, sram_base=sram, dram_base=src.addr // self._dram_eb[mem] + off,
                    y_size=y, x_size=x, x_stride=stride, x_pad_0=pads[0], y_pad_0=pads[1], x_pad_1=pads[2],
                    y_pad_1=pads[3])
        self._stream.validate(insn, where)
        self._check_dram(where, src, mem, off, x, y, stride)
        depth = self._depth[mem]
        rows, cols = pads[1] + y + pads[3], pads[0] + x + pads[2]
        if sram + rows * cols > depth:
            raise RuntimeContractError(f"{where}: writes SRAM elements [{sram}, {sram + rows * cols}) "
                                       f"({rows} rows x {cols} with pads), beyond the {MEM_NAMES[mem]} "
                                       f"buffer depth {depth}")
        self._stream.create(module_of(OP_LOAD, mem) + 1, insn, where)
        self._check_overflow()

    def store_buffer_2d(self, src_sram_index, src_mem_type, dst, dst_elem_offset, x_size, y_size, x_stride) -> None:
        """VTAStoreBuffer2D: one STORE (store stage), pads 0."""
        if (type(src_mem_type) is int and src_mem_type == MEM_OUT and not self._closed
                and self._buffers.get(getattr(dst, "name", None)) is dst and type(src_sram_index) is int
                and type(dst_elem_offset) is int and type(x_size) is int and type(y_size) is int
                and type(x_stride) is int):
            lim = self._mem_limit
            eb = self._dram_eb[MEM_OUT]
            dram = dst.addr // eb + dst_elem_offset
            if (0 <= dst_elem_offset and 0 < x_size < lim["x_size"] and 0 < y_size < lim["y_size"]
                    and 0 <= x_stride < lim["x_stride"] and 0 <= src_sram_index < lim["sram_base"]
                    and dram < lim["dram_base"]
                    and (dst_elem_offset + (y_size - 1) * x_stride + x_size) * eb <= dst.nbytes
                    and src_sram_index + x_size * y_size <= self._depth[MEM_OUT]):
                self._stream.create(STAGE_STORE, Insn(opcode=OP_STORE, memory_type=self._store_type,
                                                      sram_base=src_sram_index, dram_base=dram, y_size=y_size,
                                                      x_size=x_size, x_stride=x_stride),
                                    f"store_buffer_2d({dst.name})")
                self._check_overflow()
                return
        self._store_checked(src_sram_index, src_mem_type, dst, dst_elem_offset, x_size, y_size, x_stride)

    def _store_checked(self, src_sram_index, src_mem_type, dst, dst_elem_offset, x_size, y_size, x_stride) -> None:
        call = "store_buffer_2d"
        self._check_open(call)
        dst = self._own(call, dst)
        where = f"{call}({dst.name})"
        mem = check_int(where, "src_mem_type", src_mem_type, 0, None)
        if mem != MEM_OUT:
            raise RuntimeContractError(f"{where}: src_mem_type = {mem} ({MEM_NAMES.get(mem, '?')}); a store "
                                       f"reads the OUT view (rule: src_mem_type {MEM_OUT} OUT)")
        sram = check_int(where, "src_sram_index", src_sram_index)
        off = check_int(where, "dst_elem_offset", dst_elem_offset)
        x = check_int(where, "x_size", x_size, 1)
        y = check_int(where, "y_size", y_size, 1)
        stride = check_int(where, "x_stride", x_stride)
        insn = Insn(opcode=OP_STORE, memory_type=self._store_type, sram_base=sram,
                    dram_base=dst.addr // self._dram_eb[MEM_OUT] + off, y_size=y, x_size=x, x_stride=stride)
        self._stream.validate(insn, where)
        self._check_dram(where, dst, MEM_OUT, off, x, y, stride)
        depth = self._depth[MEM_OUT]
        if sram + x * y > depth:
            raise RuntimeContractError(f"{where}: reads SRAM elements [{sram}, {sram + x * y}), beyond the "
                                       f"OUT buffer depth {depth}")
        self._stream.create(STAGE_STORE, insn, where)
        self._check_overflow()

    def _check_dram(self, where, buf: DramBuffer, mem, off, x, y, stride) -> None:
        eb = self._dram_eb[mem]
        end = (off + (y - 1) * stride + x) * eb
        if end > buf.nbytes:
            raise RuntimeContractError(f"{where}: touches bytes up to {end} of buffer {buf.name!r}, which has "
                                       f"{buf.nbytes} (offset {off}, {y} rows x {x}, stride {stride}, "
                                       f"{eb}-byte {MEM_NAMES[mem]} elements)")

    # ---- uop kernels -----------------------------------------------------------------------------
    def push_gemm_op(self, kernel_key, record) -> None:
        """VTAPushGEMMOp: get or record the kernel, LOAD UOP when not resident, then one GEMM."""
        self._push_op("push_gemm_op", MODE_GEMM, kernel_key, record)

    def push_alu_op(self, kernel_key, record) -> None:
        """VTAPushALUOp: get or record the kernel, LOAD UOP when not resident, then one ALU."""
        self._push_op("push_alu_op", MODE_ALU, kernel_key, record)

    @staticmethod
    def _op_insn(kernel: UopKernel) -> Insn:
        """The GEMM/ALU instruction that runs ``kernel`` where it is resident."""
        fields = kernel.meta.get("insn_fields")
        if fields is None:             # fixed once recorded; only the uop range depends on residency
            fields = dict(reset_reg=kernel.reset, **kernel.loop_fields())
            if kernel.mode == MODE_ALU:
                fields.update(opcode=OP_ALU, alu_opcode=kernel.opcode, use_imm=kernel.use_imm, imm=kernel.imm)
            else:
                fields["opcode"] = OP_GEMM
            kernel.meta["insn_fields"] = fields
        return Insn(uop_bgn=kernel.sram_begin, uop_end=kernel.sram_end, **fields)

    def _kernel(self, call: str, mode: int, key, record) -> UopKernel:
        try:
            hash(key)
        except TypeError:
            raise RuntimeContractError(f"{call}: kernel_key {key!r} is not hashable") from None
        kernel = self._kernels.get(key)
        if kernel is not None:
            if kernel.mode != mode:
                raise RuntimeContractError(f"{call}(key={key!r}): the key names a {MODE_NAMES[kernel.mode]} kernel "
                                           f"(rule: a key is one kernel, recorded once)")
            self._counts["kernel_hits"] += 1
            return kernel
        if not callable(record):
            raise RuntimeContractError(f"{call}(key={key!r}): record = {record!r} is not callable")
        recorder = KernelRecorder(self.cfg, key, call, mode)
        record(recorder)
        kernel = recorder.finish()
        # its instruction's fields (opcode, loops) are checked once, before the kernel is cached or
        # anything is emitted; only the uop range changes later and the ring keeps that in range
        where = f"{call}(key={key!r})"
        probe = self._op_insn(kernel)
        probe.uop_end = kernel.size
        self._stream.validate(probe, where)
        kernel.meta["origin"] = where
        kernel.dram_offset = self._uop_total
        self._uop_total += kernel.size
        self._kernels[key] = kernel
        self._kernel_order.append(kernel)
        return kernel

    def _push_op(self, call: str, mode: int, key, record) -> None:
        self._check_open(call)
        kernel = self._kernel(call, mode, key, record)
        where = kernel.meta["origin"]
        if self._ring.place(kernel):
            n = kernel.size
            # dram_base is the kernel's place in the uop segment, known once build() lays it out
            self._stream.create(STAGE_COMPUTE, Insn(opcode=OP_LOAD, memory_type=MEM_UOP, sram_base=kernel.sram_begin,
                                                    y_size=1, x_size=n, x_stride=n), where, kernel=kernel)
            self._counts["uop_loads"] += 1
        self._stream.create(STAGE_COMPUTE, self._op_insn(kernel), where)
        self._check_overflow()

    # ---- dependence tokens -----------------------------------------------------------------------
    def dep_push(self, from_stage, to_stage) -> None:
        """VTADepPush: a token from ``from_stage`` to ``to_stage`` after its last instruction."""
        frm, to = check_stage_pair("dep_push", from_stage, to_stage)
        origin = _ORIGINS[("dep_push", frm, to)]
        self._check_open(origin)
        self._stream.dep_push(frm, to, origin)

    def dep_pop(self, from_stage, to_stage) -> None:
        """VTADepPop: ``to_stage``'s next instruction waits for a token from ``from_stage``."""
        frm, to = check_stage_pair("dep_pop", from_stage, to_stage)
        origin = _ORIGINS[("dep_pop", frm, to)]
        self._check_open(origin)
        self._stream.dep_pop(frm, to, origin)

    # ---- closing ---------------------------------------------------------------------------------
    def _drain(self, origin: str) -> None:
        """The closing sequence without FINISH (compiler spec 5.4): compute waits for load and store."""
        s = self._stream
        s.dep_push(STAGE_STORE, STAGE_COMPUTE, origin)
        s.dep_push(STAGE_LOAD, STAGE_COMPUTE, origin)
        s.dep_pop(STAGE_STORE, STAGE_COMPUTE, origin)
        s.dep_pop(STAGE_LOAD, STAGE_COMPUTE, origin)
        s.commit_pending_pop(STAGE_COMPUTE, origin)

    def _check_overflow(self) -> None:
        """TVM's CheckInsnOverFlow, as an in-stream barrier (module docstring).

        Called at the end of every call that appended a LOAD, STORE or GEMM/ALU (its LOAD UOP
        included), never from ``dep_push`` / ``dep_pop``: the barrier follows the crossing call at
        once, so the dependence calls after it belong to the next segment, as in TVM."""
        if len(self._stream) - self._segment_start + CLOSING_HEADROOM > self.max_insns:
            self._drain("flush")
            self._ring.reset()
            self._counts["flushes"] += 1
            self._segment_start = len(self._stream)

    def kernel_boundary(self) -> None:
        """The end of one kernel of a multi-kernel launch: the closing sequence without FINISH (compute waits
        for load and store), then the load stage waits for compute, so no load of the next kernel reads DRAM
        before every store of this one has landed; uop residency restarts, as after a launch."""
        self._check_open("kernel_boundary")
        self._drain("kernel_boundary")
        self._stream.dep_push(STAGE_COMPUTE, STAGE_LOAD, "kernel_boundary")
        self._stream.dep_pop(STAGE_COMPUTE, STAGE_LOAD, "kernel_boundary")
        self._ring.reset()

    @property
    def insn_count(self) -> int:
        """Instructions in the stream so far (the program index the next one gets)."""
        return len(self._stream)

    def synchronize(self) -> None:
        """VTASynchronize: closing sequence, then FINISH (which carries no pop); closes the queue."""
        self._check_open("synchronize")
        self._drain("synchronize")
        if self._stream.any_pending():           # cannot happen after _drain; TVM CHECKs the same
            raise RuntimeContractError("synchronize: pops still pending before FINISH")
        self._stream.create(STAGE_COMPUTE, Insn(opcode=OP_FINISH), "synchronize")
        self._ring.reset()
        self._closed = True

    def _check_not_built(self, call: str) -> None:
        if self._image is not None:
            raise RuntimeContractError(f"{call}: the image was already built (rule: expectations come before build())")

    def _check_open(self, call: str) -> None:
        if self._closed:
            raise RuntimeContractError(f"{call}: the stream was closed by synchronize() (rule: one image is one "
                                       f"launch ending in FINISH; put every call, drain pops included, before it)")

    # ---- result ----------------------------------------------------------------------------------
    def build(self) -> MemoryImage:
        """The memory image: buffers, one uop segment, the instructions, expected outputs/counters."""
        if self._image is not None:
            return self._image
        if not self._closed:
            raise RuntimeContractError("build: called before synchronize() (rule: the stream ends with the "
                                       "closing sequence and FINISH)")
        self._check_tokens()
        b = self._builder
        uops = [t for k in self._kernel_order for t in k.uops]
        seg = b.uops(uops, name=self._uop_name) if uops else None
        for e in self._stream.entries:
            i = e.insn
            if e.nop_stage:
                b.nop(stage_module(e.nop_stage), pop_prev=i.pop_prev, pop_next=i.pop_next,
                      push_prev=i.push_prev, push_next=i.push_next)
                continue
            if e.kernel is not None:
                i = Insn(**i.as_dict())
                i.dram_base = seg.elem(MEM_UOP, e.kernel.dram_offset)
            try:
                b.insn(i)
            except IsaError as exc:            # checked at the call already; name the call if not
                raise RuntimeContractError(f"{e.origin}: {exc}") from None
        if self._expected_counters is not None:
            b.expected_counters = dict(self._expected_counters)
        self._image = b.build()
        return self._image

    def token_totals(self) -> dict:
        """``{queue: {"push": n, "pop": n}}`` over the stream so far (queues of vtasim.hw.isa.TOKEN_QUEUES)."""
        tot = {q: {"push": 0, "pop": 0} for q in TOKEN_QUEUES}
        for e in self._stream.entries:
            i = e.insn
            m = stage_module(e.nop_stage) if e.nop_stage else module_of(i.opcode, i.memory_type)
            if i.opcode == OP_FINISH:
                m = stage_module(STAGE_COMPUTE)
            for flag, q in TOKEN_PUSHES[m]:
                tot[q]["push"] += getattr(i, flag)
            for flag, q in TOKEN_POPS[m]:
                tot[q]["pop"] += getattr(i, flag)
        return tot

    def _check_tokens(self) -> None:
        for q, t in self.token_totals().items():
            if t["pop"] > t["push"]:
                raise RuntimeContractError(f"build: token queue {q} has {t['pop']} pops and {t['push']} pushes; "
                                           f"a pop without a push waits forever (rule: every dep_pop has a "
                                           f"dep_push on the same queue)")

    # ---- introspection ---------------------------------------------------------------------------
    @property
    def insns(self) -> list:
        """The stream so far as :class:`vtasim.hw.isa.Insn` copies (a NOP shows opcode and flags; LOAD UOP
        dram_base is 0 until build).  Decode ``build().insn_bytes()`` for the final encoding."""
        return [Insn(**e.insn.as_dict()) for e in self._stream.entries]

    @property
    def origins(self) -> list:
        """The runtime call that created each instruction (``"flush"`` / ``"synchronize"`` for closing NOPs)."""
        return [e.origin for e in self._stream.entries]

    @property
    def kernels(self) -> list:
        """Recorded kernels in recording order (= their order in the uop segment)."""
        return list(self._kernel_order)

    @property
    def stats(self) -> dict:
        """Counts so far: ``insns`` (total), ``insns_by_opcode`` (NOPs count under LOAD/STORE, LOAD UOPs
        under LOAD), ``nops``, ``uop_kernels`` (recorded), ``uops`` / ``uop_bytes`` (the uop segment),
        ``uop_loads`` (LOAD UOPs emitted), ``uop_evictions``, ``flushes`` (barriers), ``kernel_hits``
        (pushes that found their kernel recorded) and ``tokens`` (per queue pushes/pops)."""
        by_op = {name: 0 for name in OPCODE_NAMES.values()}
        for e in self._stream.entries:
            by_op[OPCODE_NAMES[e.insn.opcode]] += 1
        return {"insns": len(self._stream), "insns_by_opcode": by_op, "nops": self._stream.nops,
                "uop_kernels": len(self._kernel_order), "uops": self._uop_total,
                "uop_bytes": self._uop_total * self.cfg.uop_elem_bytes,
                "uop_loads": self._counts["uop_loads"], "uop_evictions": self._ring.evictions,
                "flushes": self._counts["flushes"], "kernel_hits": self._counts["kernel_hits"],
                "tokens": self.token_totals()}
