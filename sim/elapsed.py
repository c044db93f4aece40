"""An elapsed-time line on stderr for a long step with no count to show (an RTL build)::

    >>> with Elapsed("vtasim: building the RTL with verilator", "into ~/.cache/vtasim/rtl"):   # doctest: +SKIP
    ...     compile_it()
    vtasim: building the RTL with verilator ... 37 s          (rewritten every second on a terminal)
    vtasim: building the RTL with verilator: done in 212 s into ~/.cache/vtasim/rtl

On a terminal the line is rewritten in place once a second; elsewhere (a log, a pipe) there is one
line when the step starts and one when it ends, nothing in between.
"""

from __future__ import annotations

import sys
import threading
import time

__all__ = ["Elapsed"]


class Elapsed:
    """Context manager: ``what ... N s`` while the block runs, then ``what: done in N s`` (or ``failed after``)."""

    def __init__(self, what: str, where: str = "", stream=None, interval: float = 1.0):
        self.what, self.where, self.interval = what, where, interval
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._thread = None
        self.t0 = 0.0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):          # stderr closed: the build itself must go on
            pass

    def tick(self) -> None:
        """Rewrite the terminal line with the time so far (the background thread calls it)."""
        if self.tty:
            self._write(f"\r{self.what} ... {time.monotonic() - self.t0:.0f} s")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def __enter__(self):
        self.t0 = time.monotonic()
        if self.tty:
            self.tick()
            self._thread = threading.Thread(target=self._run, name="vtasim-elapsed", daemon=True)
            self._thread.start()
        else:
            self._write(f"{self.what} {self.where} ...\n" if self.where else f"{self.what} ...\n")
        return self

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        took = time.monotonic() - self.t0
        state = "done in" if exc_type is None else "failed after"
        where = f" {self.where}" if self.where and exc_type is None else ""
        self._write(("\r" if self.tty else "") + f"{self.what}: {state} {took:.0f} s{where}\n")
        return False
