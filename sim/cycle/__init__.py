"""Cycle-accurate engine: the timing contract of ``docs/timing.md`` in one compiled event loop.

    >>> from vtasim.sim.engines import run_engine
    >>> result = run_engine("cycle", image, trace="run.csv", perfetto="run.json")
    >>> result.cycles, result.breakdown["compute"]["busy"]

``run_image(image, progress=None, gemm="auto") -> RunResult`` (its options :data:`OPTIONS`, checked by
:func:`vtasim.sim.engines.run_engine`) with:

* ``dram``, ``counters`` (fsim names), ``outputs``, ``leftover_tokens`` as every engine;
* ``cycles`` = end cycle of FINISH + 1;
* ``trace``: a sequence of :class:`vtasim.sim.result.RetireRecord` in the order of docs/timing.md section 9
  (records are made when read, not kept as objects; ``list(result.trace)`` gives a list);
* ``breakdown``: ``{"fetch"|"load"|"compute"|"store": {"busy", "mem_wait", "token_wait",
  "queue_stall", "idle"}}`` (each module's buckets sum to ``cycles``);
* ``wall_s``: simulation wall time, JIT compilation excluded (the core is warmed up once per process);
* ``dispatch_cycle``: int64 array indexed by program index, the cycle each instruction was
  dispatched to its command queue (docs/timing.md 3);
* ``fetch_chunks``: a sequence of ``(first_request_cycle, complete_cycle)``, one per fetch chunk
  (the cycle the chunk's first burst request was issued, the cycle its last burst completed);
* ``cycles_per_s``: simulated cycles per second of ``wall_s``; ``cpu_s``: the process CPU time of
  the same span (on a shared machine the steadier figure).

``run_images(images, workers=None, progress=None, gemm="auto")`` runs several images in threads (the compiled core
releases the GIL: two cores run two images at once) and returns their results in order.

``gemm``: "auto" (default) takes the exact float32 GEMM fast path of :mod:`vtasim.sim.cycle.gemm_fast` where
the config's widths prove it exact; "int" forces the integer kernel (same bytes, records and cycles).

``run_engine``'s ``trace`` / ``perfetto`` name files to write (CSV of retire records; Chrome
trace-event JSON that opens in Perfetto; :func:`vtasim.sim.trace.write_run`).  ``progress``: None = a progress line on stderr for runs longer than two seconds
when stderr is a terminal; True = also when it is not; False = never.

Errors: :class:`vtasim.sim.errors.ProgramError` (index out of range, with instruction index, field, value
and limit), :class:`~vtasim.sim.errors.TokenOverflowError`, :class:`~vtasim.sim.errors.RunError` (FINISH ended
with work left), :class:`~vtasim.sim.errors.DeadlockError` (``.report`` holds the multi-line report).
"""

from vtasim.sim.cycle.engine import BATCH_OPTIONS, OPTIONS, TIMED, CycleMachine, run_image, run_images

__all__ = ["run_image", "run_images", "CycleMachine", "TIMED", "OPTIONS", "BATCH_OPTIONS"]
