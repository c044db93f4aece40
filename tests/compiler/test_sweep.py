"""vtasim sweep / dse (compiler/scale) on a LocalCluster of in-process workers.

References are independent of compiler/scale: each point is recompiled with compile_workload and run
with vtasim.sim.cycle.run_image here; the area proxy is recomputed from its formula; the Pareto front is
checked by brute force."""

import csv
import functools
import json
import random

import pytest

pytest.importorskip("distributed")

from vtasim.hw.config import ConfigError, VTAConfig, load_preset  # noqa: E402
from vtasim.sim.cli import main  # noqa: E402
from vtasim.compiler.ops import compile_workload  # noqa: E402
from vtasim.compiler.scale import runner as runner_mod  # noqa: E402
from vtasim.compiler.scale.pareto import TOTAL, pareto_front, run_dse  # noqa: E402
from vtasim.compiler.scale.point import evaluate_point  # noqa: E402
from vtasim.compiler.scale.results import read_rows  # noqa: E402
from vtasim.compiler.scale.spec import SpecError, load_spec, parse_spec  # noqa: E402
from vtasim.sim.cycle import run_image  # noqa: E402

SPEC = """\
workloads = ["vadd.256", "resnet18.C10"]
reduce = 7
knobs = "tophub"

[[points]]
preset = "1x8x8"

[[points]]
preset = "1x16x16"

[[points]]                 # 2^24-byte uop buffer: 2^22 uops, sram_base is 16 bits -> skipped
preset = "1x8x8"
LOG_UOP_BUFF_SIZE = 24
"""
N_POINTS = 6        # 3 configs x 2 workloads


def _data_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _counting_evaluate(log_path, point):
    with open(log_path, "a") as f:
        f.write(json.dumps([point["workload"], point["config"]["LOG_BLOCK"]]) + "\n")
    return evaluate_point(point)


def _boom(point):
    raise AssertionError("a finished point was evaluated again")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    (d / "spec.toml").write_text(SPEC)
    spec = load_spec(d / "spec.toml")
    out = d / "results.csv"
    lines = []
    counts = runner_mod.run_sweep(spec, out, workers=2, processes=False, log=lines.append)
    (d / "log.txt").write_text("\n".join(lines) + "\n")
    return d, spec, out, counts


def test_sweep_matches_direct_runs(swept):
    d, spec, out, counts = swept
    assert counts == {"total": N_POINTS, "done_before": 0, "ok": 4, "skipped": 2, "error": 0, "lost": 0}
    rows = read_rows(out)
    assert len(rows) == N_POINTS and len({r["key"] for r in rows}) == N_POINTS
    ok = [r for r in rows if r["status"] == "ok"]
    assert sorted((r["workload"], r["LOG_BLOCK"]) for r in ok) == sorted(
        (w, b) for w in ("vadd.256", "resnet18.C10") for b in ("3", "4"))
    for r in ok:
        preset = "1x8x8" if r["LOG_BLOCK"] == "3" else "1x16x16"
        cfg = load_preset(preset)
        assert {k: int(r[k]) for k in ("LOG_BATCH", "LOG_BLOCK", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE")} == \
            {k: getattr(cfg, k) for k in ("LOG_BATCH", "LOG_BLOCK", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE")}
        knobs = json.loads(r["knob_values"])
        res = run_image(compile_workload(r["workload"], cfg, knobs=knobs, reduce=7, with_expected=False).image)
        c = res.counters
        assert int(r["cycles"]) == res.cycles > 0
        assert int(r["gemm_uops"]) == c["gemm_counter"]
        assert int(r["alu_uops"]) == c["alu_counter"]
        dram = (c["inp_load_nbytes"] + c["wgt_load_nbytes"] + c["acc_load_nbytes"] + c["uop_load_nbytes"]
                + c["out_store_nbytes"])
        assert int(r["dram_bytes"]) == dram
        macs = c["gemm_counter"] * cfg.batch * cfg.block_in * cfg.block_out
        assert int(r["macs"]) == macs
        assert float(r["macs_per_cycle"]) == pytest.approx(macs / res.cycles, rel=1e-12)
        assert float(r["gemm_util"]) == pytest.approx(c["gemm_counter"] / res.cycles, rel=1e-12)
        sram = 2 ** cfg.LOG_UOP_BUFF_SIZE + 2 ** cfg.LOG_INP_BUFF_SIZE + 2 ** cfg.LOG_WGT_BUFF_SIZE + \
            2 ** cfg.LOG_ACC_BUFF_SIZE
        assert int(r["sram_bytes"]) == sram
        assert int(r["area_proxy"]) == 8 * sram + 384 * cfg.batch * cfg.block_in * cfg.block_out
        if r["workload"] == "resnet18.C10":
            assert c["gemm_counter"] > 0
    # the knobs a point used are the ones fitting_knobs (the demo's TopHub-adapted choice) picks
    from vtasim.compiler.demo import fitting_knobs
    r = next(r for r in ok if r["workload"] == "resnet18.C10" and r["LOG_BLOCK"] == "3")
    assert json.loads(r["knob_values"]) == fitting_knobs("resnet18.C10", load_preset("1x8x8"), reduce=7)[0].knobs


