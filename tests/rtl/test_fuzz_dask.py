"""Distributed fuzz on Icarus, 1x8x8: ``vtasim fuzz --workers 2`` finds the same
divergences as the serial fuzz for the same seeds on a deliberately broken RTL copy (the WRONG_BIT
mutant of test_mutation.py: bit 0 of every ALU result flipped), and each saved minimal program still
diverges (``vtasim diff`` on it, run here), is legal and is smaller than the original.

The reference is the serial campaign (and the cycle engine / static checks for legality); the mutant's
build and the reference build go to a private build cache shared by this process and the Dask workers."""

from __future__ import annotations

import re
import shutil

import pytest

from test_mutation import TENSOR, WRONG_BIT

pytest.importorskip("distributed")
pytestmark = pytest.mark.rtl

PRESET = "1x8x8"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A mutant RTL copy, a private build cache (os.environ, so Dask worker processes inherit it), the preset."""
    from vtasim.sim.rtl.runner import default_rtl_dir
    root = tmp_path_factory.mktemp("fuzzdask")
    rtl = root / "rtl"
    shutil.copytree(default_rtl_dir(), rtl)
    text = (rtl / TENSOR).read_text()
    assert text.count(WRONG_BIT[0]) == 1, "mutation site moved: update test_mutation.WRONG_BIT"
    (rtl / TENSOR).write_text(text.replace(*WRONG_BIT))
    from vtasim.hw.config import load_preset
    import json
    (root / "cfg.json").write_text(json.dumps(load_preset(PRESET).to_dict()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VTASIM_BUILD_DIR", str(root / "builds"))
        yield {"root": root, "rtl": rtl, "config": str(root / "cfg.json")}


def _fuzz(capsys, env, out, *extra):
    from vtasim.sim.cli import main
    rc = main(["fuzz", "--sim", "icarus", "--config", env["config"], "--out", str(out), *extra])
    return rc, capsys.readouterr().out


def _summary(text):
    """(identical, diverged, failing seeds) of the last line, and the coverage block."""
    last = [ln for ln in text.splitlines() if ln.startswith("seed")][-1]
    m = re.match(r"seeds? \d+(?:\.\.\d+)?: (\d+) programs? identical, (\d+) diverged .*?(?:failing seeds (.*))?$", last)
    assert m, last
    seeds = [int(s) for s in (m.group(3) or "").replace(" ...", "").split(", ") if s]
    cov = text[text.index("coverage:"):text.index(last)]
    return int(m.group(1)), int(m.group(2)), seeds, cov


def _mismatch_seeds(text):
    return sorted(int(s) for s in re.findall(r"^--- seed (\d+): MISMATCH", text, re.M))


@pytest.mark.slow
def test_distributed_fuzz_finds_the_serial_divergences_and_shrinks_them(env, capsys, tmp_path):
    from vtasim.hw.config import load_preset
    from vtasim.sim.cli import main
    from vtasim.sim.engines import run_engine
    from vtasim.sim.image import MemoryImage
    from vtasim.sim.program import load_program
    rtl = str(env["rtl"])
    args = ["--n", "6", "--seed", "0", "--rtl-dir", rtl, "--max-reports", "6"]
    rc_s, serial = _fuzz(capsys, env, tmp_path / "serial", *args)
    rc_d, dist = _fuzz(capsys, env, tmp_path / "dask", *args, "--workers", "2")
    s, d = _summary(serial), _summary(dist)
    assert rc_s == rc_d == 1
    assert s == d                                   # counts, failing seeds, merged coverage
    assert s[1] >= 3 and s[0] >= 1                  # the mutant diverges on some seeds, not all
    assert _mismatch_seeds(dist) == _mismatch_seeds(serial) == s[2]
    assert "on 2 Dask workers" in dist
    cfg = load_preset(PRESET)
    for seed in s[2]:
        small = tmp_path / "dask" / f"fuzz_seed{seed}_min"
        line = f"minimal program saved to {small}; reproduce: vtasim diff {small} --against cycle --sim icarus " \
               f"--rtl-dir {rtl}"
        assert line in dist
        image, orig = MemoryImage.load(small), MemoryImage.load(tmp_path / "dask" / f"fuzz_seed{seed}")
        assert image.cfg == cfg and image.insn_count < orig.insn_count
        load_program(image)                                                  # legal: static checks
        assert run_engine("functional", image).outputs == run_engine("cycle", image).outputs
        # the reproduce command, run: it still diverges (exit 1), in an ALU's digest like the original
        assert main(["diff", str(small), "--against", "cycle", "--sim", "icarus", "--rtl-dir", rtl]) == 1
        report = capsys.readouterr().out
        assert "FIRST DIVERGENCE" in report and "mismatched" in report.splitlines()[-1]
        assert main(["diff", str(small), "--against", "cycle", "--sim", "icarus"]) == 0     # the good RTL agrees
        capsys.readouterr()


def test_distributed_fuzz_of_the_good_rtl_equals_serial(env, capsys, tmp_path):
    """Unmutated RTL, 3 seeds on 2 workers (chunks of 1): nothing diverges and the merged coverage and counts
    equal the serial campaign's."""
    args = ["--n", "3", "--seed", "11"]
    rc_s, serial = _fuzz(capsys, env, tmp_path / "s", *args)
    rc_d, dist = _fuzz(capsys, env, tmp_path / "d", *args, "--workers", "2")
    assert rc_s == rc_d == 0
    assert _summary(dist) == _summary(serial) and _summary(serial)[:3] == (3, 0, [])


def test_one_seed_shrinks_against_the_mutant(env):
    """The shrinker on one diverging seed with the mutant RTL (no Dask): the minimal program diverges the
    same way on a fresh RTL run, is legal, and is smaller."""
    from vtasim.hw.config import load_preset
    from vtasim.sim.engines import run_engine
    from vtasim.sim.programs.randprog import generate
    from vtasim.sim.rtl import run_images
    from vtasim.sim.scale.shrink import legal_run, rtl_still_fails, shrink, signature
    cfg = load_preset(PRESET)
    image = generate(cfg, 0)
    exp = run_engine("cycle", image)
    act = run_images([image], sim="icarus", rtl_dir=env["rtl"], errors="return")[0]
    sig = signature(image, exp, act)
    assert sig is not None and sig[0] == "diff" and sig[1] == ("digest",)
    s = shrink(image, rtl_still_fails(sig, sim="icarus", rtl_dir=env["rtl"]))
    assert s.insns_after < s.insns_before and s.image.insn_count == s.insns_after
    assert legal_run(s.image) is not None
    again = run_images([s.image], sim="icarus", rtl_dir=env["rtl"], errors="return")[0]
    assert signature(s.image, run_engine("cycle", s.image), again) == sig
