"""Every generator of compiled workloads draws data its outputs depend on, and the equivalence checks on
them can fail.

* Saturation: at most 10 % of the expected outputs at the upper clip bound, at least 25 % strictly
  between the bounds (the catalogue, the tutorials, the digits regions, the GEMM-bound stream).
* Sensitivity, on the functional and the cycle engine: one bit of one weight, of one input element
  and of one uop changes the output bytes (:mod:`data_checks` finds them through the LOADs).
* A functional engine whose GEMM drops one product (:func:`data_checks.drop_product`) fails the
  image's numpy reference.

The RTL versions (reduced layers) are in ``tests/rtl/test_data_visibility_rtl.py``.
"""

from __future__ import annotations

import contextlib
import io
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import data_checks as dc
from hw.config import MEM_WGT, load_config
from sim.engines import check_result

REPO = Path(__file__).resolve().parents[1]
CFG = load_config()
LAYERS = [f"resnet18.C{i}" for i in range(2, 12)]
CATALOGUE = LAYERS + ["dense.16x512x1008", "dense.16x64x64", "gemm.32x64x48", "vadd.2048", "conv2d.8.8.16.32.3.1.2"]
TUTORIALS = {"vta_get_started": [], "matrix_multiply": [], "matrix_multiply_opt": [],
             "convolution_opt": ["--reduce", "4"]}


def _engines():
    from sim.cycle import run_image as cycle_run
    from sim.functional import run_image as functional_run
    return {"functional": functional_run, "cycle": cycle_run}


@lru_cache(maxsize=None)
def catalogue(name: str, reduce: int = 1):
    """(image, expected output values, bounds) of a catalogue workload."""
    from compiler.ops import compile_workload
    c = compile_workload(name, CFG, reduce=reduce)
    return c.image, c.built.expected[c.built.func.args[-1].name], c.workload.out_bounds


@lru_cache(maxsize=None)
def tutorial(script: str):
    """(image, expected output values, bounds) of a tutorial run with its default seed."""
    import importlib.util
    import tempfile

    from sim.image import MemoryImage
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
    from compiler.frontend.composite import act_limits
    from compiler.frontend.execute import execute
    from compiler.frontend.models import DIGITS_QDQ
    from compiler.frontend.models.digits import load_split
    from compiler.frontend.network import Network
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
def gemm_bound():
    from sim.programs.synthetic import gemm_bound_image
    image = gemm_bound_image(CFG)
    return image, np.frombuffer(image.expected["y"], np.int8), (-128, 127)


def _assert_visible(values, bounds, what):
    at_hi, at_lo, between = dc.saturation(values, *bounds)
    assert at_hi <= dc.UPPER_LIMIT and between >= dc.BETWEEN_LIMIT, \
        f"{what}: {100 * at_hi:.1f} % at {bounds[1]}, {100 * at_lo:.1f} % at {bounds[0]}, {100 * between:.1f} % between"


# ---- saturation --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CATALOGUE)
def test_catalogue_outputs_are_not_at_the_bounds(name):
    _, values, bounds = catalogue(name)
    _assert_visible(values, bounds, name)


@pytest.mark.parametrize("seed", [1, 7])
def test_other_seeds_and_reduced_layers_stay_visible(seed):
    from compiler.ops import compile_workload
    for name in ("resnet18.C4", "resnet18.C11", "dense.16x256x64"):
        c = compile_workload(name, CFG, reduce=2, seed=seed)
        _assert_visible(c.built.expected["res"], c.workload.out_bounds, f"{name} seed {seed}")


@pytest.mark.parametrize("script", list(TUTORIALS))
def test_tutorial_outputs_are_not_at_the_bounds(script):
    _, values, bounds = tutorial(script)
    _assert_visible(values, bounds, script)


def test_digits_region_outputs_are_not_at_the_bounds():
    for name, _, values, bounds in digits_regions():
        _assert_visible(values, bounds, name)


def test_gemm_bound_outputs_are_not_constant():
    _, values, bounds = gemm_bound()
    _assert_visible(values, bounds, "gemm-bound")
    assert np.unique(values).size > 200


# ---- sensitivity ---------------------------------------------------------------------------------

def _families():
    out = [(n, lambda n=n: catalogue(n)[0]) for n in LAYERS + ["dense.16x64x64", "vadd.2048"]]
    out += [(f"tutorial.{s}", lambda s=s: tutorial(s)[0]) for s in TUTORIALS]
    out += [(f"digits.{k}", lambda k=k: digits_regions()[k][1]) for k in range(3)]
    out += [("gemm-bound", lambda: gemm_bound()[0])]
    return out


FAMILIES = dict(_families())


@pytest.mark.parametrize("engine", ["functional", "cycle"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_one_bit_of_data_or_program_moves_the_output(family, engine):
    image = FAMILIES[family]()
    run = _engines()[engine]
    base = run(image)
    assert check_result(image, base) == [], f"{family} on {engine} differs from its reference"
    muts = dc.mutants(image)
    assert {"input bit", "uop bit"} <= set(muts)
    for what, mutated in muts.items():
        assert dc.outputs_move(base, run(mutated)), f"{family} on {engine}: flipping one {what} left the output unchanged"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_an_engine_that_drops_one_product_is_caught(family):
    from sim.functional import run_image
    image = FAMILIES[family]()
    if not dc.has_load(image, MEM_WGT):
        pytest.skip("no GEMM: an ALU-only stream")
    with dc.drop_product():
        bad = run_image(image)
    assert check_result(image, bad), f"{family}: a GEMM without one product still matches the reference"
