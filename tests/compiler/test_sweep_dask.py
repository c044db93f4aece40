"""Sweeps on real worker processes: a 24-point sweep on a LocalCluster of 2 processes equals the
same points run serially here; a worker killed mid-sweep loses nothing; an interrupted sweep resumes with
only the missing points; a failing point records its error; distributed tuning = serial tuning; the
sweep's "tuned" knob source = the tuner's best record.

References: ``evaluate_point`` called in this process (the serial run), :func:`vtasim.compiler.tuning.tune.tune` with
``jobs=0`` (in-process trials), ``compile_workload`` + ``vtasim.sim.cycle.run_image``."""

import functools
import json
import os
import signal

import pytest

pytest.importorskip("distributed")

from vtasim.hw.config import VTAConfig, load_preset  # noqa: E402
from vtasim.compiler.ops import compile_workload  # noqa: E402
from vtasim.compiler.scale.point import evaluate_point  # noqa: E402
from vtasim.compiler.scale.results import read_rows  # noqa: E402
from vtasim.compiler.scale.runner import run_sweep  # noqa: E402
from vtasim.compiler.scale.spec import parse_spec  # noqa: E402
from vtasim.compiler.tuning.tune import tune  # noqa: E402
from vtasim.sim.cycle import run_image  # noqa: E402
from vtasim.sim.scale.cluster import dask_client  # noqa: E402

# 2 workloads x 2 knob sources x 6 configs = 24 points, each well under a second
RAW = {"base": "1x8x8", "workloads": ["vadd.256", "resnet18.C10"], "reduce": 7, "knobs": ["fallback", "tophub"],
       "grid": {"LOG_BLOCK": [3, 4], "DRAM_LATENCY": [4, 16, 64]}}
VOLATILE = ("seconds",)         # wall time: the only column allowed to differ between runs


def _quiet(_):
    pass


def _stable(row: dict) -> dict:
    """A row without its wall time, every value as the CSV holds it (a string)."""
    return {k: ("" if v is None else str(v)) for k, v in row.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def serial():
    """The reference: every point evaluated one after the other in this process, by key."""
    spec = parse_spec(RAW)
    rows = {}
    for p in spec.points():
        r = evaluate_point(p.as_dict())
        rows[r["key"]] = r
    assert len(rows) == 24
    return spec, rows


def _counting(log, point):
    """evaluate_point, appending the point's key to ``log`` first (one line per evaluation, any process)."""
    from vtasim.compiler.scale.spec import point_key
    with open(log, "a") as f:
        f.write(point_key(point["config"], point["workload"], point["reduce"], point["knobs"], point.get("tune"))
                + "\n")
    return evaluate_point(point)


def _killer(marker, victim, log, point):
    """Like _counting, but the evaluation of point ``victim`` SIGKILLs its own worker process once."""
    from vtasim.compiler.scale.spec import point_key
    key = point_key(point["config"], point["workload"], point["reduce"], point["knobs"], point.get("tune"))
    if key == victim and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return _counting(log, point)


def _evaluated(log) -> list:
    return open(log).read().split() if os.path.exists(log) else []


def test_two_worker_processes_equal_the_serial_run(serial, tmp_path):
    """Point for point: cycles, every counter (the counters JSON column) and every other column."""
    spec, ref = serial
    out = tmp_path / "r.csv"
    counts = run_sweep(spec, out, workers=2, processes=True, log=_quiet)
    assert counts["lost"] == 0 and counts["ok"] + counts["skipped"] + counts["error"] == 24
    rows = read_rows(out)
    assert sorted(r["key"] for r in rows) == sorted(ref)
    ok = 0
    for r in rows:
        assert _stable(r) == _stable(ref[r["key"]])
        if r["status"] == "ok":
            ok += 1
            c = json.loads(r["counters"])
            assert int(r["cycles"]) > 0 and c["gemm_counter"] == int(r["gemm_uops"])
    assert ok == 24          # every config of RAW fits: all points ran (a skipped one would compare nothing)
    # the points differ from each other: DRAM latency and block size change the cycles
    assert len({r["cycles"] for r in rows if r["workload"] == "resnet18.C10"}) >= 6


def test_killed_worker_loses_nothing_and_the_sweep_completes(serial, tmp_path):
    """The 12th point SIGKILLs its worker process once: Dask reschedules it (and whatever else that worker
    held) on the restarted worker; every point ends in the file once, equal to the serial run."""
    spec, ref = serial
    victim = spec.points()[11].key
    marker, log, out = tmp_path / "killed", tmp_path / "evals.log", tmp_path / "r.csv"
    counts = run_sweep(spec, out, workers=2, processes=True, log=_quiet,
                       evaluate=functools.partial(_killer, str(marker), victim, str(log)))
    assert marker.exists()                       # the kill happened
    assert counts["lost"] == 0 and counts["ok"] == 24
    rows = read_rows(out)
    assert sorted(r["key"] for r in rows) == sorted(ref)          # each once: nothing lost, nothing twice
    for r in rows:
        assert _stable(r) == _stable(ref[r["key"]])
    assert victim in _evaluated(log)            # the killed point was retried and finished


def test_interrupted_sweep_resumes_with_only_the_missing_points(serial, tmp_path):
    """The client is interrupted (KeyboardInterrupt) after 9 rows were written; the same sweep again
    evaluates exactly the 15 points without a row (the evaluation log says which), and the file then
    equals the serial run."""
    spec, ref = serial
    out, log = tmp_path / "r.csv", tmp_path / "evals.log"
    seen = []

    def interrupt(line):
        if line.startswith("["):
            seen.append(line)
            if len(seen) == 9:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, workers=2, processes=True, log=interrupt)
    first = {r["key"] for r in read_rows(out)}
    assert len(first) == 9
    counts = run_sweep(spec, out, workers=2, processes=True, log=_quiet,
                       evaluate=functools.partial(_counting, str(log)))
    assert counts["done_before"] == 9 and counts["ok"] == 15
    evaluated = _evaluated(log)
    assert sorted(evaluated) == sorted(set(ref) - first)          # only the missing ones, each once
    rows = read_rows(out)
    assert sorted(r["key"] for r in rows) == sorted(ref)
    for r in rows:
        assert _stable(r) == _stable(ref[r["key"]])


