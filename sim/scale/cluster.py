"""A Dask client for vtasim's scale-out commands: a LocalCluster of ``workers`` worker processes (one
thread each) on this machine by default, or an existing scheduler used unchanged (``--scheduler
tcp://HOST:8786`` or ``--scheduler-file F``, as written by ``dask scheduler --scheduler-file F``,
dask-jobqueue or dask-kubernetes).

TLS: ``--tls-ca/--tls-cert/--tls-key`` build a :class:`distributed.security.Security` that requires
encryption (the client presents the cert/key, trusts the CA); without them Dask's own configuration
applies (``distributed.comm.tls.*`` in ``~/.config/dask/*.yaml`` or ``DASK_DISTRIBUTED__COMM__TLS__*``
variables), so a site's settings pass through unchanged.  A local cluster given TLS files runs its
scheduler and workers on ``tls://`` with the same files.  The three files are read (bounded, regular
files) and parsed with :mod:`ssl` before any cluster starts, so a garbage file is one line.

Connecting (:mod:`vtasim.sim.scale.handshake`): an existing scheduler must send Dask's handshake within
``--connect-timeout`` seconds (default :data:`CONNECT_TIMEOUT_S`); a silent or non-Dask peer (an HTTP
server, say) is one line naming the address and the rule, never a hang or a huge allocation.  A
scheduler file is read through :mod:`vtasim.hw.files` (at most :data:`MAX_SCHEDULER_FILE_BYTES`, strict JSON,
an object with a string ``address``).  ``--workers`` is at most :func:`max_workers` (4 per core this
process may use) unless ``--force-workers``.

::

    >>> from vtasim.sim.scale.cluster import dask_client
    >>> with dask_client(workers=2) as client:           # doctest: +SKIP
    ...     client.map(abs, [-1, -2]).result()
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
from contextlib import contextmanager
from pathlib import Path

from vtasim.hw.files import brief, load_json, read_regular
from vtasim.sim.install import require
from vtasim.sim.scale.errors import ClusterError, MissingExtra

__all__ = ["MissingExtra", "ClusterError", "import_distributed", "require_cluster", "security_from", "dask_client",
           "add_cluster_options", "client_from_args", "wants_cluster", "cluster_option", "Progress", "max_workers",
           "check_workers", "scheduler_address", "CONNECT_TIMEOUT_S", "WORKERS_PER_CORE",
           "MAX_SCHEDULER_FILE_BYTES", "MAX_PEM_BYTES", "cluster_opts"]

CONNECT_TIMEOUT_S = 5.0                 # --connect-timeout default: a scheduler's handshake comes at once
WORKERS_PER_CORE = 4                    # --workers bound without --force-workers
MAX_SCHEDULER_FILE_BYTES = 1 << 20      # Dask writes a few hundred bytes
MAX_PEM_BYTES = 1 << 20                 # a certificate chain or key is a few KiB


def require_cluster(what: str = "vtasim on Dask") -> None:
    """A one-line :class:`~vtasim.sim.install.MissingExtra` naming the extra of dask.distributed unless it is
    installed; ``what`` is the command and option that asked for Dask."""
    require(("dask", "distributed"), what)


def import_distributed(command: str = "vtasim"):
    """``distributed``, imported now (:func:`require_cluster` first: a missing extra is one line)."""
    require_cluster(f"{command} on Dask")
    import distributed
    return distributed


def security_from(tls_ca=None, tls_cert=None, tls_key=None):
    """A ``Security`` requiring encryption from the three TLS files, or None (Dask's config applies).

    All three or none: a one-line :class:`ClusterError` names what is missing or unreadable."""
    given = {"--tls-ca": tls_ca, "--tls-cert": tls_cert, "--tls-key": tls_key}
    if not any(given.values()):
        return None
    missing = [k for k, v in given.items() if not v]
    if missing:
        raise ClusterError(f"TLS needs --tls-ca, --tls-cert and --tls-key together; missing {', '.join(missing)}")
    _check_tls(tls_ca, tls_cert, tls_key)
    from distributed.security import Security
    ca, cert, key = (str(Path(v).resolve()) for v in (tls_ca, tls_cert, tls_key))
    return Security(require_encryption=True, tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key,
                    tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key)


def _no_password():
    return b""          # an encrypted key fails to load instead of prompting on the terminal


def _check_tls(ca, cert, key) -> None:
    """Each file a bounded regular PEM file that :mod:`ssl` loads: the CA and the certificate as
    certificates, the key as the certificate's private key."""
    texts = {}
    for opt, path in (("--tls-ca", ca), ("--tls-cert", cert), ("--tls-key", key)):
        data = read_regular(path, opt, MAX_PEM_BYTES, error=ClusterError)
        if b"-----BEGIN " not in data:
            raise ClusterError(f"{opt} {path}: not a PEM file (rule: TLS files are PEM text with "
                               f"-----BEGIN ...----- blocks)")
        texts[opt] = data.decode("ascii", errors="replace")
    for opt, path in (("--tls-ca", ca), ("--tls-cert", cert)):
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=texts[opt])
        except (ssl.SSLError, ValueError) as exc:
            raise ClusterError(f"{opt} {path}: not a PEM certificate ssl can load "
                               f"({getattr(exc, 'reason', None) or exc})") from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(str(cert), str(key), password=_no_password)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ClusterError(f"--tls-key {key}: not an unencrypted PEM private key of --tls-cert {cert} "
                           f"({getattr(exc, 'reason', None) or exc})") from None


