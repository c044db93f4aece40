"""``vtasim torch``: the command prints the layer table and the comparison with PyTorch's quantised CPU run;
bad models, files and options end in one line on stderr and exit 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_checks import one_line_error

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _vtasim(*args):
    """``python -m vtasim.sim.cli torch ...`` run from this directory (``torch_cases:tiny`` importable), the checkout
    on the path."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", "torch", *map(str, args)], capture_output=True, text=True,
                       cwd=HERE, env=env, timeout=900)
    return r.returncode, r.stdout, r.stderr


def _one_line_error(rc, out, err, *fragments):
    one_line_error(rc, err, *fragments, out=out)


def _figures(out: str, what: str) -> dict:
    line = next(ln for ln in out.splitlines() if ln.startswith(what))
    m = re.search(r"max abs error ([\d.]+) output LSB, relative error ([\d.e+-]+), top-1 agreement ([\d.]+)", line)
    assert m, line
    return {"max_lsb": float(m.group(1)), "rel_err": float(m.group(2)), "top1": float(m.group(3))}


def test_factory_model_with_a_state_dict(tmp_path):
    from torch_cases import tiny
    sd = tmp_path / "tiny4.pt"
    torch.save(tiny(seed=4).state_dict(), sd)
    rc, out, err = _vtasim("torch_cases:tiny", "--input-shape", "1,3,16,16", "--state-dict", sd, "--limit", "6",
                           "--all-convs")
    assert rc == 0, err
    assert "3 VTA region(s)" in out and f"weights from {sd}" in out
    assert re.search(r"worst step [01] LSB", out), out
    ours = _figures(out, "vs PyTorch int8 (fbgemm, CPU)")
    assert ours["max_lsb"] <= 2 and ours["top1"] == 1.0, out
    _figures(out, "noise floor")


def test_bundled_resnet18_fx():
    rc, out, err = _vtasim("resnet18", "--quantize", "fx", "--limit", "2")
    assert rc == 0, err
    assert "torchvision resnet18 (10 classes; trained 40 SGD steps on a synthetic 10-class task" in out, out
    assert "quantised fx for fbgemm" in out and "20 VTA region(s)" in out
    assert re.search(r"the task's classes: top-1 accuracy [\d.]+ on VTA", out), out
    assert re.search(r"layer4_1_conv2\s+qconv\s+vta", out)
    ours, floor = _figures(out, "vs PyTorch int8"), _figures(out, "noise floor")
    assert ours["rel_err"] <= 1.25 * floor["rel_err"], out


def test_a_region_of_several_nodes_is_counted_once(monkeypatch, capsys):
    """``Network.regions`` maps each member node to its region (a multi-op region appears once per member):
    the command prints the number of distinct regions.  PyTorch's uint8 activations keep its networks'
    regions single-op, so the test names one region under a second member, as a multi-op region does."""
    from vtasim.compiler.frontend.network import Network
    from vtasim.sim.cli import main
    real, built = Network.from_torch.__func__, []

    def with_a_second_member(cls, *args, **kw):
        net = real(cls, *args, **kw)
        name, region = next(iter(net.regions.items()))
        net.regions[name + "_member"] = region
        built.append(net)
        return net
    monkeypatch.setattr(Network, "from_torch", classmethod(with_a_second_member))
    rc = main(["torch", "torch_cases:tiny", "--input-shape", "1,3,16,16", "--limit", "1", "--all-convs",
               "--engine", "reference"])
    out = capsys.readouterr().out
    distinct = len({id(r) for r in built[0].regions.values()})
    assert rc == 0 and len(built[0].regions) == distinct + 1 and distinct >= 2, out
    assert f"{distinct} VTA region(s)" in out, out


def test_bad_models_and_options(tmp_path):
    _one_line_error(*_vtasim("nosuchnet"), "'nosuchnet'", "package.module:function")
    _one_line_error(*_vtasim("model.pt"), "saved whole modules are not loaded: a pickle runs code")
    _one_line_error(*_vtasim("torch_cases:tiny"), "give --input-shape N,C,H,W")
    _one_line_error(*_vtasim("torch_cases:tiny", "--input-shape", "1,x,16"), "--input-shape '1,x,16'")
    _one_line_error(*_vtasim("torch_cases:tiny", "--input-shape", "1,3,16,16", "--limit", "0"), "--limit 0")
    _one_line_error(*_vtasim("torch_cases:nothing", "--input-shape", "1,3,16,16"), "cannot import it")
    _one_line_error(*_vtasim("resnet18", "--input-shape", "1,3,16,16"), "takes --image")
    _one_line_error(*_vtasim("resnet18", "--train-steps", "-1"), "--train-steps -1 must be at least 0")
    evil = tmp_path / "evil.pt"
    marker = tmp_path / "ran"
    code = (f"import torch\nclass P:\n    def __reduce__(self):\n        return (open, ({str(marker)!r}, 'w'))\n"
            f"torch.save({{'w': P()}}, {str(evil)!r})\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    _one_line_error(*_vtasim("torch_cases:tiny", "--input-shape", "1,3,16,16", "--state-dict", evil),
                    "not a state dict torch.load(weights_only=True) reads")
    assert not marker.exists()
    torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / "lin.pt")
    _one_line_error(*_vtasim("torch_cases:tiny", "--input-shape", "1,3,16,16", "--state-dict", tmp_path / "lin.pt"),
                    "does not fit the model")
    _one_line_error(*_vtasim("torch_cases:tiny", "--input-shape", "1,3,16,16", "--state-dict", tmp_path / "no.pt"),
                    "no.pt")