def test_failing_point_records_its_error_and_the_others_finish(serial, tmp_path, monkeypatch):
    """The cycle engine raises on configs with LOG_BLOCK 4 and DRAM_LATENCY 64 (in-thread workers see the
    patch): those 4 points are status=error with the exception's first line; the 20 others equal the
    serial run."""
    import vtasim.sim.cycle
    spec, ref = serial
    real = vtasim.sim.cycle.run_image

    def broken(image, **kw):
        if image.cfg.LOG_BLOCK == 4 and image.cfg.DRAM_LATENCY == 64:
            raise RuntimeError("injected engine bug\nsecond line")
        return real(image, **kw)
    monkeypatch.setattr(vtasim.sim.cycle, "run_image", broken)
    counts = run_sweep(spec, tmp_path / "r.csv", workers=2, processes=False, log=_quiet)
    assert counts == {"total": 24, "done_before": 0, "ok": 20, "skipped": 0, "error": 4, "lost": 0}
    for r in read_rows(tmp_path / "r.csv"):
        if r["LOG_BLOCK"] == "4" and r["DRAM_LATENCY"] == "64":
            assert r["status"] == "error" and r["reason"] == "RuntimeError: injected engine bug"
            assert r["cycles"] == ""
        else:
            assert _stable(r) == _stable(ref[r["key"]])


def _trials(result) -> list:
    return [(json.dumps(r["knobs"], sort_keys=True), r["cycles"], r["error"]) for r in result.records]


def test_tuning_on_dask_equals_tuning_in_process():
    """The same seed: the same trials in the same order, the same best record, on 2 Dask worker processes
    as in this process; and the records are real measurements (recompiled and rerun here)."""
    cfg = load_preset("1x8x8")
    here = tune("resnet18.C10", cfg, trials=12, jobs=0, seed=5, reduce=7, progress=None)
    with dask_client(workers=2, log=_quiet) as client:
        there = tune("resnet18.C10", cfg, trials=12, seed=5, reduce=7, progress=None, client=client)
    assert _trials(there) == _trials(here) and len(here.records) == 12
    assert there.best()["knobs"] == here.best()["knobs"]
    assert len({r["cycles"] for r in here.records}) > 1            # the search saw different schedules
    best = here.best()
    res = run_image(compile_workload("resnet18.C10", cfg, knobs=best["knobs"], reduce=7, with_expected=False).image)
    assert res.cycles == best["cycles"]


def test_sweep_tuned_points_use_the_tuners_best(tmp_path):
    """knobs = "tuned": each point's knobs and cycles are those of tune(trials=tune_trials, seed=tune_seed)."""
    raw = {"base": "1x8x8", "workloads": ["resnet18.C10"], "reduce": 7, "knobs": "tuned", "tune_trials": 6,
           "tune_seed": 2, "grid": {"DRAM_LATENCY": [4, 64]}}
    spec = parse_spec(raw)
    counts = run_sweep(spec, tmp_path / "r.csv", workers=2, processes=True, log=_quiet)
    assert counts["ok"] == 2
    for r in read_rows(tmp_path / "r.csv"):
        cfg = VTAConfig.from_dict({**load_preset("1x8x8").to_dict(), "DRAM_LATENCY": int(r["DRAM_LATENCY"])})
        best = tune("resnet18.C10", cfg, trials=6, jobs=0, seed=2, reduce=7, progress=None).best()
        assert json.loads(r["knob_values"]) == best["knobs"]
        assert int(r["cycles"]) == best["cycles"]
        assert "|tuned:t6:s2|" in r["key"] and r["knob_detail"].startswith("tuned (6 trials")


