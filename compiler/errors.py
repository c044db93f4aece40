"""Errors of the compiler: one class, a :class:`sim.errors.SimError`, so the CLI prints one line."""

from sim.errors import SimError

__all__ = ["CompileError"]


class CompileError(SimError):
    """A schedule, pass or workload the compiler cannot handle; the message names the pass, the
    buffer or loop, the value and the rule."""
