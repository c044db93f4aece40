"""The workload families the data-visibility tests run (one place, shared with tests/rtl): each builder
returns memory images whose expected outputs come from numpy, with the default seed.

``catalogue(name, reduce)``, ``tutorial(script)``, ``digits_regions()`` and ``gemm_bound(**kw)`` give
``(image, expected output values, (lo, hi) bounds)`` (a list of ``(name, image, values, bounds)`` for the
digits regions); :func:`families` names one image per family member.
"""

from __future__ import annotations

import contextlib
import io
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import load_config

__all__ = ["CFG", "LAYERS", "CATALOGUE", "TUTORIALS", "catalogue", "tutorial", "digits_regions", "gemm_bound",
           "families"]

REPO = Path(__file__).resolve().parents[1]
CFG = load_config()
LAYERS = [f"resnet18.C{i}" for i in range(2, 12)]
CATALOGUE = LAYERS + ["dense.16x512x1008", "dense.16x64x64", "gemm.32x64x48", "vadd.2048", "conv2d.8.8.16.32.3.1.2"]
TUTORIALS = {"vta_get_started": [], "matrix_multiply": [], "matrix_multiply_opt": [],
             "convolution_opt": ["--reduce", "4"]}


@lru_cache(maxsize=None)
def catalogue(name: str, reduce: int = 1):
    """(image, expected output values, bounds) of a catalogue workload."""
    from vtasim.compiler.ops import compile_workload
    c = compile_workload(name, CFG, reduce=reduce)
    return c.image, c.built.expected[c.built.func.args[-1].name], c.workload.out_bounds


@lru_cache(maxsize=None)
def tutorial(script: str):
    """(image, expected output values, bounds) of a tutorial run with its default seed."""
    import importlib.util
    import tempfile

    from vtasim.sim.image import MemoryImage
    examples = REPO / "examples"
    if str(examples) not in sys.path:
        sys.path.insert(0, str(examples))
    spec = importlib.util.spec_from_file_location(f"vis_example_{script}", examples / f"{script}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = Path(tempfile.mkdtemp(prefix=f"vis_{script}_"))
    with contextlib.redirect_stdout(io.StringIO()):
        assert mod.main(["--out", str(out), *TUTORIALS[script]]) == 0
    image = MemoryImage.load(out)
    (name, data), = image.expected.items()
    clipped = script.endswith("_opt")           # the two _opt tutorials clip to [0, 127]; the others truncate
    return image, np.frombuffer(data, np.int8), (0, 127) if clipped else (-128, 127)


@lru_cache(maxsize=None)
def digits_regions():
    """[(region name, image, output values over 20 test images, (lo, hi))] of the digits CNN (QDQ)."""
    pytest.importorskip("onnxruntime")
    from vtasim.compiler.frontend.composite import act_limits
    from vtasim.compiler.frontend.execute import execute
    from vtasim.compiler.frontend.models import DIGITS_QDQ
    from vtasim.compiler.frontend.models.digits import load_split
    from vtasim.compiler.frontend.network import Network
    _, _, xt, _ = load_split()
    net = Network.from_onnx(DIGITS_QDQ, CFG, skip_first_conv=False)
    nodes = [n for n in net.graph.nodes if n.target == "vta"]
    seen = {n.name: [] for n in nodes}
    first = {}
    for x in xt[:20]:
        vals = {}
        execute(net.graph, net.regions, {net.input_name: x[None]}, engine="reference", values_out=vals)
        for n in nodes:
            seen[n.name].append(vals[n.outputs[0]])
            first.setdefault(n.name, vals[n.inputs[0]])
    out = []
    for n in nodes:
        a = n.attrs
        assert np.dtype(a["y_dtype"]) == np.int8, "the bounds below are those of an int8 output"
        out.append((n.name, net.regions[n.name].image(first[n.name]), np.concatenate(seen[n.name]),
                    act_limits(a["act"], a["y_scale"], a["y_zp"], a["y_dtype"])))
    return out


@lru_cache(maxsize=None)
def gemm_bound(gemms: int = 16, repeat: int = 256):
    from vtasim.sim.programs.synthetic import gemm_bound_image
    image = gemm_bound_image(CFG, gemms=gemms, repeat=repeat)
    return image, np.frombuffer(image.expected["y"], np.int8), (-128, 127)


def families(reduce: int = 1, gemm_bound_size=(16, 256), tutorials=None) -> dict:
    """family member name -> a function building its image (layers reduced by ``reduce``)."""
    out = {n: (lambda n=n: catalogue(n, reduce)[0]) for n in LAYERS + ["dense.16x64x64", "vadd.2048"]}
    out.update({f"tutorial.{s}": (lambda s=s: tutorial(s)[0]) for s in (tutorials or TUTORIALS)})
    out.update({f"digits.{k}": (lambda k=k: digits_regions()[k][1]) for k in range(3)})
    out["gemm-bound"] = lambda: gemm_bound(*gemm_bound_size)[0]
    return out
