"""Errors raised by the simulators.  The CLI prints the first line of ``str(error)`` and exits 2.

Every user-facing error is a :class:`SimError`.  Errors with more to say than one line carry it in
``report`` (printed by ``vtasim -v``): a deadlock's per-module state, the tail of a tool's log.
The RTL engine adds two families: :class:`RtlStopped` (the design signalled an error or its watchdog
fired; the exception holds what retired before, so ``vtasim diff`` can still name the first
divergence) and :class:`ToolError` (an HDL tool is missing, failed to build, or crashed).
"""

__all__ = ["SimError", "ImageError", "ProgramError", "DeadlockError", "TokenOverflowError", "RunError",
           "RtlStopped", "RtlTokenOverflow", "RtlWatchdog", "RtlIllegalInstruction", "RtlRunError",
           "ToolError", "BuildError", "SimulatorError"]


class SimError(ValueError):
    """Base of every user-facing simulation error."""


class ImageError(SimError):
    """A memory image is malformed or hostile (paths, sizes, overlaps)."""


class ProgramError(SimError):
    """An instruction or uop breaks a rule.  The message names the instruction index, field and limit."""

    def __init__(self, message, index=None, field=None):
        super().__init__(message)
        self.index = index
        self.field = field


class TokenOverflowError(ProgramError):
    """A push would take a dependency token queue above its capacity."""


class DeadlockError(SimError):
    """No module can make progress and FINISH has not retired.  ``report`` is the multi-line report."""

    def __init__(self, summary, report=""):
        super().__init__(summary)
        self.report = report


class RunError(SimError):
    """The run ended in a state the contract forbids (e.g. FINISH with instructions left)."""


class RtlStopped(SimError):
    """The RTL stopped before FINISH retired.

    ``records``: the :class:`~vtasim.sim.result.RetireRecord` list retired before the stop; ``dispatch_cycle``:
    int64 array per program index (-1 = never dispatched); ``stop_cycle``: the cycle it stopped at."""

    def __init__(self, message, records=(), dispatch_cycle=None, stop_cycle=None):
        super().__init__(message)
        self.records = list(records)
        self.dispatch_cycle = dispatch_cycle
        self.stop_cycle = stop_cycle


class RtlTokenOverflow(RtlStopped, TokenOverflowError):
    """The RTL flagged a push above TOKEN_QUEUE_DEPTH."""


class RtlWatchdog(RtlStopped, RunError):
    """No FINISH within the watchdog's cycle budget (a deadlock, or a budget too small)."""


class RtlIllegalInstruction(RtlStopped, ProgramError):
    """The RTL met an instruction it cannot decode."""


class RtlRunError(RtlStopped, RunError):
    """Any other error code of the RTL (e.g. FINISH while another instruction ran)."""


class ToolError(SimError):
    """An HDL tool the RTL engine needs is missing, too old, failed or crashed.

    The message is one line naming the tool and what to install, or where the log is; ``report``
    holds the log's last lines."""

    def __init__(self, message, report=""):
        super().__init__(message)
        self.report = report


class BuildError(ToolError):
    """The HDL did not compile (or the simulator's build step failed)."""


class SimulatorError(ToolError):
    """The simulator process crashed or exited before every job of a batch finished."""