def test_invalid_point_is_skipped_with_its_reason(swept):
    _, _, out, _ = swept
    skipped = [r for r in read_rows(out) if r["status"] == "skipped"]
    assert sorted(r["workload"] for r in skipped) == ["resnet18.C10", "vadd.256"]
    raw = dict(load_preset("1x8x8").to_dict(), LOG_UOP_BUFF_SIZE=24)
    with pytest.raises(ConfigError) as exc:
        VTAConfig.from_dict(raw)
    for r in skipped:
        assert r["LOG_UOP_BUFF_SIZE"] == "24" and r["cycles"] == ""
        assert "LOG_UOP_BUFF_SIZE" in r["reason"] and "ISA" in r["reason"]
        assert r["reason"].split(": ", 1)[1] == str(exc.value).split(": ", 1)[1]


def test_skipped_points_are_one_summary_line(swept):
    d, _, out, counts = swept
    lines = (d / "log.txt").read_text().splitlines()
    skipped = [r for r in read_rows(out) if r["status"] == "skipped"]
    assert counts["skipped"] == len(skipped) == 2
    assert not [ln for ln in lines if ln.startswith("[") and "skipped" in ln]      # no line per skipped point
    per_point = [ln for ln in lines if ln.startswith("[")]
    assert len(per_point) == counts["ok"]
    summary = [ln for ln in lines if "points skipped" in ln]
    assert len(summary) == 1 and len(summary[0]) < 300
    assert summary[0].startswith(f"sweep: 2 of {N_POINTS} points skipped")
    assert "LOG_UOP_BUFF_SIZE" in summary[0] and summary[0].endswith(f"'reason' column of {out}")


def test_skip_summary_cuts_a_long_reason():
    reason = ("point: keys LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=16, LOG_BLOCK=3 overflow the ISA: GEMM instruction "
              "needs 74 bits in word 1 (dst_factor_out, dst_factor_in, wgt_factor_in) but a word has 64; "
              + "and so on " * 30)
    line = runner_mod.skip_summary(24, 54, reason, "runs/sweep.csv")
    assert line.startswith("sweep: 24 of 54 points skipped") and line.endswith("'reason' column of runs/sweep.csv")
    assert "keys LOG_UOP_BUFF_SIZE=15, ... overflow the ISA" in line and "LOG_BLOCK=3" not in line
    assert "word 1 (dst_factor_out, ...) but" in line and line.count("and so on") < 5 and len(line) < 270


