"""RTL code coverage on the Verilator coverage build (one build per session, ``coverage_build``).

References: the programs' own instructions (decoded by :func:`vtasim.sim.programs.randprog.coverage_bins`:
an ALU case arm of ``vta_alu_core.v`` executes exactly when the program holds that ALU operation),
the modules declared in ``hw/rtl/*.v`` (every one has a row in the report), and campaigns over the
same seeds with the same batch boundaries (two campaigns merged equal one campaign over both seed
sets, point by point, on the serial path and on Dask)."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from vtasim.hw.alu import ops_for
from vtasim.hw.config import load_config
from vtasim.sim.cli import main
from vtasim.sim.rtl.coverage import Coverage, point
from vtasim.sim.rtl.runner import default_rtl_dir

pytestmark = pytest.mark.rtl

ALU_ARMS = tuple(op.name for op in ops_for(load_config().HW_VER))    # one case arm per row of vtasim.hw.alu


def alu_arm_counts(cov: Coverage) -> dict:
    """Hits of the line point of each ALU case arm (found by its text in vta_alu_core.v)."""
    src = (default_rtl_dir() / "vta_alu_core.v").read_text().splitlines()
    line_of = {op: next(k + 1 for k, t in enumerate(src) if f"`VTA_ALU_{op}:" in t) for op in ALU_ARMS}
    counts = {}
    for k, c in cov.points.items():
        p = point(k)
        if p.file.endswith("vta_alu_core.v") and p.kind == "line":
            for op, ln in line_of.items():
                if p.line == ln:
                    counts[op] = counts.get(op, 0) + c
    assert set(counts) == set(ALU_ARMS), counts
    return counts


def rtl_modules() -> set:
    return {m for f in default_rtl_dir().glob("*.v") for m in re.findall(r"^\s*module\s+(\w+)", f.read_text(), re.M)}


def cli(capsys, *argv):
    rc = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def test_run_coverage_follows_the_program_and_merges_runs(coverage_build, tmp_path, capsys):
    from vtasim.sim.image import MemoryImage
    from vtasim.sim.programs.randprog import coverage_bins
    d = tmp_path / "cov"
    seen = set()
    for k, name in enumerate(("alu_max_imm", "alu_min_vec")):
        cli(capsys, "unit", name, "--out", tmp_path / name)
        out = cli(capsys, "run", tmp_path / name, "--engine", "rtl", "--check", "--coverage", d)
        assert "check: OK" in out and f"RTL coverage in {d} ({k + 1} simulator runs, {k + 1} programs)" in out
        seen |= {b.split(":")[1].upper() for b in coverage_bins(MemoryImage.load(tmp_path / name)) if b.startswith("alu:")}
        cov = Coverage.load(d)
        arms = alu_arm_counts(cov)
        assert {op for op, c in arms.items() if c} == seen & set(ALU_ARMS), (arms, seen)
        report = (d / "report.txt").read_text()
        src = (default_rtl_dir() / "vta_alu_core.v").read_text().splitlines()
        for op in ALU_ARMS:
            ln = next(i + 1 for i, t in enumerate(src) if f"`VTA_ALU_{op}:" in t)
            assert (f"vta_alu_core.v:{ln} " in report) == (op not in seen), op
    assert seen == {"MAX", "MIN"}


@pytest.fixture(scope="module")
def campaigns(coverage_build, tmp_path_factory):
    """Coverage of seeds 0-1 (a), 2-3 (b) and 0-3 (c), one program per simulator process."""
    root = tmp_path_factory.mktemp("covfuzz")
    outs = {}
    for name, seed, n in (("a", 0, 2), ("b", 2, 2), ("c", 0, 4)):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["fuzz", "--n", str(n), "--seed", str(seed), "--batch", "1", "--coverage", str(root / name),
                       "--out", str(root)])
        assert rc == 0, buf.getvalue()
        outs[name] = buf.getvalue()
    return root, outs


def test_fuzz_coverage_report_and_exact_merge(campaigns, capsys):
    root, outs = campaigns
    c = Coverage.load(root / "c")
    assert (c.runs, c.programs) == (4, 4)
    # the report: a row per module of hw/rtl, printed by fuzz and written to report.txt and html/
    rows = {ln.split()[0] for ln in (root / "c" / "report.txt").read_text().splitlines()
            if re.match(r"^\w+ +\S+ +(\d+/\d+|-)", ln)}
    assert rtl_modules() <= rows, rtl_modules() - rows
    assert "RTL coverage: " in outs["c"] and f"RTL coverage merged into {root / 'c'}" in outs["c"]
    assert (root / "c" / "html" / "index.html").is_file() and (root / "c" / "html" / "vta_alu_core.v.html").is_file()
    # an ALU arm is hit only when some program holds that operation
    bins_ops = {b.split(":")[1].upper() for b in c.bins if b.startswith("alu:")}
    assert {op for op, n in alu_arm_counts(c).items() if n} <= bins_ops
    # c == a + b, point by point (same seeds, same simulator processes), summed here from the files' text
    raw = {n: dict((k, int(v)) for k, v in re.findall(r"^C '(.*)' (\d+)$", (root / n / "coverage.dat").read_text(), re.M))
           for n in "abc"}
    assert raw["c"] == {k: raw["a"][k] + raw["b"][k] for k in raw["a"]} and raw["a"].keys() == raw["b"].keys()
    # and so does vtasim coverage merge a b
    out = cli(capsys, "coverage", "merge", root / "a", root / "b", "--out", root / "m")
    assert "4 simulator runs, 4 programs" in out
    assert (root / "m" / "coverage.dat").read_bytes() == (root / "c" / "coverage.dat").read_bytes()
    assert json.loads((root / "m" / "coverage.json").read_text()) == json.loads((root / "c" / "coverage.json").read_text())
    a = Coverage.load(root / "a")
    assert len(c.covered()) >= len(a.covered()) and sum(c.points.values()) > sum(a.points.values())


@pytest.mark.slow
def test_dask_fuzz_coverage_equals_serial(campaigns, tmp_path, capsys):
    """One Dask worker, chunks of one seed: the same simulator processes as campaign c."""
    pytest.importorskip("distributed")
    root, _ = campaigns
    out = cli(capsys, "fuzz", "--n", 4, "--seed", 0, "--batch", 1, "--workers", 1, "--coverage", tmp_path / "d",
              "--out", tmp_path)
    assert "on 1 Dask workers" in out
    assert (tmp_path / "d" / "coverage.dat").read_bytes() == (root / "c" / "coverage.dat").read_bytes()


@pytest.mark.slow
def test_fuzz_200_programs_coverage(coverage_build, tmp_path, capsys):
    out = cli(capsys, "fuzz", "--n", 200, "--coverage", tmp_path / "cov", "--out", tmp_path)
    cov = Coverage.load(tmp_path / "cov")
    assert (cov.runs, cov.programs) == (2, 200)
    table = [ln for ln in out.splitlines() if re.match(r"^\w+ +\S+ +(\d+/\d+|-)", ln)]
    assert rtl_modules() <= {ln.split()[0] for ln in table}
    assert {op for op, n in alu_arm_counts(cov).items() if n} <= {b.split(":")[1].upper() for b in cov.bins
                                                                  if b.startswith("alu:")}


@pytest.mark.slow
def test_until_saturated_stops_after_k_quiet_batches(coverage_build, tmp_path, capsys):
    """The campaign stops at the first run of K batches that added nothing; the same seeds without those
    K batches cover the same points, and without one more batch fewer."""
    k, batch = 1, 2
    out = cli(capsys, "fuzz", "--n", 60, "--batch", batch, "--until-saturated", k, "--coverage", tmp_path / "s",
              "--out", tmp_path)
    cov = Coverage.load(tmp_path / "s")
    if "coverage saturated" not in out:
        assert cov.programs == 60
        pytest.skip("60 programs did not saturate the coverage")
    ran = cov.programs // batch
    assert ran > k and f"the last {k} of {ran} batches added no coverage point" in out

    def covered(batches):
        cli(capsys, "fuzz", "--n", batches * batch, "--batch", batch, "--coverage", tmp_path / f"p{batches}",
            "--out", tmp_path)
        return Coverage.load(tmp_path / f"p{batches}").covered()
    assert covered(ran - k) == cov.covered()
    assert len(covered(ran - k - 1)) < len(cov.covered())


def test_coverage_build_is_its_own_cache_entry(cfg, coverage_build, verilator_build):
    from vtasim.sim.errors import SimError
    from vtasim.sim.rtl.runner import get_build
    assert coverage_build.coverage and not verilator_build.coverage
    assert coverage_build.key != verilator_build.key and coverage_build.dir.name.startswith("verilator-cov-")
    assert (coverage_build.dir / "build.ok").is_file() and (verilator_build.dir / "build.ok").is_file()
    assert get_build(cfg, "verilator", coverage=True) == coverage_build
    with pytest.raises(SimError, match="RTL coverage needs --sim verilator"):
        get_build(cfg, "icarus", coverage=True)
