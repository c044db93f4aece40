"""Bad input to the compiler-side surfaces (``vtasim compile``/``tune``/``sweep``/``dse``, tune logs,
sweep specs and results, the tensor-expression API) ends in one line naming the value and the rule,
exit 2, in bounded memory and without hanging.

Each CLI case runs ``python -m vtasim.sim.cli`` in a fresh process under an address-space limit of
:data:`AS_LIMIT` (an allocation past it is a MemoryError, which prints "out of memory" instead of the
rule and so fails the case) and reports its peak resident memory (``VmHWM``), which must stay below
:data:`PEAK_BOUND`.  The timeout is a hang detector only (a FIFO read blocks forever), never a speed
bound.  The references are the rules themselves (file kinds, strict JSON/CSV, the stated bounds of
``vtasim.compiler.dsl.tensor``, ``vtasim.compiler.tuning.workloads``, ``vtasim.compiler.tuning.knobs``, ``vtasim.compiler.scale``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import load_config
from vtasim.hw.files import iter_csv, load_npy
from vtasim.compiler.dsl import te
from vtasim.compiler.errors import CompileError

ROOT = Path(__file__).resolve().parents[2]
AS_LIMIT = 3 << 29          # 1.5 GiB of address space (numpy, numba and Python import in ~1 GiB of it)
PEAK_BOUND = 400 << 20      # resident peak of a refused input: the interpreter and its imports only
TIMEOUT = 300               # hang detector only
FIFO = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
BITSTREAM = load_config().bitstream

_RUNNER = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    sys.path.insert(0, {root!r})
    from vtasim.sim.cli import main
    rc = main(sys.argv[1:])
    peak = next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1]
    print('VMHWM', int(peak) * 1024)
    sys.exit(rc)
""")


def cli(*args):
    script = _RUNNER.format(limit=AS_LIMIT, root=str(ROOT))
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=ROOT)