def _self_signed(tmp_path):
    """A self-signed certificate (its own CA) and key for 127.0.0.1, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vtasim-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                         serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    return tmp_path / "cert.pem", tmp_path / "cert.pem", tmp_path / "key.pem"


def test_tls_options_reach_dask(serial, tmp_path, capsys):
    """vtasim sweep --tls-ca/--tls-cert/--tls-key: the local cluster's scheduler listens on tls:// and the
    points equal the serial run; a client without the certificates cannot talk to it."""
    import distributed

    from vtasim.sim.cli import main
    from vtasim.sim.scale.cluster import dask_client, security_from
    ca, cert, key = _self_signed(tmp_path)
    sec = security_from(ca, cert, key)
    with dask_client(workers=1, security=sec, log=_quiet) as client:
        addr = client.scheduler.address
        assert addr.startswith("tls://") and client.submit(abs, -3).result() == 3
        with pytest.raises((OSError, TimeoutError)):
            distributed.Client(addr.replace("tls://", "tcp://"), timeout="3s")    # plain TCP: no handshake
    spec_file = tmp_path / "s.json"
    spec_file.write_text(json.dumps({**RAW, "grid": {"LOG_BLOCK": [3], "DRAM_LATENCY": [16]}}))
    out = tmp_path / "r.csv"
    assert main(["sweep", str(spec_file), "--out", str(out), "--workers", "1", "--tls-ca", str(ca),
                 "--tls-cert", str(cert), "--tls-key", str(key)]) == 0
    assert "local cluster of 1 worker processes (TLS)" in capsys.readouterr().out
    rows = read_rows(out)
    assert len(rows) == 4 and all(_stable(r) == _stable(serial[1][r["key"]]) for r in rows)


def test_bad_cluster_options_are_one_line_errors(tmp_path, capsys):
    """Half the TLS files, or a missing scheduler file: exit 2 with one line naming the option, no results file."""
    from vtasim.sim.cli import main
    spec_file = tmp_path / "s.json"
    spec_file.write_text(json.dumps({**RAW, "grid": {"LOG_BLOCK": [3]}}))
    out = tmp_path / "r.csv"
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    for extra, word in ((["--tls-cert", str(cert)], "--tls-ca"),
                        (["--scheduler-file", str(tmp_path / "nope.json")], "--scheduler-file")):
        assert main(["sweep", str(spec_file), "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and word in err[0]
    assert not out.exists()


def test_tune_command_on_dask_equals_the_process_pool(tmp_path, capsys):
    """vtasim tune --workers 2 (Dask) and --jobs 2 (process pool), same seed: the same trials in the log and
    the same 'tuned' line."""
    from vtasim.sim.cli import main
    outs, logs = [], []
    for k, opts in enumerate((["--workers", "2"], ["--jobs", "2"])):
        log = tmp_path / f"t{k}.jsonl"
        assert main(["tune", "dense.16x64x64", "--trials", "8", "--seed", "1", "--skip-fallback", "--log", str(log),
                     *opts]) == 0
        outs.append(next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("tuned")))
        logs.append(sorted((json.dumps(r["knobs"], sort_keys=True), r["cycles"])
                           for r in map(json.loads, log.read_text().splitlines())))
    assert outs[0] == outs[1] and logs[0] == logs[1] and len(logs[0]) == 8


def test_existing_scheduler_is_used_unchanged(serial, tmp_path, capsys):
    """vtasim sweep --scheduler ADDR runs on that cluster's worker and leaves the cluster running."""
    import logging

    import distributed

    from vtasim.sim.cli import main
    spec_file = tmp_path / "s.json"
    spec_file.write_text(json.dumps({**RAW, "grid": {"LOG_BLOCK": [4], "DRAM_LATENCY": [64]}}))
    out = tmp_path / "r.csv"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        assert main(["sweep", str(spec_file), "--out", str(out), "--scheduler", cluster.scheduler_address]) == 0
        assert f"sweep: scheduler {cluster.scheduler_address}, 1 workers" in capsys.readouterr().out
        with distributed.Client(cluster) as c:
            assert len(c.scheduler_info()["workers"]) == 1 and c.submit(abs, -2).result() == 2
    rows = read_rows(out)
    assert len(rows) == 4 and all(_stable(r) == _stable(serial[1][r["key"]]) for r in rows)
