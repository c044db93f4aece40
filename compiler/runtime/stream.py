"""The instruction stream under construction and its dependence-flag rules (hardware spec 5.3).

Stages use TVM's numbering: 1 load, 2 compute, 3 store (module = stage - 1 in ``vtasim.hw.isa``).  The rules:

* ``dep_pop(from, to)`` runs on stage ``to``: a *pending* pop, "prev" when ``from < to`` else
  "next".  A second pending pop of the same kind first commits the pending ones as a NOP of stage
  ``to``.  The next instruction created in that stage carries and clears the pending pops.
* ``dep_push(from, to)`` runs on stage ``from``: commit that stage's pending pops (as a NOP); then
  if the last instruction of the whole stream belongs to stage ``from`` and lacks the push bit
  (push_next when ``from < to``, push_prev otherwise), set it there; else append a NOP of stage
  ``from`` carrying the push.
* An instruction's stage for that merge test: GEMM/ALU compute; LOAD with ``x_size == 0`` none (a
  push never merges into a NOP LOAD); LOAD INP/WGT load, other LOADs compute; STORE (NOPs too)
  store; FINISH none.
* Load<->store pairs have no token queue: an error.

Entries keep the :class:`vtasim.hw.isa.Insn` mutable until the image is built, because a later push sets a
bit on an instruction already in the stream.  NOPs are emitted through
:meth:`vtasim.sim.builder.ProgramBuilder.nop`, which owns their flavours (hardware spec 2.7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.hw.config import VTAConfig
from vtasim.hw.isa import (MODULE_COMPUTE, MODULE_LOAD, MODULE_STORE, OP_ALU, OP_GEMM, OP_LOAD, OP_STORE, Insn, layout,
                    module_of)

from .errors import RuntimeContractError

__all__ = ["STAGE_NONE", "STAGE_LOAD", "STAGE_COMPUTE", "STAGE_STORE", "STAGE_NAMES", "Entry", "InsnStream",
           "stage_module", "check_stage_pair"]

STAGE_NONE, STAGE_LOAD, STAGE_COMPUTE, STAGE_STORE = 0, 1, 2, 3
STAGE_NAMES = {STAGE_LOAD: "load", STAGE_COMPUTE: "compute", STAGE_STORE: "store"}


# (from, to) pairs that have a token queue: load<->compute and compute<->store
_QUEUE_PAIRS = frozenset({(STAGE_LOAD, STAGE_COMPUTE), (STAGE_COMPUTE, STAGE_LOAD),
                          (STAGE_COMPUTE, STAGE_STORE), (STAGE_STORE, STAGE_COMPUTE)})


def stage_module(stage: int) -> int:
    """vtasim.hw.isa module id of a TVM stage id."""
    return {STAGE_LOAD: MODULE_LOAD, STAGE_COMPUTE: MODULE_COMPUTE, STAGE_STORE: MODULE_STORE}[stage]


def check_stage_pair(call: str, frm, to) -> tuple:
    """(from, to) as ints when they name a token queue, else a RuntimeContractError."""
    if type(frm) is int and type(to) is int and (frm, to) in _QUEUE_PAIRS:
        return frm, to
    for name, v in (("from_stage", frm), ("to_stage", to)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or int(v) not in STAGE_NAMES:
            raise RuntimeContractError(f"{call}({frm!r}, {to!r}): {name} = {v!r} is not a stage "
                                       f"(1 load, 2 compute, 3 store)")
    frm, to = int(frm), int(to)
    if frm == to:
        raise RuntimeContractError(f"{call}({frm}, {to}): a stage has no token queue to itself")
    if abs(frm - to) != 1:
        raise RuntimeContractError(f"{call}({frm}, {to}): there is no token queue between load and store "
                                   f"(rule: tokens flow load<->compute and compute<->store only)")
    return frm, to


@dataclass(slots=True)
class Entry:
    insn: Insn
    origin: str                     # the runtime call that created it, for messages and listings
    nop_stage: int = 0              # stage of a NOP (0: not a NOP)
    kernel: object = None           # the UopKernel a LOAD UOP loads (its dram_base is set at build)


class InsnStream:
    def __init__(self, cfg: VTAConfig):
        self.cfg = cfg
        self.entries: list[Entry] = []
        self.pending_prev = {s: 0 for s in STAGE_NAMES}
        self.pending_next = {s: 0 for s in STAGE_NAMES}
        self.nops = 0
        # (field, limit) per opcode from the ISA layout; imm (signed) is the recorder's to check
        lay = layout(cfg)
        self._limits = {op: tuple((name, 1 << width) for name, (_, width) in lay.of(op).items() if name != "imm")
                        for op in (OP_LOAD, OP_STORE, OP_GEMM, OP_ALU)}

    def limits(self, opcode: int) -> tuple:
        """``((field, 2**width), ...)`` of an opcode's unsigned fields."""
        return self._limits[opcode]

    def __len__(self) -> int:
        return len(self.entries)

    # ---- stages ---------------------------------------------------------------------------------
    @staticmethod
    def stage_of(entry: Entry) -> int:
        insn = entry.insn
        if insn.opcode in (OP_GEMM, OP_ALU):
            return STAGE_COMPUTE
        if insn.opcode == OP_STORE:
            return STAGE_STORE
        if insn.opcode == OP_LOAD:
            if entry.nop_stage or insn.x_size == 0:
                return STAGE_NONE
            return module_of(OP_LOAD, insn.memory_type) + 1
        return STAGE_NONE

    # ---- appending ------------------------------------------------------------------------------
    def validate(self, insn: Insn, origin: str) -> None:
        """Check every field against its width in the ISA layout; the error names the call.

        Only a range check (the encoding is ProgramBuilder's, at build): encoding every instruction
        twice would double the cost of a large stream.  ``imm``, the one signed field, is checked by
        the kernel recorder against ALU_IMM_WIDTH."""
        for name, limit in self._limits[insn.opcode]:
            value = getattr(insn, name)
            if not 0 <= value < limit:
                raise RuntimeContractError(f"{origin}: instruction {len(self.entries)}: field {name} = {value} "
                                           f"does not fit {limit.bit_length() - 1} bits [0, {limit - 1}]")

    def create(self, stage: int, insn: Insn, origin: str, kernel=None) -> Entry:
        """Append an instruction of ``stage``; it takes over the stage's pending pops."""
        insn.pop_prev, insn.pop_next = self.pending_prev[stage], self.pending_next[stage]
        insn.push_prev = insn.push_next = 0
        self.pending_prev[stage] = self.pending_next[stage] = 0
        entry = Entry(insn, origin, kernel=kernel)
        self.entries.append(entry)
        return entry

    def nop(self, stage: int, origin: str, push_prev=0, push_next=0, pop_prev=0, pop_next=0) -> Entry:
        # TVM's PushNoop: STORE opcode in the store stage, LOAD elsewhere; x_size 0 makes it a NOP
        opcode = OP_STORE if stage == STAGE_STORE else OP_LOAD
        insn = Insn(opcode=opcode, pop_prev=int(pop_prev), pop_next=int(pop_next),
                    push_prev=int(push_prev), push_next=int(push_next))
        entry = Entry(insn, origin, nop_stage=stage)
        self.entries.append(entry)
        self.nops += 1
        return entry

    # ---- dependence flags -----------------------------------------------------------------------
    def commit_pending_pop(self, stage: int, origin: str) -> None:
        if self.pending_prev[stage] or self.pending_next[stage]:
            self.nop(stage, origin, pop_prev=self.pending_prev[stage], pop_next=self.pending_next[stage])
            self.pending_prev[stage] = self.pending_next[stage] = 0

    def dep_pop(self, frm: int, to: int, origin: str) -> None:
        pending = self.pending_prev if frm < to else self.pending_next
        if pending[to]:
            self.commit_pending_pop(to, origin)
        pending[to] = 1

    def dep_push(self, frm: int, to: int, origin: str) -> None:
        self.commit_pending_pop(frm, origin)
        if self.entries:
            last = self.entries[-1]
            if self.stage_of(last) == frm:
                if frm < to and not last.insn.push_next:
                    last.insn.push_next = 1
                    return
                if frm > to and not last.insn.push_prev:
                    last.insn.push_prev = 1
                    return
        self.nop(frm, origin, push_prev=frm > to, push_next=frm < to)

    def any_pending(self) -> bool:
        return any(self.pending_prev.values()) or any(self.pending_next.values())