def max_workers() -> int:
    """The ``--workers`` bound: :data:`WORKERS_PER_CORE` per core this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return WORKERS_PER_CORE * max(1, cores)


def check_workers(workers, force: bool = False) -> int:
    """``workers`` if it is an integer in 1 .. :func:`max_workers` (any positive one with ``force``)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ClusterError(f"--workers {workers!r} must be an integer of at least 1")
    if not force and workers > max_workers():
        raise ClusterError(f"--workers {workers} is more than {max_workers()} (rule: at most {WORKERS_PER_CORE} "
                           f"worker processes per core of this machine; --force-workers starts more)")
    return workers


def scheduler_address(scheduler_file) -> str:
    """The ``address`` of a Dask scheduler file, read through :mod:`vtasim.hw.files` (bounded, strict JSON)."""
    doc = load_json(scheduler_file, "--scheduler-file", MAX_SCHEDULER_FILE_BYTES,
                    limit="MAX_SCHEDULER_FILE_BYTES", error=ClusterError)
    addr = doc.get("address") if isinstance(doc, dict) else None
    if not isinstance(addr, str) or not addr or len(addr) > 1000:
        what = f"address = {brief(addr)}" if isinstance(doc, dict) else f"top level {type(doc).__name__}"
        raise ClusterError(f"--scheduler-file {scheduler_file}: {what} (rule: a JSON object with the scheduler's "
                           f"\"address\" string, as dask scheduler --scheduler-file F writes)")
    return addr