def refused(proc, *needles) -> str:
    """Exit 2, one stderr line ``vtasim: error: ...`` holding ``needles`` and a stated rule, no internal
    error, a bounded peak."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    line = lines[0]
    assert line.startswith("vtasim: error: "), line
    assert "internal error" not in line and "out of memory" not in line, line
    assert re.search(r"rule|MAX_|must be|out of range \[|is not one of", line), f"no rule named: {line}"
    for n in needles:
        assert n in line, (n, line[:600])
    assert len(line) < 1000
    peak = int(proc.stdout.strip().splitlines()[-1].split()[1])
    assert peak < PEAK_BOUND, f"peak {peak >> 20} MiB"
    return line


# ---- hangs: FIFOs and huge grids ---------------------------------------------------------------------
@FIFO
def test_fifo_tune_log_is_refused_before_any_trial(tmp_path):
    os.mkfifo(tmp_path / "log")
    refused(cli("tune", "dense.16x512x1008", "--log", tmp_path / "log", "--trials", 1, "--jobs", 0),
            "tuning log", "is a FIFO, not a regular file")


@FIFO
@pytest.mark.parametrize("which", ["spec", "resume csv", "dse results"])
def test_fifo_sweep_inputs_are_refused(tmp_path, which):
    fifo = tmp_path / ("p.json" if which == "spec" else "p.csv")
    os.mkfifo(fifo)
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": [4]}}))
    args = {"spec": ["sweep", fifo, "--out", tmp_path / "r.csv"], "resume csv": ["sweep", spec, "--out", fifo],
            "dse results": ["dse", fifo, "--out", tmp_path / "d"]}[which]
    refused(cli(*args), str(fifo), "is a FIFO, not a regular file")


GRID_1E6 = {"DRAM_LATENCY": list(range(1, 1001)), "LOG_INP_BUFF_SIZE": list(range(10, 20)),
            "LOG_WGT_BUFF_SIZE": list(range(10, 20)), "LOG_ACC_BUFF_SIZE": list(range(10, 20))}


@pytest.mark.parametrize("bad_points", [False, True])
def test_million_point_grid_is_refused_before_expansion(tmp_path, bad_points):
    spec = {"workloads": ["vadd.64"], "grid": GRID_1E6}
    assert np.prod([len(v) for v in GRID_1E6.values()]) == 10 ** 6
    if bad_points:
        spec["points"] = [{"preset": "1x8x8"}, {"LOG_BLOCK": 99}]
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = tmp_path / "r.csv"
    if bad_points:
        refused(cli("sweep", tmp_path / "s.json", "--out", out), "points[1]", "LOG_BLOCK", "99", "out of range")
    else:
        refused(cli("sweep", tmp_path / "s.json", "--out", out), "1000000 configs", "MAX_POINTS = 10000")
    assert not out.exists()


# ---- memory: sizes known up front are checked before allocation -------------------------------------
@pytest.mark.parametrize("name, words", [
    ("conv2d.4096.4096.16.16.3.1.1", ["the input has 268435456 elements", "MAX_TENSOR_ELEMENTS = 4194304"]),
    ("conv2d.14.14.16.16.3.100000.1", ["the padded input has 640089603136 elements", "MAX_TENSOR_ELEMENTS"]),
    ("conv2d.14.14.16.16.3.9000000.1", ["pad = 9000000 is more than MAX_EXTENT = 4194304"]),
    ("conv2d.64.64.16.16.3.2000.1", ["padded input has", "MAX_TENSOR_ELEMENTS"]),
    ("conv2d.200.200.16.16.3.1.1", ["im2col window has 5760000 elements", "MAX_TENSOR_ELEMENTS"]),
    ("dense.16x65536x65536", ["the weight has 4294967296 elements", "MAX_TENSOR_ELEMENTS"]),
    ("dense.16x4096x4096", ["the weight has 16777216 elements", "MAX_TENSOR_ELEMENTS"]),
    ("vadd.1073741824", ["length = 1073741824", "MAX_EXTENT"]),
    ("vadd.8388608", ["length = 8388608 is more than MAX_EXTENT = 4194304"]),
    ("gemm.8192x1024x16", ["the input has 8388608 elements", "MAX_TENSOR_ELEMENTS"]),
])
def test_oversized_workloads_are_refused_before_allocation(tmp_path, name, words):
    refused(cli("compile", name, "--out", tmp_path / "c"), name, *words)
    assert not (tmp_path / "c").exists()


def test_largest_vadd_within_the_bound_compiles_in_bounded_memory(tmp_path):
    """The bound is a limit, not a wall: the largest vadd it allows compiles under the same address-space
    limit, into an image whose int8 output C has one byte per element, with its expected bytes."""
    n = 1 << 22
    proc = cli("compile", f"vadd.{n}", "--out", tmp_path / "c")
    assert proc.returncode == 0, proc.stderr[-2000:]
    from vtasim.sim.image import MemoryImage
    img = MemoryImage.load(tmp_path / "c")
    assert [(o.name, o.nbytes) for o in img.outputs] == [("C", n)] and len(img.expected["C"]) == n


def test_tune_log_of_empty_objects_is_refused_at_its_first_line(tmp_path):
    log = tmp_path / "t.jsonl"
    with open(log, "wb") as f:                  # 126 MB of "{}" lines: parsed whole, 42 M dicts
        block = b"{}\n" * (1 << 20)
        for _ in range(42):
            f.write(block)
    assert log.stat().st_size > 120 << 20
    refused(cli("compile", "dense.16x512x1008", "--log", log, "--out", tmp_path / "c"),
            "line 1 lacks workload/config/knobs", "rule:")


def test_oversized_tune_log_is_refused_without_reading(tmp_path):
    log = tmp_path / "t.jsonl"
    with open(log, "wb") as f:
        f.truncate((128 << 20) + 1)             # sparse: nothing is read
    refused(cli("compile", "dense.16x512x1008", "--log", log, "--out", tmp_path / "c"), "more than MAX_LOG_BYTES")


_API_RUNNER = textwrap.dedent("""
    import resource, sys, json
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    sys.path.insert(0, {root!r})
    from vtasim.compiler.dsl import te
    from vtasim.compiler.errors import CompileError
    try:
        {body}
        print(json.dumps({{"error": None}}))
    except CompileError as exc:
        peak = next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1]
        print(json.dumps({{"error": str(exc), "type": type(exc).__name__, "peak": int(peak) * 1024}}))
