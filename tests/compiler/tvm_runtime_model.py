"""An independent model of TVM's VTA runtime, for checking the runtime stream builder against it.

Written for the tests from the rules of TVM's ``vta/runtime/runtime.cc`` (its last version), not
from ``vtasim.compiler.runtime``: a :class:`CallLog` wraps a :class:`vtasim.compiler.runtime.CommandQueue` and
records the runtime calls a program makes; :func:`tvm_launches` replays them the way TVM's runtime
would and returns the instruction buffer of every device launch, as ``(kind, flags)`` rows in the
form :func:`listing` decodes from an image.

The rules replayed:

* every load, store and GEMM/ALU push ends with the overflow test: when the instructions of the
  current launch plus 6 exceed ``max_insns``, synchronise (closing sequence and FINISH), which ends
  the launch; the next instruction starts an empty buffer and no kernel is resident.  Dependence
  calls never test;
* a kernel that is not resident gets a LOAD UOP before its GEMM/ALU (the model keeps no ring: it
  asserts that the kernels of one launch fit the uop buffer, so nothing is evicted);
* pending pops, push merging into the last instruction of the buffer and NOPs as in
  ``InsnQueue::DepPop`` / ``DepPush`` / ``CommitPendingPop``.
"""

from __future__ import annotations

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, decode_stream

FLAG_CHARS = (("P", "pop_prev"), ("p", "pop_next"), ("U", "push_prev"), ("u", "push_next"))
LOAD_KINDS = {MEM_UOP: "LD-UOP", MEM_INP: "LD-INP", MEM_WGT: "LD-WGT", MEM_ACC: "LD-ACC", MEM_ACC_8BIT: "LD-ACC8"}
CLOSING = 6                      # TVM's CheckInsnOverFlow headroom


def listing(image):
    """(kind, flags) per instruction of the built image, decoded from its bytes."""
    out = []
    for i in decode_stream(image.cfg, image.insn_bytes()):
        flags = "".join(c for c, f in FLAG_CHARS if getattr(i, f))
        if i.opcode == OP_LOAD:
            kind = ("NOP-" + {MEM_INP: "MEM", MEM_UOP: "COMPUTE"}[i.memory_type]) if i.x_size == 0 else \
                LOAD_KINDS[i.memory_type]
        elif i.opcode == OP_STORE:
            kind = "NOP-STORE" if i.x_size == 0 else "ST"
        else:
            kind = {OP_GEMM: "GEMM", OP_ALU: "ALU", OP_FINISH: "FINISH"}[i.opcode]
        out.append((kind, flags))
    return out


class _CountingRecorder:
    """Passes a record callback's calls on to the real recorder and counts the uops."""

    def __init__(self, k):
        self.k = k
        self.n = 0

    def loop_begin(self, *a):
        self.k.loop_begin(*a)

    def loop_end(self):
        self.k.loop_end()

    def push(self, *a):
        self.n += 1
        self.k.push(*a)


class CallLog:
    """Stands in for a CommandQueue: forwards every runtime call and records it in ``calls``."""

    def __init__(self, queue):
        self.queue = queue
        self.calls: list[tuple] = []
        self.kernel_size: dict = {}

    def load_buffer_2d(self, *args):
        self.queue.load_buffer_2d(*args)
        self.calls.append(("load", args[-1]))

    def store_buffer_2d(self, *args):
        self.queue.store_buffer_2d(*args)
        self.calls.append(("store",))

    def _push(self, method, kind, key, record):
        def counted(k):
            c = _CountingRecorder(k)
            result = record(c)
            self.kernel_size[key] = c.n
            return result
        method(key, counted)
        self.calls.append(("push", kind, key))

    def push_gemm_op(self, key, record):
        self._push(self.queue.push_gemm_op, "GEMM", key, record)

    def push_alu_op(self, key, record):
        self._push(self.queue.push_alu_op, "ALU", key, record)

    def dep_push(self, frm, to):
        self.queue.dep_push(frm, to)
        self.calls.append(("dep_push", frm, to))

    def dep_pop(self, frm, to):
        self.queue.dep_pop(frm, to)
        self.calls.append(("dep_pop", frm, to))

    def synchronize(self):
        self.queue.synchronize()
        self.calls.append(("sync",))


