"""Runtime stream builder: TVM's VTA runtime calls -> instruction stream, uop kernels, memory image.

The lowered program makes the calls TVM's generated host code makes (compiler spec 5)::

    from vtasim.compiler.runtime import CommandQueue
    q = CommandQueue(cfg)
    a = q.alloc_input("A", packed_a)          # DRAM buffers
    c = q.alloc_output("C", nbytes)
    q.expect("C", reference_bytes)
    q.load_buffer_2d(a, 0, 1, 1, 1, 0, 0, 0, 0, 0, MEM_INP)
    q.dep_push(1, 2); q.dep_pop(1, 2)
    q.push_gemm_op(("gemm", 0), record)       # record(k): k.loop_begin / k.push / k.loop_end
    q.store_buffer_2d(0, MEM_OUT, c, 0, 16, 1, 16)
    q.synchronize()
    image = q.build()                         # vtasim.sim.image.MemoryImage

One queue is one image is one device launch: ``synchronize()`` ends it with FINISH.  Like TVM's
runtime, every load, store and GEMM/ALU push ends by testing for a full instruction buffer (TVM's
``(count + 6) * 16 > VTA_MAX_XFER``, here ``count + 6 > max_insns``); when it is full, the queue
appends the closing drain without FINISH at once, as an in-stream barrier, and forgets uop
residency, where TVM would run the device and start again (``stats["flushes"]`` counts them).  The
dependence calls that follow the crossing call go after the barrier, as into TVM's next launch.

Modules: :mod:`.queue` (CommandQueue, DramBuffer; the differences from TVM are listed there),
:mod:`.kernel` (kernel recording and its rules), :mod:`.uop_ring` (uop SRAM residency and
eviction), :mod:`.stream` (pending pops, push merging, NOPs), :mod:`.errors`.
"""

from .errors import RuntimeContractError
from .kernel import MODE_ALU, MODE_GEMM, KernelRecorder, UopKernel
from .queue import CLOSING_HEADROOM, VTA_MAX_XFER, CommandQueue, DramBuffer
from .stream import STAGE_COMPUTE, STAGE_LOAD, STAGE_STORE

__all__ = ["CommandQueue", "DramBuffer", "RuntimeContractError", "KernelRecorder", "UopKernel",
           "MODE_GEMM", "MODE_ALU", "STAGE_LOAD", "STAGE_COMPUTE", "STAGE_STORE", "VTA_MAX_XFER",
           "CLOSING_HEADROOM"]