@contextmanager
def dask_client(workers: int = 2, scheduler: str | None = None, scheduler_file=None, processes: bool = True,
                security=None, log=print, what: str = "vtasim", worker_env: dict | None = None,
                connect_timeout: float = CONNECT_TIMEOUT_S, force_workers: bool = False):
    """Yield a ``distributed.Client``: on ``scheduler`` / ``scheduler_file`` if given, else on a new
    LocalCluster of ``workers`` processes (threads with ``processes=False``), closed on exit.

    ``worker_env``: environment variables set in local worker processes (e.g. a private RTL build cache).
    ``connect_timeout``: seconds an existing scheduler has to send its handshake; ``force_workers``: allow
    more than :func:`max_workers`."""
    from vtasim.sim.scale.handshake import check_timeout, probe
    distributed = import_distributed(what)
    if scheduler and scheduler_file:
        raise ClusterError("give --scheduler or --scheduler-file, not both")
    check_timeout(connect_timeout)
    if not (scheduler or scheduler_file):
        check_workers(workers, force_workers)
    cluster = None
    if scheduler or scheduler_file:
        if scheduler_file is not None:
            scheduler = scheduler_address(scheduler_file)
        where = scheduler if scheduler_file is None else f"{scheduler} (from --scheduler-file {scheduler_file})"
        probe(scheduler, connect_timeout, security, where)      # a silent or non-Dask peer: one line
        try:
            client = distributed.Client(scheduler, security=security, timeout=connect_timeout)
        except (OSError, TimeoutError, TypeError, ValueError) as exc:
            hint = (" (a tls:// scheduler needs --tls-ca/--tls-cert/--tls-key or Dask's distributed.comm.tls "
                    "config)") if "TLS" in str(exc) or "ssl" in str(exc).lower() else ""
            raise ClusterError(f"cannot connect to the Dask scheduler {where}: "
                               f"{(str(exc).splitlines() or [type(exc).__name__])[0]}{hint}") from None
        log(f"{what}: scheduler {client.scheduler.address}, {len(client.scheduler_info()['workers'])} workers")
    else:
        kw = {"security": security, "protocol": "tls://"} if security is not None else {}
        if worker_env and processes:
            kw["env"] = dict(worker_env)
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                           dashboard_address=None, silence_logs=logging.ERROR, **kw)
        client = distributed.Client(cluster, security=security)
        log(f"{what}: local cluster of {workers} worker {'processes' if processes else 'threads'}"
            + (" (TLS)" if security is not None else ""))
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def add_cluster_options(p, default_workers: int | None = 2) -> None:
    """``--workers N``, ``--scheduler ADDR`` | ``--scheduler-file F``, ``--tls-ca/--tls-cert/--tls-key``."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None,
                       help="address of a running Dask scheduler (tcp://HOST:8786 or tls://HOST:8786)")
    where.add_argument("--scheduler-file", type=Path, default=None,
                       help="a Dask scheduler file (dask scheduler --scheduler-file F, dask-jobqueue, ...)")
    p.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT_S, metavar="S",
                   help="seconds an existing scheduler has to answer")
    p.add_argument("--workers", type=int, default=default_workers,
                   help=f"worker processes of the local Dask cluster, at most {WORKERS_PER_CORE} per core" +
                        (f" (default {default_workers})" if default_workers else ""))
    p.add_argument("--force-workers", action="store_true",
                   help=f"allow --workers above {WORKERS_PER_CORE} per core")
    p.add_argument("--tls-ca", type=Path, default=None, help="CA certificate the scheduler's cert is checked against")
    p.add_argument("--tls-cert", type=Path, default=None, help="this client's TLS certificate")
    p.add_argument("--tls-key", type=Path, default=None, help="this client's TLS private key")


def cluster_option(args) -> str:
    """The option that asked for Dask, as typed (``--workers 2``, ``--scheduler ADDR``, ...), for messages."""
    if args.scheduler:
        return f"--scheduler {args.scheduler}"
    if args.scheduler_file:
        return f"--scheduler-file {args.scheduler_file}"
    return f"--workers {args.workers}"


def wants_cluster(args) -> bool:
    """Whether the command line asked for Dask (``--workers``, ``--scheduler`` or ``--scheduler-file``)."""
    return bool(args.scheduler or args.scheduler_file or args.workers is not None)


def client_from_args(args, log=print, what: str = "vtasim", processes: bool = True, worker_env=None):
    """:func:`dask_client` for the options of :func:`add_cluster_options` (a context manager)."""
    security = security_from(args.tls_ca, args.tls_cert, args.tls_key)
    return dask_client(workers=args.workers if args.workers is not None else 2, scheduler=args.scheduler,
                       scheduler_file=args.scheduler_file, processes=processes, security=security, log=log,
                       what=what, worker_env=worker_env, **cluster_opts(args))


def cluster_opts(args) -> dict:
    """The :func:`dask_client` keywords of ``--connect-timeout`` and ``--force-workers``."""
    return {"connect_timeout": args.connect_timeout, "force_workers": args.force_workers}


class Progress:
    """A one-line progress bar on a terminal (``\\r``-rewritten), nothing when the stream is not a tty."""

    def __init__(self, total: int, what: str, stream=None, width: int = 30):
        self.total, self.what, self.width = total, what, width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0

    def step(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if not self.tty:
            return
        filled = self.width * self.done // max(1, self.total)
        print(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {self.what} {note}"[:160],
              end="", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream, flush=True)