""")


@pytest.mark.parametrize("body, words", [
    ("te.placeholder((1 << 28,), 'int32', 'big')", ["placeholder `big`", "dimension 0 = 268435456"]),
    ("te.placeholder((1 << 15, 1 << 15), 'int8', 'wide')", ["placeholder `wide`", "1073741824 elements",
                                                              "MAX_TENSOR_ELEMENTS"]),
    ("te.compute((1 << 12, 1 << 12), lambda i, j: i + j, 'C')", ["compute `C`", "16777216 elements"]),
])
def test_api_placeholders_over_the_bound_are_refused_in_bounded_memory(body, words):
    script = _API_RUNNER.format(limit=AS_LIMIT, root=str(ROOT), body=body)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["error"] is not None, "accepted"
    assert r["type"] == "TEError" and "rule" in r["error"]
    for w in words:
        assert w in r["error"]
    assert r["peak"] < PEAK_BOUND


def test_npy_header_declaring_petabytes_is_refused_before_reading(tmp_path):
    """``vtasim.hw.files.load_npy``: the header's shape x itemsize against the bound, before any data."""
    from numpy.lib import format as npformat
    path = tmp_path / "x.npy"
    with open(path, "wb") as f:
        npformat.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (1 << 49,)})
        f.write(b"\0" * 64)
    with pytest.raises(ValueError, match=r"header declares shape \(562949953421312,\) of float64 = "
                                         r"4503599627370496 bytes, more than MAX_INPUT_BYTES = 1048576"):
        load_npy(path, "--input", 1 << 20, limit="MAX_INPUT_BYTES")
    with open(path, "wb") as f:                 # a header that lies about the data it holds
        npformat.write_array_header_1_0(f, {"descr": "<i4", "fortran_order": False, "shape": (100,)})
        f.write(b"\0" * 8)
    with pytest.raises(ValueError, match=r"declares 400 bytes of data, the file holds 8"):
        load_npy(path, "--input", 1 << 20)
    np.save(path, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"dtype object is not a plain number type"):
        load_npy(path, "--input", 1 << 20)
    want = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    np.save(path, np.asfortranarray(want))
    assert np.array_equal(load_npy(path, "--input", 1 << 20), want)


# ---- no internal error: each bad value names its rule -----------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["compile", "conv2d.14.14.16.16.3.1.0"], ["stride = 0 must be at least 1"]),
    (["compile", "conv2d.14.14.16.16.0.1.1"], ["kernel = 0 must be at least 1"]),
    (["compile", "conv2d.14.14.16.16.3.1.1000000000000000000000"], ["stride = 1000000000000000000000",
                                                                    "MAX_EXTENT"]),
    (["compile", "conv2d.14.14.16.16.3.1." + "9" * 5000], ["stride = 999999999999... (5000 digits)"]),
    (["compile", "conv2d.2.2.16.16.7.1.1"], ["kernel 7 is larger than the padded input 4x4"]),
    (["compile", "vadd.1024", "--seed", "-1"], ["compile --seed -1 is not a valid seed"]),
    (["compile", "vadd.1024", "--reduce", "0"], ["reduce = 0 must be an integer in [1"]),
    (["tune", "dense.16x512x1008", "--seed", "-5"], ["tune --seed -5 is not a valid seed"]),
    (["tune", "dense.16x512x1008", "--jobs", "100000"], ["jobs = 100000 must be an integer in [0, 64]"]),
    # silent before: 2.0 == 2 and True == 1 passed the membership test of the knob space
    (["compile", "dense.16x512x1008", "--knobs", '{"oc_nthread": 2.0}'], ["knob oc_nthread = 2.0 must be an integer"]),
    (["compile", "dense.16x512x1008", "--knobs", '{"tile_co": [true, 63]}'], ["knob tile_co = [True, 63]"]),
    (["compile", "vadd.64", "--knobs", '{"tile_co": [1, 1]}'], ["vadd.64: unknown knob(s) tile_co", "no knobs"]),
])
def test_bad_values_name_their_rule(tmp_path, args, words):
    refused(cli(*args, "--out", tmp_path / "c") if args[0] == "compile" else cli(*args), *words)


def _log_line(**changes) -> str:
    rec = {"workload": "dense.16x512x1008", "config": BITSTREAM, "knobs": {"tile_co": [21, 3]}, "cycles": 5,
           "error": None}
    rec.update(changes)
    return json.dumps(rec)


