"""RTL coverage data without a simulator: the SystemC::Coverage-3 parser, the point-by-point merge, the
reports, ``vtasim coverage merge/report`` and the bad input of the coverage options.

The reference is hand-made .dat text whose every count is written out here (the format Verilator's
``VerilatedCov::write`` writes: ``C '<\\x01name\\x02value...>' count``), so a merge must give the
sums computed by hand and a report the fractions counted by hand."""

from __future__ import annotations

import json

import pytest

from vtasim.sim.cli import main
from vtasim.sim.rtl.coverage import Coverage, CoverageError, format_dat, parse_dat, point
from vtasim.sim.rtl.coverage_report import summary, text_report, write_html

SRC = """module m(input a, output b);
  assign b = a;
  always @* begin
    if (a) x = 1;
    else x = 0;
  end
endmodule
"""


def key(kind, line, comment, extra="", module="m", src="m.v"):
    return (f"\x01f\x02{src}\x01l\x02{line}\x01n\x025\x01t\x02{kind}\x01page\x02v_{kind}/{module}"
            f"\x01o\x02{comment}{extra}\x01h\x02tb_top.u_vta.u_m")


def dat(counts: dict, src="m.v") -> str:
    keys = points_of(src)
    return "# SystemC::Coverage-3\n" + "".join(f"C '{keys[name]}' {c}\n" for name, c in counts.items())


def points_of(src):
    return {"block": key("line", 3, "block", "\x01S\x023-6", src=src),
            "if": key("branch", 4, "if", src=src),
            "else": key("branch", 5, "else", src=src),
            "expr": key("expr", 4, "(a==1) => 1", src=src),
            "quote": key("expr", 5, "(x==4'h3) => 0", src=src),      # Verilator keeps the quote of 4'h3
            "a01": key("toggle", 1, "a:0->1", src=src), "a10": key("toggle", 1, "a:1->0", src=src),
            "b01": key("toggle", 1, "b:0->1", src=src), "b10": key("toggle", 1, "b:1->0", src=src)}


A = {"block": 3, "if": 2, "else": 0, "expr": 2, "quote": 0, "a01": 1, "a10": 1, "b01": 0, "b10": 0}
B = {"block": 1, "if": 0, "else": 1, "expr": 0, "quote": 0, "a01": 0, "a10": 0, "b01": 1, "b10": 0}


@pytest.fixture()
def src(tmp_path):
    p = tmp_path / "m.v"
    p.write_text(SRC)
    return str(p)


def test_parse_and_merge_add_counts_point_by_point(src):
    keys = points_of(src)
    cov = Coverage()
    cov.add_text(dat(A, src))
    cov.add_text(dat(B, src))
    assert cov.runs == 2
    assert cov.points == {keys[n]: A[n] + B[n] for n in A}
    assert parse_dat(format_dat(cov.points)) == cov.points          # the written file reads back the same
    assert cov.covered() == {keys[n] for n in A if A[n] + B[n] > 0}
    assert point(keys["quote"]).comment == "(x==4'h3) => 0"
    p = point(keys["block"])
    assert (p.kind, p.module, p.line, p.lines, p.hier) == ("line", "m", 3, (3, 4, 5, 6), "tb_top.u_vta.u_m")


def test_threshold_decides_covered(src):
    k = key("line", 2, "block", "\x01s\x023", src=src)
    cov = Coverage()
    cov.add_text(f"# SystemC::Coverage-3\nC '{k}' 2\n")
    assert cov.covered() == set()
    cov.add_text(f"# SystemC::Coverage-3\nC '{k}' 1\n")
    assert cov.covered() == {k}


def test_summary_and_reports(src, tmp_path):
    cov = Coverage()
    cov.add_text(dat(A, src))
    cov.add_bins({"op:ALU": 1}, 1)
    s = summary(cov)
    assert s["m"] == {"line": (1, 1), "branch": (1, 2), "expr": (1, 2), "toggle": (2, 4)}
    text = text_report(cov)
    row = next(ln for ln in text.splitlines() if ln.startswith("m "))
    assert "u_m" in row and "1/2  50.0%" in row and "2/4  50.0%" in row and "1/1 100.0%" in row
    # the uncovered else branch is listed with its source line; signal b never toggled (2 of 2 missing)
    assert any("m.v:5" in ln and "else" in ln and "else x = 0;" in ln for ln in text.splitlines())
    assert "b (2/2)" in text and "a (" not in text.split("untoggled")[1]
    assert "1 of " in text and "op:ALU 1" in text               # the random-program bins close the report
    index = write_html(cov, tmp_path / "html")
    page = (tmp_path / "html" / "m.v.html").read_text()
    assert "m.v.html" in index.read_text()
    line5 = next(r for r in page.split("<tr") if "else x = 0;" in r)
    line2 = next(r for r in page.split("<tr") if "assign b = a;" in r)
    assert "class='miss'" in line5 and "miss" not in line2