def test_rerun_resumes_without_recomputing(swept, tmp_path):
    d, spec, out, _ = swept
    before = out.read_bytes()
    counts = runner_mod.run_sweep(spec, out, workers=1, processes=False, evaluate=_boom, log=lambda s: None)
    assert counts["done_before"] == N_POINTS and counts["ok"] + counts["skipped"] + counts["lost"] == 0
    assert out.read_bytes() == before and len(_data_rows(out)) == N_POINTS
    # an interrupted sweep: two rows missing and a torn last line; only the two missing points run
    partial = tmp_path / "partial.csv"
    lines = before.decode().splitlines(keepends=True)
    partial.write_text("".join(lines[:-2]) + lines[-2][:40])
    missing = {(r["workload"], r["LOG_BLOCK"]) for r in _data_rows(out)[-2:]}
    calls = tmp_path / "calls.jsonl"
    counts = runner_mod.run_sweep(spec, partial, workers=1, processes=False,
                                  evaluate=functools.partial(_counting_evaluate, calls), log=lambda s: None)
    called = [tuple(json.loads(line)) for line in calls.read_text().splitlines()]
    assert len(called) == 2 and {(w, str(b)) for w, b in called} == missing
    assert counts["done_before"] == N_POINTS - 2
    rows = _data_rows(partial)
    assert len(rows) == N_POINTS
    ref = {r["key"]: r for r in _data_rows(out)}
    for r in rows:
        assert {k: v for k, v in r.items() if k != "seconds"} == {k: v for k, v in ref[r["key"]].items() if k != "seconds"}


def _dominates(a, b):
    return a["cycles"] <= b["cycles"] and a["area_proxy"] <= b["area_proxy"] and \
        (a["cycles"] < b["cycles"] or a["area_proxy"] < b["area_proxy"])


def test_dse_front_is_non_dominated_and_plots(swept, tmp_path):
    _, _, out, _ = swept
    fronts = run_dse(out, tmp_path / "dse", log=lambda s: None)
    ok = [r for r in read_rows(out) if r["status"] == "ok"]
    groups = {}
    for r in ok:
        groups.setdefault(r["workload"], []).append({"cycles": int(r["cycles"]), "area_proxy": int(r["area_proxy"]),
                                                     "cfg": r["LOG_BLOCK"]})
    by_cfg = {}
    for r in ok:
        by_cfg.setdefault(r["LOG_BLOCK"], []).append(r)
    groups[TOTAL] = [{"cycles": sum(int(r["cycles"]) for r in rs), "area_proxy": int(rs[0]["area_proxy"]), "cfg": b}
                     for b, rs in by_cfg.items() if len(rs) == 2]
    with open(tmp_path / "dse" / "front.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert set(fronts) == set(groups) == {r["group"] for r in table}
    for g, pts in groups.items():
        expect = sorted((p["area_proxy"], p["cycles"]) for p in pts if not any(_dominates(q, p) for q in pts))
        got = sorted((int(r["area_proxy"]), int(r["cycles"])) for r in table if r["group"] == g)
        assert got == expect and got
    pngs = sorted(p.name for p in (tmp_path / "dse").glob("*.png"))
    assert {"pareto_vadd.256.png", "pareto_resnet18.C10.png", "pareto_total.png"} <= set(pngs)
    assert any(n.startswith("sensitivity_LOG_BLOCK") for n in pngs)
    for n in pngs:
        assert (tmp_path / "dse" / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _check_ticks(fig, ax, axis):
    renderer = fig.canvas.get_renderer()
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    ticks = [t for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())
             if lo <= (t.get_position()[0] if axis == "x" else t.get_position()[1]) <= hi]
    texts = [t.get_text() for t in ticks]
    assert len(texts) >= 2 and all(texts) and len(set(texts)) == len(texts), (axis, texts)
    boxes = sorted((t.get_window_extent(renderer) for t in ticks), key=lambda b: b.x0 if axis == "x" else b.y0)
    assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:])), (axis, texts)
    return texts


def test_dse_figures_have_labelled_ticks_and_offset_point_labels(swept):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from vtasim.compiler.scale.pareto import groups, pareto_figure, sensitivity_figure
    _, _, out, _ = swept
    grouped = groups(read_rows(out))
    for pts in grouped.values():
        front = pareto_front(pts)
        fig, ax = pareto_figure(plt, pts, front, ["LOG_BLOCK"])
        try:
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            _check_ticks(fig, ax, "x")
            _check_ticks(fig, ax, "y")
            notes = [c for c in ax.get_children() if isinstance(c, matplotlib.text.Annotation)]
            assert [n.get_text() for n in notes] == [str(k + 1) for k in range(len(front))]
            assert [n.xy for n in notes] == [(p["area_proxy"], p["cycles"]) for p in front]
            key = [t for t in ax.texts if t not in notes]
            assert len(key) == 1 and key[0].get_text().splitlines()[1:] == \
                [f"{k + 1}: BLOCK={p['LOG_BLOCK']}" for k, p in enumerate(front)]
            assert not key[0].get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
            for n in notes:
                px, py = ax.transData.transform(n.xy)
                box = n.get_window_extent(renderer)
                assert not box.contains(px, py), f"label {n.get_text()!r} sits on its point"
            assert not ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
        finally:
            plt.close(fig)
    fig, ax = sensitivity_figure(plt, "LOG_BLOCK", grouped)
    try:
        fig.canvas.draw()
        assert _check_ticks(fig, ax, "x") == ["3", "4"]          # the swept values, nothing between
        _check_ticks(fig, ax, "y")
    finally:
        plt.close(fig)


