"""The one error class of the compiler passes and codegen.

A construct a pass cannot lower raises :class:`CompileError` with one line naming the pass, the
buffer or loop, and the rule it breaks, e.g.
``inject_dma: dma_copy of `data_buf`: stride of the inner loop is 3 elements, the pattern needs 1``.
It derives from :class:`vtasim.sim.errors.SimError`, so the CLI prints it as one line.
"""

from __future__ import annotations

from vtasim.sim.errors import SimError

__all__ = ["CompileError"]


class CompileError(SimError):
    """A schedule or IR construct the VTA lowering passes (compiler spec 4) cannot handle."""

    def __init__(self, pass_name: str, message: str | None = None):
        # CompileError("pass", "what and rule") from the passes; CompileError("whole message")
        # from the rest of the compiler (knobs, workloads, CLI)
        if message is None:
            pass_name, message = None, pass_name
        super().__init__(message if pass_name is None else f"{pass_name}: {message}")
        self.pass_name = pass_name
