"""Reading the files a user hands vtasim: the one helper every reader goes through.

Every file the tool reads (a config, ``image.json`` and its segments, TVM buffers and dumps, a knob
file) is checked *before* it is read: it must be a regular file (a FIFO would block the read
forever, ``/dev/zero`` never ends) no larger than a bound the caller names.  The check is made on
``stat`` first (so a device is never even opened) and again on the opened descriptor (opened
non-blocking, so a file swapped for a FIFO in between cannot hang the read either).

JSON is parsed strictly: a key given twice in one object, nesting deeper than Python's recursion
limit, integers longer than Python's conversion limit (4300 digits) and the non-JSON constants NaN and
Infinity are each refused with one line naming the file and the rule, instead of a silent "last key
wins", a NaN that compares false with everything, or a traceback.

Line-oriented files are read in chunks, never whole (:func:`iter_lines`: bounded line length, UTF-8,
no NUL), as JSON lines (:func:`iter_json_lines`) or CSV with a fixed header (:func:`iter_csv`: one field
per column, bounded fields).  An ``.npy`` array (:func:`load_npy`) has its header read and its shape x
itemsize checked against the bound before its data is read.

Each function raises ``error`` (the caller's own exception class: ConfigError, ImageError, ...)
with a one-line message.  ``hw`` is the lowest layer, so ``sim`` and ``compiler`` use this too.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

__all__ = ["regular_size", "open_regular", "read_regular", "iter_lines", "iter_json_lines", "iter_csv",
           "parse_json", "load_json", "load_npy", "load_npz", "brief"]

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


def open_regular(path, what: str, max_bytes: int, *, limit: str | None = None, error=ValueError,
                 follow_symlinks: bool = True, shown: str | None = None):
    """``(file, size)``: ``path`` opened for binary reading after :func:`regular_size`'s checks, made
    again on the opened descriptor (opened non-blocking: a file swapped for a FIFO cannot hang)."""
    shown = str(path) if shown is None else shown
    regular_size(path, what, max_bytes, limit=limit, error=error, follow_symlinks=follow_symlinks, shown=shown)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"cannot read {what} {shown}: {exc.strerror}") from None
    f = os.fdopen(fd, "rb")
    try:
        size = _check_stat(os.fstat(fd), shown, what, max_bytes, _bound(max_bytes, limit), error, follow_symlinks)
    except BaseException:
        f.close()
        raise
    return f, size


def read_regular(path, what: str, max_bytes: int, *, limit: str | None = None, error=ValueError,
                 follow_symlinks: bool = True, shown: str | None = None) -> bytes:
    """The bytes of ``path`` after :func:`regular_size`'s checks, made again on the opened file."""
    shown = str(path) if shown is None else shown
    f, size = open_regular(path, what, max_bytes, limit=limit, error=error, follow_symlinks=follow_symlinks,
                           shown=shown)
    with f:
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


def iter_lines(path, what: str, max_bytes: int, *, max_line: int = 1 << 16, limit: str | None = None,
               error=ValueError):
    """Yield ``(number, text, complete)`` for each line of ``path`` (1-based number, the text without its
    newline, ``complete`` False only for a last line without one), read in chunks: memory is bounded by
    ``max_line``, never by the file.  The file is checked as by :func:`read_regular`; a line longer than
    ``max_line`` bytes, bytes that are not UTF-8 or a NUL byte are each one ``error`` naming the line."""
    shown = str(path)
    f, size = open_regular(path, what, max_bytes, limit=limit, error=error, shown=shown)
    number, got, pending = 0, 0, b""
    with f:
        while True:
            chunk = f.read(1 << 20)
            got += len(chunk)
            if got > max_bytes:
                raise error(f"{what} {shown} grew while being read (was {size} bytes; more than "
                            f"{_bound(max_bytes, limit)})")
            if not chunk:
                if pending:
                    yield number + 1, _line_text(pending, shown, what, number + 1, max_line, error), False
                return
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for raw in lines:
                number += 1
                yield number, _line_text(raw, shown, what, number, max_line, error), True
            if len(pending) > max_line:
                raise error(f"{what} {shown}: line {number + 1} is longer than {max_line} bytes "
                            f"(rule: at most {max_line} bytes a line)")