@pytest.mark.parametrize("text, rule", [
    ("C 'x' 1\n", "before the '# SystemC::Coverage-3' header"),
    ("", "no '# SystemC::Coverage-3' header"),
    ("# SystemC::Coverage-3\nC '\x01f\x02a.v' one\n", "line 2 .* is not C '<key>' <count>"),
    ("# SystemC::Coverage-3\nC 'nofields' 1\n", "line 2: key 'nofields' has no"),
    ("# SystemC::Coverage-3\nC '\x01f\x02a.v' 1\nC '\x01f\x02a.v' 2\n", "line 3: the point .* appears twice"),
    ("# SystemC::Coverage-3\nC '\x01f\x02a.v' 99999999999999999999999\n", "exceeds 2\\^64 - 1"),
])
def test_corrupt_dat_is_one_line(text, rule):
    with pytest.raises(CoverageError, match=rule):
        parse_dat(text)


def run_cli(capsys, *argv):
    rc = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return rc, out, err.strip().splitlines()


def test_corrupt_coverage_dir_exits_2(tmp_path, capsys):
    d = tmp_path / "cov"
    d.mkdir()
    (d / "coverage.dat").write_text("# SystemC::Coverage-3\nC 'broken\n")
    rc, _, err = run_cli(capsys, "coverage", "report", d)
    assert rc == 2 and len(err) == 1 and "coverage.dat: line 2" in err[0] and "is not C '<key>'" in err[0]
    (d / "coverage.dat").write_bytes(b"# SystemC::Coverage-3\n\xff\n")
    rc, _, err = run_cli(capsys, "coverage", "report", d)
    assert rc == 2 and len(err) == 1 and "byte 22 is not UTF-8" in err[0]
    rc, _, err = run_cli(capsys, "coverage", "report", tmp_path)
    assert rc == 2 and len(err) == 1 and "no coverage.dat in this directory" in err[0]
    (d / "coverage.dat").write_text("# SystemC::Coverage-3\n")
    (d / "coverage.json").write_text(json.dumps({"runs": -1}))
    rc, _, err = run_cli(capsys, "coverage", "report", d)
    assert rc == 2 and len(err) == 1 and "runs = -1 is not a count" in err[0]


def test_merge_command_sums_and_refuses_another_design(src, tmp_path, capsys):
    for name, counts in (("a", A), ("b", B)):
        c = Coverage()
        c.add_text(dat(counts, src))
        c.add_bins({"op:ALU": 1}, 1)
        c.save(tmp_path / name)
    rc, out, _ = run_cli(capsys, "coverage", "merge", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "m")
    assert rc == 0 and "2 simulator runs, 2 programs" in out
    merged = Coverage.load(tmp_path / "m")
    keys = points_of(src)
    assert merged.points == {keys[n]: A[n] + B[n] for n in A} and merged.bins == {"op:ALU": 2}
    assert (tmp_path / "m" / "report.txt").is_file() and (tmp_path / "m" / "html" / "index.html").is_file()
    other = tmp_path / "other.dat"
    other.write_text(dat({"block": 1}, src))                         # a point set of another design
    rc, _, err = run_cli(capsys, "coverage", "merge", tmp_path / "a", other, "--out", tmp_path / "x")
    assert rc == 2 and len(err) == 1 and "coverage of another design" in err[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv, rule", [
    (["fuzz", "--until-saturated", "3"], "needs --coverage DIR"),
    (["fuzz", "--coverage", "c", "--until-saturated", "0"], "must be at least 1"),
    (["fuzz", "--coverage", "c", "--sim", "icarus"], "needs --sim verilator"),
])
def test_coverage_options_bad_input(argv, rule, capsys):
    rc, _, err = run_cli(capsys, *argv)
    assert rc == 2 and len(err) == 1 and rule in err[0]


def test_run_coverage_needs_the_rtl_engine(tmp_path, capsys):
    assert main(["unit", "gemm", "--out", str(tmp_path / "img")]) == 0
    capsys.readouterr()
    rc, _, err = run_cli(capsys, "run", tmp_path / "img", "--engine", "cycle", "--coverage", tmp_path / "c")
    assert rc == 2 and len(err) == 1 and "needs --engine rtl" in err[0]