@pytest.mark.parametrize("line, words", [
    (_log_line(cycles="abc"), ["line 1: cycles = 'abc' must be a non-negative integer or null"]),
    (_log_line(cycles=True), ["cycles = True must be"]),
    (_log_line(knobs=[1]), ["knobs = [1] must be a JSON object"]),
    (_log_line(knobs=3), ["knobs = 3 must be a JSON object"]),
    (_log_line(knobs={"tile_co": "x"}), ["knob 'tile_co' = 'x' must be an integer >= 0 or a split"]),
    (_log_line(extra=1), ["unknown field 'extra'"]),
    ("[1, 2]", ["line 1 is a JSON array, not an object"]),
    (_log_line(cycles=7) + "\n" + _log_line(cycles=3).replace(": 3", ": NaN"),
     ["line 2 is not JSON", "NaN is not a JSON number"]),
    (_log_line().replace('"error": null', '"error": null, "cycles": 1'), ["duplicate key 'cycles'"]),
    ("\xff", ["line 1: byte 1 is not UTF-8 text"]),
    (_log_line(error="x" * 70_000), ["line 1 has 70", "bytes (rule: at most 65536 bytes a line)"]),
])
def test_bad_tune_log_records_name_line_field_and_rule(tmp_path, line, words):
    log = tmp_path / "t.jsonl"
    log.write_bytes(line.encode("utf-8") + b"\n" if line != "\xff" else b"\xff\n")
    refused(cli("compile", "dense.16x512x1008", "--log", log, "--out", tmp_path / "c"), "tuning log", *words)
    assert not (tmp_path / "c").exists()


def test_nan_cycles_record_is_never_the_best(tmp_path):
    """The silent wrong result: a NaN compares false, so it stayed "best" and the 3-cycle record was
    ignored.  Now the log is refused; without the NaN record the 3-cycle one wins (the reference: min)."""
    from vtasim.compiler.tuning.knobs import best_from_log
    log = tmp_path / "t.jsonl"
    good = [_log_line(cycles=9, knobs={"tile_co": [63, 1]}), _log_line(cycles=3, knobs={"tile_co": [21, 3]})]
    log.write_text(good[0].replace('"cycles": 9', '"cycles": NaN') + "\n" + "\n".join(good) + "\n")
    with pytest.raises(CompileError, match="NaN is not a JSON number"):
        best_from_log(log, "dense.16x512x1008", load_config())
    log.write_text("\n".join(good) + "\n")
    assert best_from_log(log, "dense.16x512x1008", load_config())["knobs"] == {"tile_co": [21, 3]}


