"""Errors raised by the simulators.  The CLI prints ``str(error)`` as one line and exits 2."""

__all__ = ["SimError", "ImageError", "ProgramError", "DeadlockError", "TokenOverflowError", "RunError"]


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