def _line_text(raw: bytes, shown: str, what: str, number: int, max_line: int, error) -> str:
    if len(raw) > max_line:
        raise error(f"{what} {shown}: line {number} has {len(raw)} bytes (rule: at most {max_line} bytes a line)")
    if b"\0" in raw:
        raise error(f"{what} {shown}: line {number} holds a NUL byte at column {raw.index(0) + 1} "
                    f"(rule: text files hold no NUL)")
    try:
        return raw.decode("utf-8").removesuffix("\r")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {shown}: line {number}: byte {exc.start + 1} is not UTF-8 text "
                    f"(rule: text files are UTF-8)") from None


def iter_json_lines(path, what: str, max_bytes: int, *, max_line: int = 1 << 16, limit: str | None = None,
                    error=ValueError):
    """Yield ``(number, value)`` for each non-blank line of a JSON-lines file, each parsed by
    :func:`parse_json` (strict); a torn last line (no newline) is parsed like the others."""
    for number, text, _ in iter_lines(path, what, max_bytes, max_line=max_line, limit=limit, error=error):
        if text.strip():
            yield number, parse_json(text, f"{what} {path}: line {number} is not JSON", error)


def iter_csv(path, what: str, max_bytes: int, header: list, *, max_field: int = 1 << 16,
             max_line: int = 1 << 20, limit: str | None = None, error=ValueError, skip_torn: bool = True):
    """Yield ``(line, row)`` for each row of a CSV file whose first row must be ``header`` exactly; each
    row is a dict of ``len(header)`` strings.  Strict: a row with another number of fields, a field
    longer than ``max_field`` characters, bad quoting, bytes that are not UTF-8 are each one ``error``
    naming the line.  With ``skip_torn`` a last line without its newline (a row being written when its
    writer died) is dropped."""
    import csv

    shown = str(path)
    state = {"line": 0}

    def lines():
        for number, text, complete in iter_lines(path, what, max_bytes, max_line=max_line, limit=limit,
                                                 error=error):
            state["line"] = number
            if not complete and skip_torn:
                return
            yield text + "\n"

    reader = csv.reader(lines(), strict=True)
    try:
        first = next(reader, None)
        if first is None:
            return
        if first != list(header):
            raise error(f"{what} {shown}: line 1 is not the expected header ({len(header)} columns "
                        f"{','.join(header[:3])},...) (rule: a {what} starts with its header; use another file)")
        for row in reader:
            if len(row) != len(header):
                raise error(f"{what} {shown}: line {state['line']} has {len(row)} fields, the header "
                            f"{len(header)} (rule: every row has one field per column)")
            for name, value in zip(header, row):
                if len(value) > max_field:
                    raise error(f"{what} {shown}: line {state['line']}: field {name} has {len(value)} "
                                f"characters (rule: at most {max_field})")
            yield state["line"], dict(zip(header, row))
    except csv.Error as exc:
        why = (f"a field of more than {csv.field_size_limit()} characters" if "field limit" in str(exc)
               else str(exc))
        raise error(f"{what} {shown}: line {state['line']} is not valid CSV: {why} "
                    f"(rule: fields of at most {max_field} characters, quotes balanced)") from None


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


class _NotJson(Exception):
    pass


def _no_constants(name):
    raise _NotJson(name)


