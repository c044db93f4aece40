"""The command line of the RTL engine: run --engine rtl, diff, waves."""

from __future__ import annotations

import hashlib
import json

import pytest

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def image_dir(cfg, tmp_path_factory):
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    d = tmp_path_factory.mktemp("img") / "gemm_smt"
    UNIT_PROGRAMS["gemm_smt"](cfg).save(d)
    return d


def test_run_engine_rtl_json(image_dir, verilator_build, capsys):
    from vtasim.sim.cli import main
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.image import MemoryImage
    image = MemoryImage.load(image_dir)
    assert main(["run", str(image_dir), "--engine", "rtl", "--json", "--check"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ref = cycle_run(image)
    assert doc["engine"] == "rtl" and doc["cycles"] == ref.cycles
    assert doc["counters"] == ref.counters
    for name, data in image.expected.items():
        assert doc["outputs"][name]["sha256"] == hashlib.sha256(data).hexdigest()
    assert doc["check"]["ok"]


def test_diff_command_matches(image_dir, verilator_build, capsys):
    from vtasim.sim.cli import main
    from vtasim.sim.image import MemoryImage
    image = MemoryImage.load(image_dir)
    assert main(["diff", str(image_dir)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    n_out = len(image.outputs)
    assert last == f"{image.insn_count} instructions and {n_out} output{'s' * (n_out != 1)} matched, 0 mismatched"


def test_diff_against_functional_on_icarus_with_waves(image_dir, icarus_build, capsys, tmp_path, monkeypatch):
    from vtasim.sim.cli import main
    from vtasim.sim.image import MemoryImage
    n_out = len(MemoryImage.load(image_dir).outputs)
    monkeypatch.chdir(tmp_path)
    assert main(["diff", str(image_dir), "--against", "functional", "--sim", "icarus", "--waves", "vcd"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith(f"{n_out} output{'s' * (n_out != 1)} matched, 0 mismatched")   # data only: outputs
    # the waves cover the whole run: each module's retired count ends at its number of instructions
    assert _retired_at_end(tmp_path / "rtl.vcd") == _module_counts(MemoryImage.load(image_dir))


def _module_counts(image) -> list:
    from vtasim.hw.isa import decode_fields, module_array
    mods = module_array(decode_fields(image.cfg, image.insn_bytes()))
    return [int((mods == m).sum()) for m in range(3)]


def _retired_at_end(vcd) -> list:
    """The last value of each module's retired-instruction counter in a VCD with the RTL's names."""
    from vcdread import read_vcd
    from vtasim.waveforms.vcd import SCOPE
    names = [".".join(SCOPE) + f".u_{m}.u_ctrl.ret_midx" for m in ("load", "compute", "store")]
    changes = read_vcd(vcd, names=set(names))
    return [changes[n][-1][1] for n in names]


def test_waves_command(image_dir, icarus_build, tmp_path, capsys):
    from vtasim.sim.cli import main
    out = tmp_path / "w"
    assert main(["waves", str(image_dir), "--out", str(out), "--sim", "icarus", "--waves", "vcd"]) == 0
    from vtasim.sim.image import MemoryImage
    want = _module_counts(MemoryImage.load(image_dir))
    assert _retired_at_end(out / "rtl.vcd") == want and _retired_at_end(out / "model.vcd") == want
    for gtkw, vcd in (("rtl.gtkw", "rtl.vcd"), ("model.gtkw", "model.vcd")):
        assert f"[dumpfile] \"{vcd}\"" in (out / gtkw).read_text(), gtkw       # beside it, by a relative path
    for png in ("timeline.png", "timeline_rtl.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_demo_with_rtl(tmp_path, verilator_build, capsys):
    """The README's main command with --rtl: the RTL's retire trace equals the cycle engine's."""
    from vtasim.sim.cli import main
    assert main(["demo", "--out", str(tmp_path / "demo"), "--rtl", "verilator"]) == 0
    out = capsys.readouterr().out
    assert "rtl/verilator outputs OK" in out and "retire trace identical to the cycle engine" in out


# FST (the default format): the file starts with FST's header block (block type 0, then the
# block's 64-bit big-endian length, 329 for the header: fstapi.c FST_HDR_SIZE).
FST_HEADER = bytes([0]) + (329).to_bytes(8, "big")


def test_waves_default_to_fst_on_icarus(image_dir, icarus_build, tmp_path, capsys):
    from vtasim.sim.cli import main
    out = tmp_path / "w"
    assert main(["waves", str(image_dir), "--out", str(out), "--rtl", "--sim", "icarus"]) == 0
    assert (out / "rtl.fst").read_bytes()[:9] == FST_HEADER
    assert '[dumpfile] "rtl.fst"' in (out / "rtl.gtkw").read_text()


def test_run_waves_fst_on_verilator(image_dir, verilator_build, tmp_path, monkeypatch, capsys):
    """Verilator compiles FST tracing into every build, so runs with waves use the build of the runs
    without them (the fixture's): no build of its own."""
    from vtasim.sim.cli import main
    from vtasim.sim.rtl.runner import get_build
    monkeypatch.chdir(tmp_path)
    assert get_build(verilator_build.cfg, "verilator", waves="fst").dir == verilator_build.dir
    assert main(["run", str(image_dir), "--engine", "rtl", "--waves", "--check"]) == 0
    assert (tmp_path / "vtasim_rtl.fst").read_bytes()[:9] == FST_HEADER
    assert "building the RTL" not in capsys.readouterr().err


def test_run_waves_says_where_and_writes_a_save_file_beside(image_dir, icarus_build, tmp_path, monkeypatch, capsys):
    from vtasim.sim.cli import main
    from vtasim.sim.image import MemoryImage
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(image_dir), "--engine", "rtl", "--sim", "icarus", "--waves", "vcd"]) == 0
    wave, gtkw = tmp_path / "vtasim_rtl.vcd", tmp_path / "vtasim_rtl.gtkw"
    assert f"waves: {wave} (gtkwave {gtkw})" in capsys.readouterr().out.splitlines()
    assert _retired_at_end(wave) == _module_counts(MemoryImage.load(image_dir))
    assert '[dumpfile] "vtasim_rtl.vcd"' in gtkw.read_text()


def test_diff_waves_says_where(image_dir, icarus_build, tmp_path, monkeypatch, capsys):
    from vtasim.sim.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["diff", str(image_dir), "--sim", "icarus", "--waves", "vcd"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"waves: {tmp_path / 'rtl.vcd'}, {tmp_path / 'rtl.gtkw'}, model.vcd"
    assert '[dumpfile] "rtl.vcd"' in (tmp_path / "rtl.gtkw").read_text() and (tmp_path / "model.vcd").is_file()
