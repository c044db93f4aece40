"""The vtasim command line: config, disasm, run (--out/--check/--json), unit, demo; exit codes."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import load_config
from vtasim.hw.disasm import assemble
from vtasim.hw.isa import decode_stream
from vtasim.sim.cli import main
from vtasim.sim.image import MemoryImage
from vtasim.sim.programs.unit import UNIT_PROGRAMS

ROOT = Path(__file__).resolve().parent.parent
CFG = load_config()


@pytest.fixture()
def relu_dir(tmp_path):
    d = tmp_path / "relu"
    UNIT_PROGRAMS["relu"](CFG).save(d)
    return d


def test_config_text_and_json(capsys):
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "sim_1x16_i8w8a32_15_15_18_17" in out and "LOG_ACC_BUFF_SIZE" in out and "acc_depth" in out
    assert main(["config", "--json", "--config", str(ROOT / "config/presets/2x16x16.json")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"]["LOG_BATCH"] == 1 and doc["derived"]["bitstream"] == "2x16_i8w8a32_15_16_18_18"


def test_disasm_round_trips(relu_dir, capsys):
    assert main(["disasm", str(relu_dir)]) == 0
    text = capsys.readouterr().out
    img = MemoryImage.load(relu_dir)
    assert assemble(text) == decode_stream(CFG, img.insn_bytes())
    assert main(["disasm", "--uops", str(relu_dir)]) == 0
    assert "\t[0000]\t acc=0, inp=0, wgt=0" in capsys.readouterr().out


def test_run_json_out_check(relu_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(relu_dir), "--engine", "functional", "--out", str(out), "--check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    img = MemoryImage.load(relu_dir)
    want = img.expected["out"]
    assert (out / "out.bin").read_bytes() == want
    assert doc["outputs"]["out"] == {"file": str(out / "out.bin"), "nbytes": len(want),
                                     "sha256": hashlib.sha256(want).hexdigest()}
    assert doc["counters"] == img.expected_counters
    assert doc["cycles"] is None and doc["leftover_tokens"] == {} and doc["check"]["ok"] is True


def test_check_mismatch_exit_1(relu_dir, capsys):
    doc = json.loads((relu_dir / "image.json").read_text())
    f = relu_dir / doc["expected"][0]["file"]
    data = bytearray(f.read_bytes())
    data[37] ^= 1
    f.write_bytes(bytes(data))
    assert main(["run", str(relu_dir), "--check"]) == 1
    cap = capsys.readouterr()
    assert "check: MISMATCH" in cap.out
    lane = CFG.out_elem_bytes
    got = np.int8(np.uint8(data[37] ^ 1))
    assert (f"output 'out': byte 37 (element {37 // lane}, lane {37 % lane}) expected "
            f"{np.int8(np.uint8(data[37]))}") in cap.err
    assert f"got {got}" in cap.err and "1 of" in cap.err


def test_check_without_expected_is_an_error(tmp_path, capsys):
    img = UNIT_PROGRAMS["relu"](CFG)
    bare = MemoryImage(CFG, img.insn_addr, img.insn_count, img.segments, img.outputs)
    bare.save(tmp_path / "bare")
    assert main(["run", str(tmp_path / "bare"), "--check"]) == 2
    assert "no expected outputs" in capsys.readouterr().err


def test_unit_list_and_export(tmp_path, capsys):
    assert main(["unit"]) == 0
    assert capsys.readouterr().out.split() == list(UNIT_PROGRAMS)
    assert main(["unit", "gemm", "--out", str(tmp_path / "g")]) == 0
    assert main(["run", str(tmp_path / "g"), "--check"]) == 0
    assert main(["unit", "nope"]) == 2


def test_missing_image_is_one_line(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read image" in err[0]


def test_demo(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "functional outputs OK" in out and "all outputs match the numpy reference" in out
    assert main(["run", str(tmp_path / "demo"), "--check"]) == 0
    # The timed run's reports: the trace CSV holds one record per instruction, the PNG is a PNG.
    from vtasim.sim.image import MemoryImage
    from vtasim.sim.trace import read_csv
    records = read_csv(tmp_path / "demo" / "cycle_trace.csv")
    assert len(records) == MemoryImage.load(tmp_path / "demo").insn_count
    assert (tmp_path / "demo" / "cycle_timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "demo" / "cycle_perfetto.json").read_text())["traceEvents"]


def test_demo_small_preset(tmp_path, capsys):
    assert main(["demo", "--config", str(ROOT / "config/presets/1x8x8.json"), "--out", str(tmp_path / "d")]) == 0
    assert "all outputs match" in capsys.readouterr().out


def test_console_entry_point_exit_codes(relu_dir):
    """The real process: exit 2 and a single stderr line for an error."""
    bad = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "run", str(relu_dir / "missing")], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    ok = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "run", str(relu_dir), "--check"], cwd=ROOT,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "check: OK" in ok.stdout


def test_demo_without_cycle_engine(tmp_path, capsys, monkeypatch):
    import vtasim.sim.engines
    monkeypatch.setitem(vtasim.sim.engines.ENGINES, "cycle", "sim.engine_that_is_not_installed")
    assert main(["demo", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "cycle      skipped: engine 'cycle' is not available" in out and "all outputs match" in out
    assert main(["run", str(tmp_path / "d"), "--engine", "cycle"]) == 2
    assert "not available" in capsys.readouterr().err


def test_fuzz_with_no_programs_is_one_line_error(capsys):
    assert main(["fuzz", "--n", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fuzz --n 0" in err[0] and "at least 1" in err[0]


def test_a_command_group_that_cannot_import_fails_alone(monkeypatch, capsys):
    """An entry point whose module is missing (an optional extra not installed) becomes a command of
    its name that exits 2 with one line saying what to install; the other commands still work."""
    from importlib.metadata import EntryPoint

    import vtasim.sim.cli
    real = vtasim.sim.cli.entry_points(group=vtasim.sim.cli.GROUP)
    broken = EntryPoint(name="frobnicate", value="vtasim_module_that_is_not_installed.cli:add_commands [frob]",
                        group=vtasim.sim.cli.GROUP)
    monkeypatch.setattr(vtasim.sim.cli, "entry_points", lambda group: [*real, broken])
    assert main(["frobnicate", "anything", "--at-all"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vtasim frobnicate is not available" in err[0] and "pip install 'vtasim[frob]'" in err[0]
    assert main(["unit"]) == 0 and "gemm_smt" in capsys.readouterr().out


def test_a_command_of_a_group_that_cannot_import_names_the_group(monkeypatch, capsys):
    """``vtasim compile`` when the group providing it failed to load: one line naming that group."""
    from importlib.metadata import EntryPoint

    import vtasim.sim.cli
    real = vtasim.sim.cli.entry_points(group=vtasim.sim.cli.GROUP)
    broken = EntryPoint(name="frobnicate", value="vtasim_module_that_is_not_installed.cli:add_commands [frob]",
                        group=vtasim.sim.cli.GROUP)
    monkeypatch.setattr(vtasim.sim.cli, "entry_points", lambda group: [*real, broken])
    assert main(["frob-it", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no command 'frob-it'" in err[0] and "vtasim frobnicate is not available" in err[0]