def parse_json(data, shown: str, error=ValueError):
    """Parse JSON text or UTF-8 bytes strictly (see the module docstring); ``shown`` names the source."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{shown}: not valid JSON: byte {exc.start} is not UTF-8 text") from None
    try:
        return json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _NotJson as exc:
        raise error(f"{shown}: not valid JSON: {exc.args[0]} is not a JSON number "
                    f"(rule: numbers are finite; NaN and Infinity are Python extensions)") from None
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


def _npy_header(f, shown: str, what: str, max_bytes: int, limit, error):
    """``(shape, fortran, dtype, data bytes)`` of the ``.npy`` stream ``f``, read up to its data: a
    numeric dtype (no objects, no pickle) and ``shape`` x itemsize within ``max_bytes``."""
    from numpy.lib import format as npformat
    try:
        version = npformat.read_magic(f)
        reader = {(1, 0): npformat.read_array_header_1_0, (2, 0): npformat.read_array_header_2_0}.get(version)
        if reader is None:
            raise ValueError(f"format version {version}")
        shape, fortran, dtype = reader(f)
    except (ValueError, OSError, SyntaxError) as exc:
        raise error(f"{what} {shown}: not an .npy array: {str(exc).splitlines()[0][:200]} "
                    f"(rule: numpy's .npy format 1.0 or 2.0)") from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise error(f"{what} {shown}: dtype {dtype} is not a plain number type (rule: bool, int, uint or "
                    f"float; no objects, no pickle)")
    count = 1
    for n in shape:
        count *= n
    need = count * dtype.itemsize
    if need > max_bytes:
        raise error(f"{what} {shown}: header declares shape {brief(tuple(shape))} of {dtype} = {need} bytes, "
                    f"more than {_bound(max_bytes, limit)}")
    return shape, fortran, dtype, need


def load_npy(path, what: str, max_bytes: int, *, limit: str | None = None, error=ValueError):
    """The array of an ``.npy`` file, its header checked before any data is read: a numeric dtype (no
    objects, no pickle), and ``shape`` x itemsize within ``max_bytes`` and equal to the bytes the file
    holds after its header (a header declaring petabytes is refused without allocating)."""
    import numpy as np

    shown = str(path)
    f, size = open_regular(path, what, max_bytes + 65536, limit=limit, error=error, shown=shown)
    with f:
        shape, fortran, dtype, need = _npy_header(f, shown, what, max_bytes, limit, error)
        start = f.tell()
        if size - start != need:
            raise error(f"{what} {shown}: header declares {need} bytes of data, the file holds {size - start} "
                        f"(rule: data size = shape x itemsize)")
        data = f.read(need + 1)
    if len(data) != need:
        raise error(f"{what} {shown}: changed while being read (rule: a file is not written while vtasim reads it)")
    arr = np.frombuffer(data, dtype=dtype)
    return arr.reshape(shape, order="F" if fortran else "C")


def load_npz(path, what: str, max_bytes: int, *, max_arrays: int = 100_000, limit: str | None = None,
             error=ValueError, follow_symlinks: bool = True) -> dict:
    """``{name: array}`` of an ``.npz`` archive (what ``numpy.savez`` writes), never with pickle: a
    regular file of at most ``max_bytes``, at most ``max_arrays`` members, each ``NAME.npy`` with the
    checks of :func:`load_npy`, and the arrays' declared sizes together within ``max_bytes`` (a
    compressed member declaring gigabytes is refused before it is inflated)."""
    import io
    import zipfile

    import numpy as np

    shown = str(path)
    raw = read_regular(path, what, max_bytes, limit=limit, error=error, follow_symlinks=follow_symlinks)
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise error(f"{what} {shown}: not an .npz archive ({exc}) (rule: the zip file numpy.savez writes)") from None
    if len(infos) > max_arrays:
        raise error(f"{what} {shown}: {len(infos)} members, more than {max_arrays}")
    out, total = {}, 0
    with zf:
        for info in infos:
            name = info.filename
            if not name.endswith(".npy") or "/" in name or name[:-4] in out:
                raise error(f"{what} {shown}: member {brief(name)} is not one NAME.npy array "
                            f"(rule: an .npz of distinct arrays, no folders)")
            member = f"{shown}[{name[:-4]}]"
            if info.file_size > max_bytes + 65536:
                raise error(f"{what} {member}: declares {info.file_size} bytes, more than {_bound(max_bytes, limit)}")
            try:
                with zf.open(info) as f:
                    shape, fortran, dtype, need = _npy_header(f, member, what, max_bytes, limit, error)
                    total += need
                    if total > max_bytes:
                        raise error(f"{what} {shown}: its arrays hold more than {_bound(max_bytes, limit)}")
                    data = f.read(need + 1)
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
                raise error(f"{what} {member}: cannot be read ({exc})") from None
            if len(data) != need:
                raise error(f"{what} {member}: header declares {need} bytes of data, the member holds {len(data)} "
                            f"(rule: data size = shape x itemsize)")
            out[name[:-4]] = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return out
