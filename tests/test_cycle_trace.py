"""Trace files of the cycle engine: CSV retire records round trip, Perfetto JSON with the lanes."""

import json


from vtasim.sim.cycle import run_image
from vtasim.sim.engines import run_engine
from vtasim.sim.image import MemoryImage, Segment
from vtasim.sim.trace import breakdown_table, read_csv
from vtasim.sim.programs.unit import build


def test_csv_and_perfetto_files(cfg, tmp_path):
    img = build("gemm", cfg)
    r = run_engine("cycle", img, trace=tmp_path / "t.csv", perfetto=tmp_path / "p.json")
    assert read_csv(tmp_path / "t.csv") == r.trace
    doc = json.loads((tmp_path / "p.json").read_text())
    ev = doc["traceEvents"]
    lanes = {e["args"]["name"]: e["tid"] for e in ev if e.get("name") == "thread_name"}
    assert set(lanes) == {"fetch", "load", "compute", "store"}
    complete = [e for e in ev if e["ph"] == "X"]
    for module in ("load", "compute", "store"):
        recs = [x for x in r.trace if x.module == module]
        evs = [e for e in complete if e["tid"] == lanes[module]]
        assert [(e["ts"], e["ts"] + e["dur"] - 1) for e in evs] == [(x.start_cycle, x.end_cycle) for x in recs]
    chunks = [e for e in complete if e["tid"] == lanes["fetch"]]
    assert [(e["ts"], e["ts"] + e["dur"] - 1) for e in chunks] == r.fetch_chunks


def test_perfetto_states_its_time_unit(cfg, tmp_path):
    """Viewers read ts as microseconds: the file says that 1 us is 1 cycle where a reader looks."""
    r = run_engine("cycle", build("gemm", cfg), perfetto=tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    assert "displayTimeUnit" not in doc              # "ms"/"ns" only; neither changes how ts is read
    assert doc["otherData"]["time_unit"] == "cycle" and doc["otherData"]["cycles"] == r.cycles
    assert "1 us" in doc["otherData"]["note"] and "1 cycle" in doc["otherData"]["note"]
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"]
    assert names == ["cycle (1 us shown = 1 cycle)"]
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert complete and all(e["args"]["start_cycle"] == e["ts"] and e["args"]["end_cycle"] == e["ts"] + e["dur"] - 1
                            for e in complete)
    assert max(e["args"]["end_cycle"] for e in complete) == r.cycles - 1


def test_digests_reflect_the_data(cfg):
    # same program, different input bytes: identical timing, different digests of the writers
    a = run_image(build("relu", cfg))
    img = build("relu", cfg)
    segs = [Segment(s.addr, s.data) for s in img.segments]
    k = max((i for i, s in enumerate(segs) if s.addr != img.insn_addr), key=lambda i: len(segs[i].data))
    segs[k] = Segment(segs[k].addr, bytes((x + 1) & 0xFF for x in segs[k].data))   # the acc input
    b = run_image(MemoryImage(cfg, img.insn_addr, img.insn_count, segs, img.outputs))
    assert [(x.start_cycle, x.end_cycle) for x in a.trace] == [(x.start_cycle, x.end_cycle) for x in b.trace]
    assert [x.digest for x in a.trace] != [x.digest for x in b.trace]
    assert all(x.digest == 0 for x in a.trace if x.opcode == 3)


def test_breakdown_table_text(cfg):
    r = run_image(build("gemm", cfg))
    text = breakdown_table(r.breakdown, r.cycles)
    assert text.splitlines()[0].split()[:3] == ["module", "busy", "mem_wait"]
    assert len(text.splitlines()) == 5


def test_sliced_run_equals_one_call_and_shows_progress(cfg, monkeypatch, capsys):
    """The core resumes from its state arrays: tiny slices give the same run, with progress lines."""
    from vtasim.sim.cycle import engine
    img = build("hw_blocked_gemm_vt2", cfg)
    whole = run_image(img)
    monkeypatch.setattr(engine, "SLICE_EVENTS", 3)
    monkeypatch.setattr(engine, "PROGRESS_AFTER_S", 0.0)
    sliced = run_image(img, progress=True)
    assert sliced.trace == whole.trace and sliced.breakdown == whole.breakdown
    assert bytes(sliced.dram) == bytes(whole.dram)
    err = capsys.readouterr().err
    assert "[vtasim cycle] cycle" in err and f"/{img.insn_count}" in err
