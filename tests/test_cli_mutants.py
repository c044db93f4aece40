"""CLI tests that kill the mutations a mutation run of the CLI found surviving: each makes the thing under test
differ from blank or default behaviour, and asserts against an independent reference (the builder's
uop triples, the image's counters, the cycle engine)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vtasim.hw.config import MEM_UOP, load_config
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.cli import main
from vtasim.sim.programs.unit import UNIT_PROGRAMS

CFG = load_config()


def test_disasm_uops_reads_the_loaded_uops(tmp_path, capsys):
    """A LOAD UOP from element 1 of a uop buffer that sits after non-blank data: the listing shows the
    builder's triples 1 and 2, which blank memory, the buffer's start or the data before it do not hold."""
    b = ProgramBuilder(CFG)
    b.data("before", np.full(64, 0x55, np.int8))            # 0x1000: non-zero bytes ahead of the uops
    triples = [(1, 2, 3), (4, 5, 6), (7, 8, 9)]
    u = b.uops(triples)                                      # 0x2000
    b.load(memory_type=MEM_UOP, dram_base=u.elem(MEM_UOP, 1), x_size=2)
    b.finish()
    b.build().save(tmp_path / "img")
    assert main(["disasm", "--uops", str(tmp_path / "img")]) == 0
    listed = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("\t[")]
    assert listed == [f"\t[{k:04d}]\t acc={d}, inp={s}, wgt={w}" for k, (d, s, w) in enumerate(triples[1:])]


@pytest.mark.parametrize("engine", ["functional", "cycle"])
def test_run_check_fails_on_a_wrong_expected_counter(tmp_path, capsys, engine):
    """The outputs match but expected_counters says one GEMM uop more than the program does: exit 1,
    the counter named with both values on stderr (and the same image with the right count passes)."""
    img = tmp_path / "gemm"
    UNIT_PROGRAMS["gemm"](CFG).save(img)
    assert main(["run", str(img), "--engine", engine, "--check"]) == 0
    doc = json.loads((img / "image.json").read_text())
    right = doc["expected_counters"]["gemm_counter"]
    assert right > 0
    doc["expected_counters"]["gemm_counter"] = right + 1
    (img / "image.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["run", str(img), "--engine", engine, "--check"]) == 1
    cap = capsys.readouterr()
    assert "check: MISMATCH" in cap.out
    assert cap.err.splitlines() == [f"vtasim: mismatch: counter gemm_counter: expected {right + 1}, got {right}"]


def test_run_json_rates_and_trace_are_the_cycle_engines(tmp_path, capsys):
    """run --json on the cycle engine: cycles and breakdown equal an API run of the same image,
    cycles_per_s is cycles / wall_s, and the --trace CSV holds that run's retire records."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.trace import read_csv
    image = UNIT_PROGRAMS["gemm"](CFG)
    image.save(tmp_path / "g")
    assert main(["run", str(tmp_path / "g"), "--engine", "cycle", "--json", "--trace", str(tmp_path / "t.csv")]) == 0
    doc = json.loads(capsys.readouterr().out)
    ref = run_image(image)
    assert doc["cycles"] == ref.cycles and doc["breakdown"] == ref.breakdown
    assert doc["cycles_per_s"] == pytest.approx(doc["cycles"] / doc["wall_s"])
    assert read_csv(tmp_path / "t.csv") == list(ref.trace)


def test_demo_with_a_wrong_cycle_engine_fails(tmp_path, capsys, monkeypatch):
    """The cycle engine returns its run with one output byte flipped: demo reports the mismatch on the
    cycle line, never 'OK' there nor 'all outputs match', and exits non-zero."""
    import vtasim.sim.cycle
    real = vtasim.sim.cycle.run_image

    def wrong(image, **opts):
        r = real(image, **opts)
        outputs = dict(r.outputs.items())
        name = next(iter(outputs))
        outputs[name] = bytes([outputs[name][0] ^ 1]) + outputs[name][1:]
        r.outputs = outputs
        return r
    monkeypatch.setattr(vtasim.sim.cycle, "run_image", wrong)
    rc = main(["demo", "--out", str(tmp_path / "demo"), "--reduce", "4"])
    out = capsys.readouterr().out
    assert rc != 0
    cycle_lines = [ln for ln in out.splitlines() if ln.startswith("cycle ")]
    assert cycle_lines and "MISMATCH" in cycle_lines[0] and " OK" not in cycle_lines[0], out
    assert "all outputs match" not in out and "demo: FAILED" in out
