"""Inputs a careless or hostile user gives vtasim end in one line and exit 2, never a hang, a traceback or
a MemoryError.

CLI cases run ``python -m vtasim.sim.cli`` in a real process under a 2 GiB address-space limit and with a
``timeout``: both are safety bounds (a regression hangs on a FIFO or reads /dev/zero until memory runs
out), not speed assertions.  Each asserts exit code 2, exactly one stderr line starting
``vtasim: error:``, no traceback, and the words naming the value and the rule.  The references are
the rules themselves (file kinds, JSON, numpy's seed rule, the ISA field widths) and the functional
model for the generated programs.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import MEM_UOP, ConfigError, default_config_path, load_config
from vtasim.hw.files import parse_json
from vtasim.hw.isa import OP_ALU, OP_LOAD, decode_fields, decode_uops
from vtasim.sim import functional
from vtasim.sim.cycle import run_image
from vtasim.sim.errors import ImageError, SimError
from vtasim.sim.image import MemoryImage
from vtasim.sim.program import load_program
from vtasim.sim.programs.randprog import generate
from vtasim.sim.programs.unit import UNIT_PROGRAMS

ROOT = Path(__file__).resolve().parent.parent
FIFO = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
AS_LIMIT = 2 << 30
TIMEOUT = 180             # safety bound: a FIFO read would block forever


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "vtasim.sim.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, preexec_fn=_limit, cwd=cwd or ROOT)


def one_line(proc, *needles) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("vtasim: error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0][:500])
    assert len(lines[0]) < 1000, "the line names the value, abbreviated"
    return lines[0]


def default_cfg_dict() -> dict:
    return json.loads(default_config_path().read_text())


@pytest.fixture
def img_dir(tmp_path):
    d = tmp_path / "img"
    UNIT_PROGRAMS["gemm"](load_config()).save(d)
    return d


# ---- item 4: only regular files of bounded size are read --------------------------------------------
@FIFO
@pytest.mark.parametrize("where", ["--dump", "--dram", "--insn", "--config", "config --config"])
def test_fifo_is_refused_at_once(tmp_path, where):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    good = tmp_path / "insn.bin"
    good.write_bytes(b"\0" * 16)
    args = {"--dump": ["import-tvm", "--dump", fifo],
            "--dram": ["import-tvm", "--insn", good, "--dram", f"{fifo}@0x1000"],
            "--insn": ["import-tvm", "--insn", fifo],
            "--config": ["import-tvm", "--insn", good, "--config", fifo],
            "config --config": ["config", "--config", fifo]}[where]
    if args[0] == "import-tvm":
        args += ["--out", tmp_path / "out"]
    one_line(cli(*args), str(fifo), "is a FIFO, not a regular file", "rule:")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["--dram", "--insn", "--dump"])
def test_dev_zero_is_refused_without_reading(tmp_path, where):
    good = tmp_path / "insn.bin"
    good.write_bytes(b"\0" * 16)
    args = {"--dram": ["--insn", good, "--dram", "/dev/zero@0x1000"], "--insn": ["--insn", "/dev/zero"],
            "--dump": ["--dump", "/dev/zero"]}[where]
    one_line(cli("import-tvm", *args, "--out", tmp_path / "o"), "/dev/zero", "character device",
             "not a regular file")


@FIFO
def test_fifo_segment_and_knob_and_log_files(tmp_path, img_dir):
    doc = json.loads((img_dir / "image.json").read_text())
    seg = img_dir / doc["segments"][0]["file"]
    seg.unlink()
    os.mkfifo(seg)
    one_line(cli("run", img_dir), "segments[0]", "is a FIFO, not a regular file")
    os.mkfifo(tmp_path / "knobs")
    one_line(cli("compile", "resnet18.C10", "--knobs", tmp_path / "knobs", "--out", tmp_path / "c"),
             "--knobs file", "is a FIFO")
    os.mkfifo(tmp_path / "log")
    one_line(cli("compile", "resnet18.C10", "--log", tmp_path / "log", "--out", tmp_path / "c"),
             "tuning log", "is a FIFO")


def test_directory_and_oversized_files(tmp_path):
    one_line(cli("config", "--config", tmp_path), "is a directory, not a regular file")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:                # sparse: 2 MiB of nothing, above MAX_CONFIG_BYTES
        f.truncate(2 << 20)
    with pytest.raises(ConfigError, match=r"has 2097152 bytes, more than MAX_CONFIG_BYTES"):
        load_config(big)
    dump = tmp_path / "dump.txt"
    with open(dump, "wb") as f:
        f.truncate(65 << 20)
    one_line(cli("import-tvm", "--dump", dump, "--out", tmp_path / "o"), "more than MAX_DUMP_BYTES")


def test_read_regular_allocates_what_the_file_holds(tmp_path):
    """The bound is a limit, not a buffer: a 10-byte file under a 256 MiB bound allocates about 10 bytes
    (f.read(n) would allocate n up front); a file stat calls empty (/proc) is still read whole."""
    import tracemalloc

    from vtasim.hw.files import read_regular
    (tmp_path / "small").write_bytes(b"0123456789")
    tracemalloc.start()
    try:
        assert read_regular(tmp_path / "small", "file", 256 << 20) == b"0123456789"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    status = Path("/proc/self/status")
    if status.is_file():
        assert status.stat().st_size == 0 and b"Name:" in read_regular(status, "file", 1 << 20)


# ---- item 5: no traceback -----------------------------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "9" * 5000


def test_deeply_nested_json_config_and_image(tmp_path, img_dir):
    (tmp_path / "c.json").write_text('{"TARGET": ' + DEEP + "}")
    one_line(cli("config", "--config", tmp_path / "c.json"), "nested deeper than", "rule:")
    doc = (img_dir / "image.json").read_text()
    (img_dir / "image.json").write_text(doc.replace('"outputs":', '"x": ' + DEEP + ', "outputs":', 1))
    one_line(cli("run", img_dir), "image.json", "nested deeper than")


def test_integers_beyond_python_digit_limit(tmp_path, img_dir):
    (tmp_path / "c.json").write_text(json.dumps(default_cfg_dict()).replace('"LOG_BATCH": 0', f'"LOG_BATCH": {HUGE}'))
    one_line(cli("config", "--config", tmp_path / "c.json"), "an integer of more than 4300 digits")
    doc = json.loads((img_dir / "image.json").read_text())
    text = json.dumps(doc).replace(f'"count": {doc["insn"]["count"]}', f'"count": {HUGE}')
    (img_dir / "image.json").write_text(text)
    one_line(cli("disasm", img_dir), "image.json", "more than 4300 digits")
    dump = tmp_path / "dump.txt"
    dump.write_text("INSTRUCTION 0: GEMM\n\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0\n"
                    f"\treset_out: 0\n\trange (0, {HUGE})\n")
    one_line(cli("import-tvm", "--dump", dump, "--out", tmp_path / "o"), "instruction 0", "5000 digits",
             "at most 4300 digits")
    one_line(cli("import-tvm", "--insn", dump, "--dram", f"{dump}@{HUGE}", "--out", tmp_path / "o"),
             "is not a number", "characters)")


@pytest.mark.parametrize("cmd", ["randprog", "fuzz"])
def test_negative_seed(tmp_path, cmd):
    one_line(cli(cmd, "--seed", "-1", "--out", tmp_path / "o"), f"{cmd} --seed -1", "non-negative integer")
    with pytest.raises(SimError, match="seed -3 is not a valid seed"):
        generate(load_config(), -3)


def test_argument_errors_are_one_line():
    one_line(cli("fuzz", "--seed", "x"), "vtasim fuzz: argument --seed: invalid int value: 'x'")
    one_line(cli("run"), "vtasim run: the following arguments are required: image_dir")


def test_last_resort_guard(monkeypatch, capsys):
    """A hole no command closes is one line naming the exception and asking for a report; -v adds
    the traceback.  MemoryError says what it is."""
    import vtasim.sim.cli.programs as programs
    from vtasim.sim.cli import main

    def boom(args):
        raise RuntimeError("no such state\nsecond line")

    monkeypatch.setattr(programs, "cmd_unit", boom)
    assert main(["unit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error RuntimeError: no such state" in err[0] and "bug" in err[0]
    assert main(["-v", "unit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vtasim: error: internal error RuntimeError") and "Traceback" in err

    def oom(args):
        raise MemoryError()

    monkeypatch.setattr(programs, "cmd_unit", oom)
    assert main(["unit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vtasim: error: out of memory (MemoryError")


# ---- item 8: the validator refuses what a part cannot handle; randprog covers what it accepts -----------
@pytest.mark.parametrize("key,one_element", [("LOG_UOP_BUFF_SIZE", 2), ("LOG_INP_BUFF_SIZE", 4),
                                             ("LOG_WGT_BUFF_SIZE", 8), ("LOG_ACC_BUFF_SIZE", 6)])
def test_one_element_buffers_are_refused(tmp_path, key, one_element):
    """log2(depth) = 0 would give the RTL 0-bit address and uop index fields: a buffer holds >= 2."""
    d = default_cfg_dict()
    d[key] = one_element
    (tmp_path / "c.json").write_text(json.dumps(d))
    one_line(cli("config", "--config", tmp_path / "c.json"), f"'{key}' = {one_element}",
             "at least 2 elements", f"{key} >= {one_element + 1}")
    load_config().replace(**{key: one_element + 1})           # two elements: accepted


def _smallest() -> dict:
    return {"one": load_config().replace(LOG_UOP_BUFF_SIZE=3, LOG_INP_BUFF_SIZE=5, LOG_WGT_BUFF_SIZE=9,
                                         LOG_ACC_BUFF_SIZE=7),
            "legacy": load_config().replace(HW_VER="0.0.1"),
            "legacy small": load_config().replace(HW_VER="0.0.1", LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=3,
                                                  LOG_INP_BUFF_SIZE=3, LOG_WGT_BUFF_SIZE=6,
                                                  LOG_ACC_BUFF_SIZE=5)}


@pytest.mark.parametrize("name", ["one", "legacy", "legacy small"])
def test_randprog_on_legacy_and_two_element_configs(name):
    """HW_VER 0.0.1 (2-bit memory_type / alu_opcode) and buffers of two elements: every seed gives a
    program that passes the static checks and runs on the functional engine with the cycle engine's bytes."""
    cfg = _smallest()[name]
    for seed in range(12):
        img = generate(cfg, seed)
        load_program(img)
        ref = functional.run_image(img, executor="numpy")
        assert np.array_equal(run_image(img).dram, ref.dram), seed


