"""Reading the files a user hands vtasim: the one helper every reader goes through.

Every file the tool reads (a config, ``image.json`` and its segments, TVM buffers and dumps, a knob
file) is checked *before* it is read: it must be a regular file (a FIFO would block the read
forever, ``/dev/zero`` never ends) no larger than a bound the caller names.  The check is made on
``stat`` first (so a device is never even opened) and again on the opened descriptor (opened
non-blocking, so a file swapped for a FIFO in between cannot hang the read either).

JSON is parsed strictly: a key given twice in one object, nesting deeper than Python's recursion
limit and integers longer than Python's conversion limit (4300 digits) are each refused with one
line naming the file and the rule, instead of a silent "last key wins" or a traceback.

Each function raises ``error`` (the caller's own exception class: ConfigError, ImageError, ...)
with a one-line message.  ``hw`` is the lowest layer, so ``sim`` and ``compiler`` use this too.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

__all__ = ["regular_size", "read_regular", "parse_json", "load_json", "brief"]

_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symbolic link"))


def brief(value, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters (a hostile value may be megabytes long, and an
    int of more than 4300 digits has no repr at all)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, (list, dict)) and len(value) > 8:
        return f"<a JSON {'array' if isinstance(value, list) else 'object'} of {len(value)} items>"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"<a {type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _bound(max_bytes: int, limit: str | None) -> str:
    return f"{limit} = {max_bytes}" if limit else f"the {max_bytes} bytes allowed"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "special file")


def _check_stat(st, shown: str, what: str, max_bytes: int, limit: str, error, follow: bool) -> int:
    if not stat.S_ISREG(st.st_mode):
        links = "" if follow else ", no links"
        raise error(f"{what} {shown} is a {_kind(st.st_mode)}, not a regular file "
                    f"(rule: vtasim reads only regular files{links})")
    if st.st_size > max_bytes:
        raise error(f"{what} {shown} has {st.st_size} bytes, more than {limit}")
    return st.st_size


def regular_size(path, what: str, max_bytes: int, *, limit: str | None = None, error=ValueError,
                 follow_symlinks: bool = True, shown: str | None = None) -> int:
    """The size of ``path`` if it is a regular file of at most ``max_bytes``, else ``error``.

    ``what`` names the file's role ("config", "--dram file", "segments[0]"), ``shown`` how the file is
    named (default ``str(path)``), ``limit`` the bound's name in the message.  ``follow_symlinks=False``
    refuses a symlink itself (the image loader's rule)."""
    shown = str(path) if shown is None else shown
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except (OSError, ValueError) as exc:        # ValueError: a NUL byte in the name
        raise error(f"cannot read {what} {shown}: cannot stat it: {getattr(exc, 'strerror', None) or exc}") from None
    return _check_stat(st, shown, what, max_bytes, _bound(max_bytes, limit), error, follow_symlinks)


def read_regular(path, what: str, max_bytes: int, *, limit: str | None = None, error=ValueError,
                 follow_symlinks: bool = True, shown: str | None = None) -> bytes:
    """The bytes of ``path`` after :func:`regular_size`'s checks, made again on the opened file."""
    shown = str(path) if shown is None else shown
    regular_size(path, what, max_bytes, limit=limit, error=error, follow_symlinks=follow_symlinks, shown=shown)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"cannot read {what} {shown}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        size = _check_stat(os.fstat(fd), shown, what, max_bytes, _bound(max_bytes, limit), error, follow_symlinks)
        # read what fstat reports (+1 to see growth), never a max_bytes buffer up front: f.read(n)
        # allocates n bytes before it reads.  A file that grew (or a /proc file, size 0) is read on in
        # chunks up to the bound.
        parts = [f.read(size + 1)]
        got = len(parts[0])
        while parts[-1] and got <= max_bytes and got > size:
            parts.append(f.read(min(1 << 20, max_bytes + 1 - got)))
            got += len(parts[-1])
        data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > max_bytes:
        raise error(f"{what} {shown} grew while being read (was {size} bytes; more than {_bound(max_bytes, limit)})")
    return data


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def parse_json(data, shown: str, error=ValueError):
    """Parse JSON text or UTF-8 bytes strictly (see the module docstring); ``shown`` names the source."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{shown}: not valid JSON: byte {exc.start} is not UTF-8 text") from None
    try:
        return json.loads(data, object_pairs_hook=_no_duplicates)
    except _Duplicate as exc:
        raise error(f"{shown}: duplicate key {brief(exc.args[0])} in one JSON object "
                    f"(rule: each key at most once; JSON parsers disagree on which copy wins)") from None
    except json.JSONDecodeError as exc:
        raise error(f"{shown}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise error(f"{shown}: not valid JSON for vtasim: nested deeper than Python's recursion limit "
                    f"({sys.getrecursionlimit()}) (rule: a few levels of objects and arrays)") from None
    except ValueError as exc:                   # int("9" * 5000): Python's integer conversion limit
        digits = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
        raise error(f"{shown}: not valid JSON for vtasim: an integer of more than {digits} digits "
                    f"(rule: integers have at most {digits} digits; no vtasim value needs more than 20)"
                    if "digits" in str(exc) else f"{shown}: not valid JSON: {exc}") from None


def load_json(path, what: str, max_bytes: int, *, limit: str | None = None, error=ValueError,
              follow_symlinks: bool = True):
    """:func:`read_regular` then :func:`parse_json`."""
    data = read_regular(path, what, max_bytes, limit=limit, error=error, follow_symlinks=follow_symlinks)
    return parse_json(data, str(Path(path)), error)