def test_deep_and_duplicate_sweep_specs(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"workloads": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(cli("sweep", deep, "--out", tmp_path / "r.csv"), "nested deeper than", "rule:")
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("workloads = " + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(cli("sweep", deep_toml, "--out", tmp_path / "r.csv"), "nested too deeply", "rule:")
    dup = tmp_path / "dup.json"                 # the silent wrong result: the last copy won
    dup.write_text('{"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": [4]}, "workloads": ["vadd.256"]}')
    refused(cli("sweep", dup, "--out", tmp_path / "r.csv"), "duplicate key 'workloads'", "each key at most once")
    assert not (tmp_path / "r.csv").exists()


# ---- results CSVs (resume and dse) -------------------------------------------------------------------
def _results(tmp_path, mutate=None, tail=b"") -> Path:
    """A results file as vtasim sweep writes it (two ok rows, one skipped), then ``mutate(rows)``."""
    from vtasim.compiler.scale.point import area_proxy, sram_bytes
    from vtasim.compiler.scale.results import COLUMNS
    from vtasim.compiler.scale.spec import point_key
    rows = []
    for i, (wl, status) in enumerate((("vadd.64", "ok"), ("vadd.256", "ok"), ("vadd.64", "skipped"))):
        cfg = load_config().to_dict()
        cfg["DRAM_LATENCY"] += i
        row = {k: "" for k in COLUMNS}
        row.update({k: str(v) for k, v in cfg.items()})
        row.update(key=point_key(cfg, wl, 1, "fallback"), status=status, workload=wl, reduce="1", knobs="fallback",
                   sram_bytes=str(sram_bytes(cfg)), area_proxy=str(area_proxy(cfg)))
        if status == "ok":
            row.update(bitstream=BITSTREAM, cycles=str(1000 + i), gemm_uops="0", alu_uops="8", gemm_util="0.0",
                       dram_bytes="4096", macs="0", macs_per_cycle="0.0", insns="12", seconds="0.5",
                       knob_detail="fallback", knob_values="{}", counters="{}")
        else:
            row["reason"] = "point: keys overflow the ISA"
        rows.append(row)
    if mutate:
        mutate(rows)
    f = io.StringIO()
    w = csv.DictWriter(f, fieldnames=COLUMNS)
    w.writeheader()
    w.writerows(rows)
    path = tmp_path / "results.csv"
    path.write_bytes(f.getvalue().encode("utf-8") + tail)
    return path


def test_results_reference_file_is_accepted(tmp_path):
    """The fixture itself is what the reader accepts (so each case below fails only by its mutation)."""
    from vtasim.compiler.scale.results import read_rows
    rows = read_rows(_results(tmp_path))
    assert [r["status"] for r in rows] == ["ok", "ok", "skipped"]


@pytest.mark.parametrize("mutate, tail, words", [
    (lambda rs: rs[0].update(cycles="fast"), b"", ["line 2: cycles = 'fast' must be a positive integer"]),
    (lambda rs: rs[1].update(cycles="nan"), b"", ["line 3: cycles = 'nan' must be a positive integer"]),
    (lambda rs: rs[0].update(gemm_util="inf"), b"", ["gemm_util = 'inf' must be a finite number"]),
    (lambda rs: rs[0].update(reduce="1.5"), b"", ["reduce = '1.5' must be an integer"]),
    (lambda rs: rs[0].update(workload="$\\frac{a}{b}$"), b"", ["line 2: workload: unknown workload"]),
    (lambda rs: rs[2].update(status="done"), b"", ["status = 'done' is not one of ok, skipped, error"]),
    (lambda rs: rs[0].update(reason="x" * 200_000), b"", ["line 2 is not valid CSV", "more than 131072 characters"]),
    (lambda rs: rs[0].update(reason="x" * 70_000), b"", ["field reason has 70000 characters", "at most 65536"]),
    (None, b"\xff\xfe,bad\n", ["line 5: byte 1 is not UTF-8 text"]),
    (None, b"a,b,c\n", ["line 5 has 3 fields, the header"]),
])
@pytest.mark.parametrize("command", ["dse", "sweep"])
def test_bad_results_files_name_line_column_and_rule(tmp_path, mutate, tail, words, command):
    path = _results(tmp_path, mutate, tail)
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": [4]}}))
    args = ["dse", path, "--out", tmp_path / "d"] if command == "dse" else ["sweep", spec, "--out", path]
    before = path.read_bytes()
    refused(cli(*args), "results file", *words)
    assert path.read_bytes() == before and not (tmp_path / "d").exists()


def test_torn_last_row_is_ignored_and_the_rest_checked(tmp_path):
    """A sweep killed mid-row leaves a last line without its newline: the reader drops it (the resume
    recomputes that point); every complete row is still checked."""
    from vtasim.compiler.scale.results import COLUMNS, read_rows
    path = _results(tmp_path)
    path.write_bytes(path.read_bytes() + b"vadd.64|r1|fall")
    assert [r["status"] for r in read_rows(path)] == ["ok", "ok", "skipped"]
    with pytest.raises(ValueError, match=rf"line 5 has 1 fields, the header {len(COLUMNS)}"):
        list(iter_csv(path, "results file", 1 << 20, COLUMNS, skip_torn=False))
    path.write_bytes(path.read_bytes().replace(b"1000,", b"-1000,", 1))
    with pytest.raises(ValueError, match=r"line 2: cycles = '-1000' must be a positive integer"):
        read_rows(path)


def test_results_writer_after_a_torn_header_writes_the_header(tmp_path):
    from vtasim.compiler.scale.results import COLUMNS, ResultsWriter, read_rows
    path = tmp_path / "r.csv"
    path.write_text(",".join(COLUMNS)[:30])     # the sweep died while writing the header
    rows = read_rows(_results(tmp_path))
    with ResultsWriter(path) as w:
        w.append(rows[0])
    assert read_rows(path) == rows[:1]


# ---- the tensor-expression API: CompileError naming the tensor/axis and the rule -------------------
@pytest.mark.parametrize("make, words", [
    (lambda: te.placeholder((1, 16.0), "int8", "A"), ["placeholder `A`: dimension 1 = 16.0 is a float"]),
    (lambda: te.placeholder((1, 16.5), "int8", "A"), ["dimension 1 = 16.5 is a float"]),
    (lambda: te.placeholder((np.float64(4), 16), "int8", "A"), ["dimension 0 = 4.0 is a float64"]),
    (lambda: te.placeholder((4, "16"), "int8", "A"), ["dimension 1 = '16' is a str"]),
    (lambda: te.placeholder((True, 16), "int8", "A"), ["dimension 0 = True is a bool"]),
    (lambda: te.placeholder((0, 16), "int8", "A"), ["dimension 0 = 0 must be in [1, 4194304]"]),
    (lambda: te.placeholder((4, -2), "int8", "A"), ["dimension 1 = -2 must be in [1"]),
    (lambda: te.placeholder((4, 16), "float32", "A"), ["dtype 'float32' is not bool or int1..int64"]),
    (lambda: te.placeholder((4, 16), "int8", ""), ["placeholder name '' must be a non-empty string"]),
    (lambda: te.placeholder((1,) * 17, "int8", "A"), ["17 dimensions", "MAX_DIMS = 16"]),
    (lambda: te.reduce_axis((0, 0), "k"), ["reduce_axis `k`: extent = 0 must be in [1"]),
    (lambda: te.reduce_axis((0, -3), "k"), ["reduce_axis `k`: extent = -3"]),
    (lambda: te.reduce_axis((0, 2.5), "k"), ["reduce_axis `k`: extent = 2.5 is a float"]),
    (lambda: te.reduce_axis((1, 4), "k"), ["reduce_axis `k`: the range must start at 0"]),
    (lambda: te.reduce_axis(4, "k"), ["reduce_axis `k`: the range must be a pair"]),
    (lambda: te.compute((4, 0), lambda i, j: i, "C"), ["compute `C`: dimension 1 = 0"]),
    (lambda: te.pad(te.placeholder((4,), "int8", "A"), [-1]), ["pad of `A`: pad before of dimension 0 = -1"]),
    (lambda: te.pad(te.placeholder((4,), "int8", "A"), [1.5]), ["pad before of dimension 0 = 1.5"]),
    (lambda: te.cast("float16", 1), ["cast: dtype 'float16'"]),
])
def test_api_bad_shapes_raise_compile_error(make, words):
    with pytest.raises(CompileError) as exc:
        make()
    msg = str(exc.value)
    assert "\n" not in msg and ("rule" in msg or "must" in msg)
    for w in words:
        assert w in msg, msg


def test_reduce_axis_of_extent_zero_never_reaches_numpy():
    """The old failure: reduce_axis((0, 0)) was accepted and the reference's reshape raised numpy's
    ValueError.  The axis is refused where it is made; a valid axis still evaluates (the reference:
    numpy's own sum)."""
    from vtasim.compiler.dsl.reference import evaluate
    with pytest.raises(CompileError, match=r"reduce_axis `k`: extent = 0"):
        te.reduce_axis((0, 0), "k")
    a = te.placeholder((3, 5), "int32", "A")
    k = te.reduce_axis((0, 5), "k")
    s = te.compute((3,), lambda i: te.sum(a[i, k], axis=[k]), "S")
    x = np.arange(15, dtype=np.int32).reshape(3, 5)
    assert np.array_equal(evaluate(s, {"A": x}), x.sum(axis=1))


def test_build_refuses_inputs_of_the_wrong_kind(default_cfg):
    from vtasim.compiler.lowering.build import build
    from vtasim.compiler.dsl.environment import Environment
    from vtasim.compiler.ops import workload_program
    from vtasim.compiler.tuning.knobs import fallback_knobs
    from vtasim.compiler.tuning.workloads import parse_workload
    wl = parse_workload("vadd.64", default_cfg)
    with Environment(default_cfg) as env:
        sch, args, inputs = workload_program(env, wl, fallback_knobs(wl, default_cfg))
        with pytest.raises(CompileError, match=r"input `A` has dtype float64 \(rule: inputs are integer arrays\)"):
            build(sch, args, {**inputs, "A": inputs["A"].astype(np.float64)}, default_cfg)
        with pytest.raises(CompileError, match=r"input `A` has values outside int32"):
            build(sch, args, {**inputs, "A": inputs["A"].astype(np.int64) + (1 << 40)}, default_cfg)
        with pytest.raises(CompileError, match="seed -1 is not a valid seed"):
            workload_program(env, wl, {}, seed=-1)