def test_pareto_front_brute_force():
    rng = random.Random(3)
    for _ in range(50):
        pts = [{"cycles": rng.randint(1, 30), "area_proxy": rng.randint(1, 30)} for _ in range(rng.randint(1, 25))]
        front = pareto_front(pts)
        expect = {(p["area_proxy"], p["cycles"]) for p in pts if not any(_dominates(q, p) for q in pts)}
        assert sorted((p["area_proxy"], p["cycles"]) for p in front) == sorted(expect)


def test_grid_and_sample_expand():
    spec = parse_spec({"base": "1x16x16", "workloads": ["vadd.64"], "knobs": ["fallback", "tophub"],
                       "grid": {"LOG_BLOCK": [3, 4], "DRAM_LATENCY": [16, 32, 64]}})
    assert len(spec.points()) == 12 and len({p.key for p in spec.points()}) == 12
    assert {(c["LOG_BLOCK"], c["DRAM_LATENCY"]) for c in spec.configs} == {(b, lat) for b in (3, 4) for lat in (16, 32, 64)}
    sample = {"workloads": ["vadd.64"], "sample": {"samples": 4, "seed": 5, "LOG_BLOCK": [3, 4],
                                                   "DRAM_LATENCY": [16, 32, 64]}}
    a, b = parse_spec(sample).configs, parse_spec(sample).configs
    assert a == b and len(a) == 4 and len({json.dumps(c, sort_keys=True) for c in a}) == 4


@pytest.mark.parametrize("raw, words", [
    ({"workloads": ["vadd.64"], "grid": {"LOG_BLOK": [3]}}, ["LOG_BLOK", "unknown"]),
    ({"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": []}}, ["LOG_BLOCK", "empty"]),
    ({"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": [3, 9]}}, ["LOG_BLOCK", "9", "range"]),
    ({"workloads": ["vadd.64"], "grid": {}}, ["grid", "empty"]),
    ({"workloads": [], "grid": {"LOG_BLOCK": [3]}}, ["workloads"]),
    ({"workloads": ["nope.1"], "grid": {"LOG_BLOCK": [3]}}, ["nope.1"]),
    ({"workloads": ["vadd.64"], "knobs": "tuned", "tune_trials": 0, "grid": {"LOG_BLOCK": [3]}},
     ["tune_trials", "0"]),
    ({"workloads": ["vadd.64"], "knobs": "magic", "grid": {"LOG_BLOCK": [3]}}, ["magic"]),
    ({"workloads": ["vadd.64"], "sample": {"LOG_BLOCK": [3]}}, ["samples"]),
    ({"workloads": ["vadd.64"]}, ["no config points"]),
    ({"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": [3]}, "extra": 1}, ["extra", "unknown"]),
])
def test_bad_specs_are_one_line_errors(raw, words):
    with pytest.raises(SpecError) as exc:
        parse_spec(raw)
    msg = str(exc.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_cli_bad_spec_exits_2_before_any_work(tmp_path, capsys, monkeypatch):
    from vtasim.sim.scale import cluster
    monkeypatch.setattr(cluster, "import_distributed", _boom)
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"workloads": ["vadd.64"], "grid": {"LOG_BLOCK": [3, 7]}}))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "LOG_BLOCK" in err and "range" in err
    assert not (tmp_path / "r.csv").exists()


def test_missing_extra_is_one_line(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)
    from vtasim.sim.scale import cluster
    with pytest.raises(runner_mod.MissingExtra, match=r"pip install 'vtasim\[scale\]'"):
        cluster.import_distributed()