def test_randprog_cli_on_legacy_config(tmp_path):
    d = default_cfg_dict()
    d["HW_VER"] = "0.0.1"
    (tmp_path / "c.json").write_text(json.dumps(d))
    proc = cli("randprog", "--seed", "5", "--config", tmp_path / "c.json", "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    assert functional.run_image(MemoryImage.load(tmp_path / "r")).counters is not None


# ---- item 9: strict JSON -------------------------------------------------------------------------------
def test_duplicate_keys(tmp_path, img_dir):
    (tmp_path / "c.json").write_text(json.dumps(default_cfg_dict())[:-1] + ', "LOG_BATCH": 1}')
    one_line(cli("config", "--config", tmp_path / "c.json"), "duplicate key 'LOG_BATCH'", "rule:")
    doc = (img_dir / "image.json").read_text()
    (img_dir / "image.json").write_text(doc.replace('"version": 1,', '"version": 1, "version": 1,', 1))
    one_line(cli("run", img_dir), "image.json", "duplicate key 'version'")
    with pytest.raises(ValueError, match="duplicate key 'a'"):
        parse_json('{"b": {"a": 1, "a": 2}}', "x")


@pytest.mark.parametrize("version", ["true", "1.0"])
def test_version_must_be_the_integer_1(img_dir, version):
    doc = (img_dir / "image.json").read_text()
    assert '"version": 1,' in doc
    (img_dir / "image.json").write_text(doc.replace('"version": 1,', f'"version": {version},', 1))
    with pytest.raises(ImageError, match=f"version = {'True' if version == 'true' else '1.0'}.*the JSON integer 1"):
        MemoryImage.load(img_dir)


# ---- item 10: a dump without instructions is refused at import ----------------------------------------
@pytest.mark.parametrize("text", ["", "compiler chatter\nThere are 0 instructions\n\tindented noise\n"])
def test_empty_or_noise_dump_is_refused(tmp_path, text):
    (tmp_path / "d.txt").write_text(text)
    one_line(cli("import-tvm", "--dump", tmp_path / "d.txt", "--out", tmp_path / "o"),
             "holds no TVM DUMP_INSN instruction", "rule:")
    assert not (tmp_path / "o").exists()
    (tmp_path / "e.bin").write_bytes(b"")
    one_line(cli("import-tvm", "--insn", tmp_path / "e.bin", "--out", tmp_path / "o"), "is empty: 0 instructions")


# ---- item 12: immediate ALU ops keep src = dst unless asked ------------------------------------------
def _imm_ops(img):
    """(src factors == dst factors, every uop's src == dst) per immediate ALU op, the uops read from the
    LOAD UOP that wrote the op's range (randprog loads each op's uops just before it)."""
    cfg = img.cfg
    f = decode_fields(cfg, img.insn_bytes())
    dram = img.dram()
    out = []
    for i in np.flatnonzero((f["opcode"] == OP_ALU) & (f["use_imm"] == 1)):
        bgn, end = int(f["uop_bgn"][i]), int(f["uop_end"][i])
        if bgn >= end:
            continue
        j = max(k for k in range(i) if f["opcode"][k] == OP_LOAD and f["memory_type"][k] == MEM_UOP
                and f["sram_base"][k] == bgn and f["x_size"][k] == end - bgn)
        addr = int(f["dram_base"][j]) * cfg.uop_elem_bytes
        d, s, _ = decode_uops(cfg, dram[addr:addr + (end - bgn) * cfg.uop_elem_bytes].view("<u4"))
        factors = (f["src_factor_out"][i], f["src_factor_in"][i]) == (f["dst_factor_out"][i], f["dst_factor_in"][i])
        out.append(bool(factors and np.array_equal(d, s)))
    return out


def test_immediate_alu_src_equals_dst_unless_asked(tmp_path):
    cfg = load_config()
    default = [ok for seed in range(60) for ok in _imm_ops(generate(cfg, seed))]
    asked = [ok for seed in range(60) for ok in _imm_ops(generate(cfg, seed, imm_src_ne_dst=True))]
    assert len(default) > 20 and all(default)
    assert not all(asked)
    proc = cli("randprog", "--seed", "2", "--imm-src-ne-dst", "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    assert MemoryImage.load(tmp_path / "r").insn_bytes() == generate(cfg, 2, imm_src_ne_dst=True).insn_bytes()
