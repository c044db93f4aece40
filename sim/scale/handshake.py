"""Is there a Dask scheduler at this address?  A bounded look before ``distributed.Client`` connects.

A Dask scheduler writes its handshake as soon as it accepts a connection: one message framed as
``uint64 total`` then ``uint64 nframes``, ``nframes`` ``uint64`` lengths and the frames (little-endian,
as :mod:`distributed.comm.tcp` writes them).  :func:`probe` opens a connection (TLS for ``tls://``),
reads that message within the timeout and checks the framing, so:

* a peer that accepts and never answers is "no handshake within S s", not a hang;
* a peer speaking another protocol (an HTTP server's ``HTTP/1.1 ...`` read as a length is 3 EiB) is
  "not a Dask scheduler", not an allocation of its first 8 bytes.

Only ``tcp://`` and ``tls://`` (and bare ``HOST:PORT``) are probed; other Dask comms (``inproc``,
``ws``, ``ucx``) are left to ``distributed.Client``'s own ``timeout``.
"""

from __future__ import annotations

import math
import socket
import struct
import time

from vtasim.hw.files import brief
from vtasim.sim.scale.errors import ClusterError

__all__ = ["probe", "check_timeout", "MAX_HANDSHAKE_BYTES", "MAX_CONNECT_TIMEOUT_S"]

MAX_HANDSHAKE_BYTES = 1 << 16       # Dask's handshake is ~100 bytes of msgpack
MAX_CONNECT_TIMEOUT_S = 3600.0
_RULE = "rule: a Dask scheduler sends its handshake, a length-prefixed frame, as soon as it accepts"


def check_timeout(seconds) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or not 0 < seconds <= MAX_CONNECT_TIMEOUT_S:
        raise ClusterError(f"--connect-timeout {seconds!r} must be a number of seconds in (0, {MAX_CONNECT_TIMEOUT_S:g}]")
    return float(seconds)


def _host_port(address: str, shown: str):
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls"):
        return scheme, None, None
    host, colon, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"--scheduler {shown}: not HOST:PORT (rule: tcp://HOST:PORT or tls://HOST:PORT, "
                     f"port 1..65535)")
    return scheme, host, int(port)


def _recv(sock, n: int, deadline: float, shown: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout
        sock.settimeout(left)
        part = sock.recv(min(n - len(buf), 1 << 16))
        if not part:
            said = f"; it sent {brief(bytes(buf))}" if buf else ""
            raise ClusterError(f"cannot connect to the Dask scheduler {shown}: it closed the connection before "
                         f"its handshake{said} ({_RULE})")
        buf += part
    return bytes(buf)


def _check_length(head: bytes, shown: str) -> int:
    (total,) = struct.unpack("<Q", head)
    if head.startswith(b"HTTP") or not 16 <= total <= MAX_HANDSHAKE_BYTES:
        raise ClusterError(f"{shown} is not a Dask scheduler: its first bytes {brief(head)} are no handshake "
                     f"({_RULE}; at most {MAX_HANDSHAKE_BYTES} bytes)")
    return total


def _check_frames(total: int, body: bytes, shown: str) -> None:
    (nframes,) = struct.unpack_from("<Q", body)
    if not 1 <= nframes <= 64 or 8 * (nframes + 1) > total:
        raise ClusterError(f"{shown} is not a Dask scheduler: its handshake declares {nframes} frames ({_RULE})")
    lengths = struct.unpack_from(f"<{nframes}Q", body, 8)
    if 8 * (nframes + 1) + sum(lengths) != total:
        raise ClusterError(f"{shown} is not a Dask scheduler: its handshake frames do not add up ({_RULE})")


def probe(address: str, timeout: float, security=None, shown: str | None = None) -> None:
    """Raise a one-line ``ClusterError`` unless ``address`` sends a Dask handshake within ``timeout`` s."""
    shown = shown or address
    scheme, host, port = _host_port(address, shown)
    if host is None:
        return
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        raise ClusterError(f"cannot connect to the Dask scheduler {shown}: no TCP connection within {timeout:g} s "
                     f"(--connect-timeout S waits longer)") from None
    except OSError as exc:
        raise ClusterError(f"cannot connect to the Dask scheduler {shown}: {exc.strerror or exc}") from None
    try:
        if scheme == "tls":
            sock = _tls(sock, security, shown, deadline)
        total = _check_length(_recv(sock, 8, deadline, shown), shown)
        _check_frames(total, _recv(sock, total, deadline, shown), shown)
    except socket.timeout:
        raise ClusterError(f"cannot connect to the Dask scheduler {shown}: no handshake within {timeout:g} s "
                     f"({_RULE}; --connect-timeout S waits longer)") from None
    except OSError as exc:
        raise ClusterError(f"cannot connect to the Dask scheduler {shown}: "
                     f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None
    finally:
        sock.close()


def _tls(sock, security, shown: str, deadline: float):
    from distributed.security import Security
    ctx = (security or Security()).get_connection_args("client").get("ssl_context")
    if ctx is None:
        sock.close()
        raise ClusterError(f"cannot connect to the Dask scheduler {shown}: a tls:// scheduler needs --tls-ca/--tls-cert/"
                     f"--tls-key or Dask's distributed.comm.tls config")
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    return ctx.wrap_socket(sock, server_hostname=None)
