"""Every command that writes obeys one rule (:mod:`vtasim.hw.outfiles`): nothing is written through a symbolic
link or outside the directory asked for.  A link planted where vtasim writes, pointing outside, is
refused with one line (exit 2) and the file it points to is unchanged; an output directory that is
itself a link is refused and the directory it points to stays empty; a regular file there is
overwritten; a FIFO there is refused at once (never opened for a blocking write).

The commands run in subprocesses (a generous timeout as a hang detector)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from cli_checks import one_line, vtasim
from vtasim.hw.config import load_config
from vtasim.hw.outfiles import OutputError, open_out, out_dir, sub_dir, write_bytes
from vtasim.sim.image import MemoryImage
from vtasim.sim.programs.unit import UNIT_PROGRAMS

SECRET = b"outside the output directory\n"


def cli(*args):
    return vtasim(*args, timeout=600)


@pytest.fixture
def outside(tmp_path):
    """A file outside every output directory, and an empty directory outside them."""
    f = tmp_path / "outside.txt"
    f.write_bytes(SECRET)
    d = tmp_path / "outside_dir"
    d.mkdir()
    return f, d


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("img") / "gemm"
    UNIT_PROGRAMS["gemm"](load_config()).save(d)
    return d


@pytest.fixture(scope="module")
def results_csv(tmp_path_factory):
    """A vtasim sweep results file of two successful points (what dse reads)."""
    from vtasim.compiler.scale.results import COLUMNS
    cfg = load_config().to_dict()
    path = tmp_path_factory.mktemp("sweep") / "r.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, restval="")
        w.writeheader()
        for k, (cycles, area) in enumerate(((100, 20), (50, 40))):
            w.writerow({**{c: cfg.get(c, "") for c in COLUMNS}, "key": f"k{k}", "status": "ok", "workload": "vadd.16",
                        "reduce": 1, "knobs": "fallback", "cycles": cycles, "area_proxy": area, "sram_bytes": 1,
                        "gemm_util": 0.5, "macs_per_cycle": 1.0, "dram_bytes": 10, "LOG_BATCH": k, "gemm_uops": 0,
                        "alu_uops": 1, "macs": 16, "insns": 5, "seconds": 0.01})
    return path


def _insn_file(tmp_path) -> Path:
    img = UNIT_PROGRAMS["gemm"](load_config())
    p = tmp_path / "insn.bin"
    p.write_bytes(img.insn_bytes())
    return p


# command (argument builder) -> the file it writes in its output directory
WRITERS = {
    "unit": (lambda t, d, img, res: ["unit", "gemm", "--out", d], "image.json"),
    "workload": (lambda t, d, img, res: ["workload", "gemm-bound", "--out", d], "image.json"),
    "randprog": (lambda t, d, img, res: ["randprog", "--seed", "3", "--out", d], "image.json"),
    "import-tvm": (lambda t, d, img, res: ["import-tvm", "--insn", _insn_file(t), "--out", d], "image.json"),
    "compile --out": (lambda t, d, img, res: ["compile", "vadd.16", "--out", d], "image.json"),
    "compile --dump-ir": (lambda t, d, img, res: ["compile", "vadd.16", "--out", t / "c", "--dump-ir", d],
                          "00_input.txt"),
    "run --out": (lambda t, d, img, res: ["run", img, "--engine", "functional", "--out", d], "out.bin"),
    "waves": (lambda t, d, img, res: ["waves", img, "--out", d], "model.vcd"),
    "dse": (lambda t, d, img, res: ["dse", res, "--out", d], "front.csv"),
}


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_link_planted_in_the_output_directory_is_refused(command, tmp_path, outside, image_dir, results_csv):
    """Mutation caught: out_dir/open_out following links (O_NOFOLLOW and the lstat check removed)."""
    build, name = WRITERS[command]
    secret, _ = outside
    d = tmp_path / "out"
    d.mkdir()
    (d / name).symlink_to(secret)
    one_line(cli(*build(tmp_path, d, image_dir, results_csv)), str(d / name), "symbolic link", "rule:")
    assert secret.read_bytes() == SECRET and (d / name).is_symlink()


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_output_directory_that_is_a_link_is_refused(command, tmp_path, outside, image_dir, results_csv):
    build, _ = WRITERS[command]
    _, elsewhere = outside
    d = tmp_path / "out"
    d.symlink_to(elsewhere, target_is_directory=True)
    one_line(cli(*build(tmp_path, d, image_dir, results_csv)), str(d), "symbolic link", "not a directory")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("option", ["--trace", "--perfetto"])
def test_trace_files_are_not_written_through_links(option, tmp_path, outside, image_dir):
    secret, _ = outside
    link = tmp_path / "t.out"
    link.symlink_to(secret)
    one_line(cli("run", image_dir, "--engine", "cycle", option, link), str(link), "symbolic link")
    assert secret.read_bytes() == SECRET


def test_sweep_results_link_is_refused_before_any_cluster(tmp_path, outside):
    secret, _ = outside
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"base": "1x8x8", "workloads": ["vadd.16"], "knobs": ["fallback"],
                                "grid": {"LOG_BLOCK": [3]}}))
    link = tmp_path / "r.csv"
    link.symlink_to(secret)
    proc = cli("sweep", spec, "--out", link, "--workers", "1")
    one_line(proc, str(link), "symbolic link")
    assert "local cluster" not in proc.stdout and secret.read_bytes() == SECRET


def test_regular_files_are_overwritten_and_others_refused(tmp_path, image_dir):
    """The overwrite rule: a second save over the same directory replaces the files; a directory or a
    FIFO where a file goes is refused at once (the FIFO is never opened for a blocking write)."""
    d = tmp_path / "img"
    (d / "image.json").parent.mkdir()
    (d / "image.json").write_text("stale")
    MemoryImage.load(image_dir).save(d)
    assert MemoryImage.load(d).insn_bytes() == MemoryImage.load(image_dir).insn_bytes()
    (tmp_path / "dir_here").mkdir()
    with pytest.raises(OutputError, match="is a directory, not a regular file"):
        write_bytes(tmp_path / "dir_here", b"x")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(OutputError, match="is a FIFO, not a regular file"):
            open_out(tmp_path / "fifo", "wb")
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a regular file, not a directory"):
        out_dir(tmp_path / "file")


def test_sub_directory_names_stay_inside(tmp_path, outside):
    """A sub-directory (fuzz_seedN, --save-images' per-region directories) is one component, not a link."""
    _, elsewhere = outside
    for bad in ("..", "a/b", ""):
        with pytest.raises(OutputError, match="not one path component"):
            sub_dir(tmp_path, bad)
    (tmp_path / "fuzz_seed1").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OutputError, match="symbolic link"):
        sub_dir(tmp_path, "fuzz_seed1")
    assert sub_dir(tmp_path, "fuzz_seed2").is_dir()
