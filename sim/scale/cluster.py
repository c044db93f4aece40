"""A Dask client for vtasim's scale-out commands: a LocalCluster of ``workers`` worker processes (one
thread each) on this machine by default, or an existing scheduler used unchanged (``--scheduler
tcp://HOST:8786`` or ``--scheduler-file F``, as written by ``dask scheduler --scheduler-file F``,
dask-jobqueue or dask-kubernetes).

TLS: ``--tls-ca/--tls-cert/--tls-key`` build a :class:`distributed.security.Security` that requires
encryption (the client presents the cert/key, trusts the CA); without them Dask's own configuration
applies (``distributed.comm.tls.*`` in ``~/.config/dask/*.yaml`` or ``DASK_DISTRIBUTED__COMM__TLS__*``
variables), so a site's settings pass through unchanged.  A local cluster given TLS files runs its
scheduler and workers on ``tls://`` with the same files.

::

    >>> from sim.scale.cluster import dask_client
    >>> with dask_client(workers=2) as client:           # doctest: +SKIP
    ...     client.map(abs, [-1, -2]).result()
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from sim.errors import SimError
from sim.install import MissingExtra, require

__all__ = ["MissingExtra", "ClusterError", "import_distributed", "require_cluster", "security_from", "dask_client",
           "add_cluster_options", "client_from_args", "wants_cluster", "cluster_option", "Progress"]


class ClusterError(SimError):
    """Bad cluster options (worker count, TLS files, both an address and a scheduler file)."""


def require_cluster(what: str = "vtasim on Dask") -> None:
    """A one-line :class:`~sim.install.MissingExtra` naming the extra of dask.distributed unless it is
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
    for k, v in given.items():
        if not Path(v).is_file():
            raise ClusterError(f"{k} {v}: not a readable file")
    from distributed.security import Security
    ca, cert, key = (str(Path(v).resolve()) for v in (tls_ca, tls_cert, tls_key))
    return Security(require_encryption=True, tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key,
                    tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key)


@contextmanager
def dask_client(workers: int = 2, scheduler: str | None = None, scheduler_file=None, processes: bool = True,
                security=None, log=print, what: str = "vtasim", worker_env: dict | None = None):
    """Yield a ``distributed.Client``: on ``scheduler`` / ``scheduler_file`` if given, else on a new
    LocalCluster of ``workers`` processes (threads with ``processes=False``), closed on exit.

    ``worker_env``: environment variables set in local worker processes (e.g. a private RTL build cache)."""
    distributed = import_distributed(what)
    if scheduler and scheduler_file:
        raise ClusterError("give --scheduler or --scheduler-file, not both")
    if not (scheduler or scheduler_file) and (isinstance(workers, bool) or not isinstance(workers, int)
                                              or workers < 1):
        raise ClusterError(f"--workers {workers!r} must be an integer of at least 1")
    cluster = None
    if scheduler or scheduler_file:
        if scheduler_file is not None and not Path(scheduler_file).is_file():
            raise ClusterError(f"--scheduler-file {scheduler_file}: not a file (dask scheduler --scheduler-file F "
                               "writes it)")
        where = scheduler or f"in {scheduler_file}"
        try:
            client = distributed.Client(scheduler, security=security) if scheduler else \
                distributed.Client(scheduler_file=str(scheduler_file), security=security)
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
    p.add_argument("--workers", type=int, default=default_workers,
                   help="worker processes of the local Dask cluster" +
                        (f" (default {default_workers})" if default_workers else ""))
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
                       what=what, worker_env=worker_env)


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