class _TvmRuntime:
    def __init__(self, max_insns: int, uop_depth: int, kernel_size: dict):
        self.max_insns = max_insns
        self.uop_depth = uop_depth
        self.kernel_size = kernel_size
        self.launches: list[list] = []
        self.buf: list[dict] = []                 # the current launch's instructions
        self.pending = {s: {"P": 0, "p": 0} for s in (1, 2, 3)}
        self.resident: set = set()
        self.resident_uops = 0
        self.crossings = []                       # index in the call list of each overflow

    # instruction buffer
    def create(self, kind: str, stage: int):
        pend = self.pending[stage]
        self.buf.append({"kind": kind, "stage": stage, "P": pend["P"], "p": pend["p"], "U": 0, "u": 0})
        pend["P"] = pend["p"] = 0

    def noop(self, stage: int, **flags):
        kind = {1: "NOP-MEM", 2: "NOP-COMPUTE", 3: "NOP-STORE"}[stage]
        # only a STORE-opcode NOP keeps a stage for merging; a LOAD with x_size 0 has none
        self.buf.append({"kind": kind, "stage": 3 if stage == 3 else 0, "P": 0, "p": 0, "U": 0, "u": 0, **flags})

    def commit(self, stage: int):
        pend = self.pending[stage]
        if pend["P"] or pend["p"]:
            self.noop(stage, P=pend["P"], p=pend["p"])
            pend["P"] = pend["p"] = 0

    def dep_pop(self, frm: int, to: int):
        which = "P" if frm < to else "p"
        if self.pending[to][which]:
            self.commit(to)
        self.pending[to][which] = 1

    def dep_push(self, frm: int, to: int):
        self.commit(frm)
        flag = "u" if frm < to else "U"
        if self.buf and self.buf[-1]["stage"] == frm and not self.buf[-1][flag]:
            self.buf[-1][flag] = 1
            return
        self.noop(frm, **{flag: 1})

    # runtime calls
    def load(self, mem: int):
        self.create(LOAD_KINDS[mem], 1 if mem in (MEM_INP, MEM_WGT) else 2)

    def push(self, kind: str, key):
        if key not in self.resident:
            self.resident_uops += self.kernel_size[key]
            assert self.resident_uops <= self.uop_depth, "model: eviction inside a launch is not modelled"
            self.resident.add(key)
            self.create("LD-UOP", 2)
        self.create(kind, 2)

    def synchronize(self):
        self.dep_push(3, 2)
        self.dep_push(1, 2)
        self.dep_pop(3, 2)
        self.dep_pop(1, 2)
        self.commit(2)
        assert not any(v for p in self.pending.values() for v in p.values())
        self.buf.append({"kind": "FINISH", "stage": 0, "P": 0, "p": 0, "U": 0, "u": 0})
        self.launches.append([(e["kind"], "".join(c for c in "PpUu" if e[c])) for e in self.buf])
        self.buf = []
        self.resident.clear()
        self.resident_uops = 0

    def replay(self, calls):
        for n, call in enumerate(calls):
            op = call[0]
            if op == "load":
                self.load(call[1])
            elif op == "store":
                self.create("ST", 3)
            elif op == "push":
                self.push(call[1], call[2])
            elif op == "dep_push":
                self.dep_push(call[1], call[2])
                continue
            elif op == "dep_pop":
                self.dep_pop(call[1], call[2])
                continue
            else:
                self.synchronize()
                continue
            if len(self.buf) + CLOSING > self.max_insns:    # after the call, as CheckInsnOverFlow
                self.crossings.append(n)
                self.synchronize()


def tvm_launches(calls, kernel_size: dict, max_insns: int, uop_depth: int) -> tuple:
    """``(launches, crossings)``: the instruction rows of each device launch TVM's runtime would
    make from ``calls``, and the index of every call after which its buffer overflowed."""
    rt = _TvmRuntime(max_insns, uop_depth, kernel_size)
    rt.replay(calls)
    assert not rt.buf, "the calls do not end with synchronize"
    return rt.launches, rt.crossings
