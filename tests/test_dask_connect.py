"""Connecting to Dask is bounded and its failures are one line (:mod:`vtasim.sim.scale.cluster`,
:mod:`vtasim.sim.scale.handshake`): a peer that accepts and never answers, a peer speaking HTTP, a bad
scheduler file, garbage TLS files and an absurd ``--workers`` each end in exit 2 with one stderr line
naming the address or file and the rule, on ``tune``, ``sweep`` and ``fuzz`` alike.

The fake peers are socket servers on 127.0.0.1 in this process (loopback only).  Each command runs in a
subprocess under an address-space limit, with a generous timeout as the hang detector."""

from __future__ import annotations

import json
import socket
import threading

import pytest

pytest.importorskip("distributed")

from cli_checks import one_line, vtasim  # noqa: E402

TIMEOUT = 180               # hang detector: a command waiting on a silent peer would never return
AS_LIMIT = 3 << 30          # the HTTP peer's "HTTP/1.1" read as a frame length asks for 3 EiB


def cli(*args):
    return vtasim(*args, timeout=TIMEOUT, as_limit=AS_LIMIT)


class Peer:
    """A loopback TCP server that accepts and then stays silent (``reply=None``) or sends ``reply``."""

    def __init__(self, reply: bytes | None = None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply, self.held = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)           # never closed while the test runs: the peer just sits there
            if self.reply is not None:
                conn.sendall(self.reply)

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


@pytest.fixture
def silent():
    p = Peer()
    yield p
    p.close()


@pytest.fixture
def http():
    p = Peer(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n")
    yield p
    p.close()


@pytest.fixture
def spec(tmp_path):
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"base": "1x8x8", "workloads": ["vadd.16"], "knobs": ["fallback"],
                             "grid": {"LOG_BLOCK": [3]}}))
    return s


def _commands(spec, tmp_path):
    return {"tune": ["tune", "vadd.16", "--trials", "1"],
            "sweep": ["sweep", spec, "--out", tmp_path / "r.csv"],
            "fuzz": ["fuzz", "--n", "1"]}


@pytest.mark.parametrize("command", ["tune", "sweep", "fuzz"])
def test_silent_peer_is_one_line_after_the_connect_timeout(command, silent, spec, tmp_path):
    """Mutation caught: the handshake probe removed (distributed then waits far longer than the timeout
    and retries; the hang detector or the multi-line error fails the test)."""
    args = _commands(spec, tmp_path)[command]
    one_line(cli(*args, "--scheduler", silent.address, "--connect-timeout", "1"),
             silent.address, "no handshake within 1 s", "--connect-timeout")
    assert not (tmp_path / "r.csv").exists()


def test_silent_peer_default_timeout(silent, spec, tmp_path):
    from vtasim.sim.scale.cluster import CONNECT_TIMEOUT_S
    one_line(cli("sweep", spec, "--out", tmp_path / "r.csv", "--scheduler", silent.address),
             silent.address, f"no handshake within {CONNECT_TIMEOUT_S:g} s")


@pytest.mark.parametrize("command", ["tune", "sweep", "fuzz"])
def test_http_peer_is_not_a_scheduler(command, http, spec, tmp_path):
    """Under a 3 GiB address-space limit: the 8 bytes "HTTP/1.1" are never taken for a frame length."""
    one_line(cli(*_commands(spec, tmp_path)[command], "--scheduler", http.address),
             http.address, "is not a Dask scheduler", "HTTP/1.1", "rule:")


@pytest.mark.parametrize("content, words", [
    (b"", "not valid JSON"),
    (b"scheduler: tcp://1.2.3.4:8786\n", "not valid JSON"),
    (b'{"type": "Scheduler"}', "address = None"),
    (b'["tcp://127.0.0.1:1"]', "top level list"),
    (None, "more than MAX_SCHEDULER_FILE_BYTES"),            # sparse 3 GiB: refused on its size, never read
])
def test_bad_scheduler_file(content, words, spec, tmp_path):
    f = tmp_path / "scheduler.json"
    if content is None:
        with open(f, "wb") as fh:
            fh.truncate(3 << 30)
    else:
        f.write_bytes(content)
    one_line(cli("sweep", spec, "--out", tmp_path / "r.csv", "--scheduler-file", f), str(f), words)


def test_scheduler_file_address_is_probed(silent, spec, tmp_path):
    f = tmp_path / "scheduler.json"
    f.write_text(json.dumps({"type": "Scheduler", "address": silent.address}))
    one_line(cli("sweep", spec, "--out", tmp_path / "r.csv", "--scheduler-file", f, "--connect-timeout", "1"),
             silent.address, str(f), "no handshake")


def test_garbage_tls_files_are_refused_before_the_cluster_starts(spec, tmp_path):
    garbage, fake_pem = tmp_path / "garbage.pem", tmp_path / "fake.pem"
    garbage.write_bytes(b"\x00\x01 not a certificate at all\n" * 10)
    fake_pem.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
    for ca, words in ((garbage, "not a PEM file"), (fake_pem, "not a PEM certificate ssl can load")):
        proc = cli("sweep", spec, "--out", tmp_path / "r.csv", "--workers", "1",
                   "--tls-ca", ca, "--tls-cert", ca, "--tls-key", ca)
        one_line(proc, f"--tls-ca {ca}", words)
        assert "local cluster" not in proc.stdout


@pytest.mark.parametrize("command", ["tune", "sweep", "fuzz"])
def test_workers_are_bounded_by_the_cores(command, spec, tmp_path):
    from vtasim.sim.scale.cluster import max_workers
    proc = cli(*_commands(spec, tmp_path)[command], "--workers", "100000")
    one_line(proc, "--workers 100000", f"more than {max_workers()}", "--force-workers")
    assert "local cluster" not in proc.stdout


def test_connect_timeout_is_checked():
    from vtasim.sim.scale.cluster import ClusterError
    from vtasim.sim.scale.handshake import check_timeout
    for bad in (0, -1, float("nan"), float("inf"), 1e9):
        with pytest.raises(ClusterError, match="--connect-timeout"):
            check_timeout(bad)
    assert check_timeout(2) == 2.0


def test_probe_accepts_a_real_scheduler():
    """The reference for the handshake check: a real Dask scheduler passes it."""
    import logging

    import distributed

    from vtasim.sim.scale.handshake import probe
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        probe(cluster.scheduler_address, 10.0)
