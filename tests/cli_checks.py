"""Running ``vtasim`` in a subprocess and checking that it failed the way a user error must: exit 2,
exactly one stderr line starting ``vtasim: error:``, no traceback, no "internal error", naming what
the test expects (the value, the rule)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["vtasim", "one_line", "one_line_error", "ROOT"]


def vtasim(*args, timeout: float = 600, as_limit: int | None = None, cwd=None):
    """``python -m vtasim.sim.cli ARGS`` from the checkout root; ``timeout`` is a hang detector, ``as_limit``
    an address-space limit (bytes) on the child."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
    return subprocess.run([sys.executable, "-m", "vtasim.sim.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit if as_limit else None, cwd=cwd or ROOT)


def one_line(proc, *needles) -> str:
    """The one error line of a failed ``vtasim`` run, after checking it is the only stderr line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith("vtasim: error: ") and "internal error" not in lines[0], lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def one_line_error(rc: int, err: str, *fragments, out: str = "") -> None:
    """Exit 2 and exactly one non-empty stderr line, no traceback, holding every fragment (for tests
    that ran the command themselves and hold its return code and streams)."""
    assert rc == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], lines[0]
