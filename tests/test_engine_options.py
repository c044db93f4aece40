"""The engine protocol of ``sim/engines.py``: every engine declares what it runs and the options it
takes; ``run_engine`` / ``run_many`` refuse anything else in one line naming the engine and its
options, and write the trace files of the timed engines with one writer.

The declared options are held to the engines' real signatures (``inspect``), so a declaration cannot
drift from the code; the refusals are checked through the Python API and the CLI (exit 2, one line,
no file written).
"""

from __future__ import annotations

import inspect

import pytest

from cli_checks import one_line, vtasim
from vtasim.sim.engines import ENGINES, TRACE_OPTIONS, engine_module, engine_options, run_engine, run_many
from vtasim.sim.errors import SimError
from vtasim.sim.programs.unit import build
from vtasim.sim.trace import read_csv


def keyword_params(fn) -> list:
    return [p.name for p in list(inspect.signature(fn).parameters.values())[1:]]


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_declared_options_are_the_signatures(name):
    mod = engine_module(name)
    assert isinstance(mod.TIMED, bool)
    assert set(keyword_params(mod.run_image)) == {o.name for o in mod.OPTIONS}
    assert set(keyword_params(mod.run_images)) == {o.name for o in mod.BATCH_OPTIONS}
    assert len({o.name for o in mod.OPTIONS}) == len(mod.OPTIONS)
    assert not {o.name for o in TRACE_OPTIONS} & set(keyword_params(mod.run_image)), \
        "trace files are the protocol's (vtasim.sim.trace.write_run), not an engine's"


@pytest.mark.parametrize("opts, needles", [
    ({"gem": "int"}, ("engine 'cycle' has no option 'gem'", "its options: progress, gemm, trace, perfetto")),
    ({"gemm": "float"}, ("option gemm = 'float' is not one of 'auto', 'int', 'simd', 'blas'",)),
    ({"progress": 1}, ("option progress = 1 must be bool",)),
    ({"sim": "icarus"}, ("engine 'cycle' has no option 'sim'",)),
    ({"workers": 2}, ("engine 'cycle' has no option 'workers' for run_engine",)),
])
def test_run_engine_refuses_what_the_cycle_engine_does_not_take(cfg, opts, needles):
    with pytest.raises(SimError) as info:
        run_engine("cycle", build("gemm", cfg), **opts)
    assert "\n" not in str(info.value)
    for n in needles:
        assert n in str(info.value)


def test_functional_engine_refuses_trace_files_with_the_reason(cfg, tmp_path):
    with pytest.raises(SimError, match=r"engine 'functional' has no option 'trace'.*no timing.*options: executor$"):
        run_engine("functional", build("gemm", cfg), trace=tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()
    assert [o.name for o in engine_options("functional")] == ["executor"]


def test_run_many_checks_the_batch_options(cfg):
    images = [build("gemm", cfg), build("relu", cfg)]
    with pytest.raises(SimError, match=r"engine 'functional' has no option 'workers' for run_many"):
        run_many("functional", images, workers=2)
    with pytest.raises(SimError, match=r"option workers = '2' must be int"):
        run_many("cycle", images, workers="2")
    with pytest.raises(SimError, match=r"has no option 'trace' for run_many"):
        run_many("cycle", images, trace="t.csv")
    one = [run_engine("cycle", img) for img in images]
    many = run_many("cycle", images, workers=2, gemm="int")
    assert [r.cycles for r in many] == [r.cycles for r in one]
    assert [list(r.trace) for r in many] == [list(r.trace) for r in one]


def test_trace_of_a_timed_engine_is_written_by_the_protocol(cfg, tmp_path):
    r = run_engine("cycle", build("gemm", cfg), trace=tmp_path / "t.csv", perfetto=tmp_path / "p.json")
    assert read_csv(tmp_path / "t.csv") == list(r.trace) and len(r.trace) > 5
    assert (tmp_path / "p.json").stat().st_size > 0


def test_cli_refuses_a_trace_of_the_functional_engine(cfg, tmp_path):
    build("gemm", cfg).save(tmp_path / "img")
    proc = vtasim("run", tmp_path / "img", "--engine", "functional", "--trace", tmp_path / "t.csv")
    one_line(proc, "engine 'functional' has no option 'trace'", "no timing")
    assert not (tmp_path / "t.csv").exists()
    proc = vtasim("run", tmp_path / "img", "--engine", "cycle", "--trace", tmp_path / "t.csv")
    assert proc.returncode == 0, proc.stderr
    assert len(read_csv(tmp_path / "t.csv")) == build("gemm", cfg).insn_count
