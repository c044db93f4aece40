"""Writing the files vtasim produces: the one helper every writer goes through.

The rule (every command that writes: ``compile --out``, ``--dump-ir``, ``onnx --report/--save-images``,
``sweep``, ``dse``, ``fuzz``, ``waves``, ``run --out/--trace/--perfetto``, ``unit``/``workload``/
``randprog``/``import-tvm``, ``demo``):

* an output directory is created when missing (with its parents); when it exists it must be a real
  directory - a symbolic link, a regular file or a device there is refused;
* inside it, nothing is written through a link: each file is opened with ``O_NOFOLLOW`` (and
  non-blocking, so a FIFO cannot hang the open), a sub-directory vtasim makes must be a real
  directory, and an existing entry where vtasim writes must be a regular file, which is overwritten;
  a link, directory, FIFO, device or socket there is refused with one line naming it.
* the directories above the one asked for are the user's (a home directory may well be a link) and
  are used as they are.

Errors are :class:`OutputError`, an ``OSError`` (the CLI prints its one line and exits 2).
``hw`` is the lowest layer, so ``sim``, ``waveforms`` and ``compiler`` all use this.

::

    >>> d = out_dir("runs/x", "--out directory")            # doctest: +SKIP
    >>> write_text(d / "image.json", "{}\\n", "image file")  # doctest: +SKIP
    >>> with open_out(d / "plot.png", "wb") as f:            # doctest: +SKIP
    ...     fig.savefig(f, format="png")
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

__all__ = ["OutputError", "RULE", "out_dir", "sub_dir", "check_out", "open_out", "write_bytes", "write_text"]

RULE = ("rule: vtasim writes only into real directories and overwrites only regular files, "
        "never through a symbolic link")

_KINDS = ((stat.S_ISLNK, "symbolic link"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
          (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"),
          (stat.S_ISREG, "regular file"))

_MODES = {"wb": os.O_WRONLY | os.O_CREAT, "w": os.O_WRONLY | os.O_CREAT,
          "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "r+b": os.O_RDWR}


class OutputError(OSError):
    """An output path vtasim refuses to write (a link, a non-regular file, not a directory)."""

    def __init__(self, message: str):
        super().__init__(message)

    def __str__(self) -> str:
        return self.args[0]


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "special file")


def _lstat(path: Path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:     # ValueError: a NUL byte in the name
        raise OutputError(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None


def out_dir(path, what: str = "output directory") -> Path:
    """``path`` as a real directory, created (with its parents) when missing; see the module rule."""
    d = Path(path)
    st = _lstat(d)
    if st is None:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise OutputError(f"cannot create {what} {d}: {getattr(exc, 'strerror', None) or exc}") from None
        st = _lstat(d)
    if st is None or not stat.S_ISDIR(st.st_mode):
        kind = "missing" if st is None else f"a {_kind(st.st_mode)}"
        raise OutputError(f"{what} {d} is {kind}, not a directory ({RULE})")
    return d


def sub_dir(parent, name: str, what: str = "output directory") -> Path:
    """``parent / name`` (one component) as a real directory inside the real directory ``parent`` (both
    checked, both created when missing); see :func:`out_dir`."""
    if not name or "/" in name or name in (".", "..") or (os.sep != "/" and os.sep in name):
        raise OutputError(f"{what} name {name!r} is not one path component (rule: outputs stay inside "
                          f"{parent})")
    return out_dir(out_dir(parent, "output directory") / name, what)


def check_out(path, what: str = "output file", *, make_parent: bool = True) -> Path:
    """Check, without creating it, that ``path`` may be written under the module rule (its directory a
    real one, created when missing with ``make_parent``; the file absent or a regular file)."""
    p = Path(path)
    if make_parent:
        out_dir(p.parent, "directory of " + what)
    st = _lstat(p)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{what} {p} is a {_kind(st.st_mode)}, not a regular file ({RULE})")
    return p


def open_out(path, mode: str = "wb", what: str = "output file", *, encoding: str | None = None,
             newline: str | None = None, make_parent: bool = True):
    """Open ``path`` for writing under the module rule; a file object (``mode``: w, wb, a, ab, r+b).

    ``w``/``wb`` truncate an existing regular file; ``a``/``ab`` append; ``r+b`` opens an existing one."""
    p = Path(path)
    if mode not in _MODES:
        raise ValueError(f"open_out mode {mode!r}: one of {sorted(_MODES)}")
    check_out(p, what, make_parent=make_parent)
    flags = _MODES[mode] | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise OutputError(f"{what} {p} is a symbolic link, not a regular file ({RULE})") from None
        raise OutputError(f"cannot write {what} {p}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{what} {p} is a {_kind(st.st_mode)}, not a regular file ({RULE})")
        if mode in ("w", "wb"):
            os.ftruncate(fd, 0)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding=encoding or "utf-8", newline=newline)


def write_bytes(path, data, what: str = "output file") -> Path:
    """Write ``data`` to ``path`` under the module rule."""
    with open_out(path, "wb", what) as f:
        f.write(data)
    return Path(path)


def write_text(path, text: str, what: str = "output file") -> Path:
    """Write ``text`` (UTF-8) to ``path`` under the module rule."""
    with open_out(path, "w", what) as f:
        f.write(text)
    return Path(path)
