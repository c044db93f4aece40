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

import numpy as np
import pytest

import data_checks as dc
from data_families import CATALOGUE, CFG, TUTORIALS, catalogue, digits_regions, families, gemm_bound, tutorial
from vtasim.hw.config import MEM_WGT
from vtasim.sim.engines import check_result


def _engines():
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.functional import run_image as functional_run
    return {"functional": functional_run, "cycle": cycle_run}


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
    from vtasim.compiler.ops import compile_workload
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

FAMILIES = families()


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


ALU_ONLY = [n for n in FAMILIES if n == "vadd.2048" or n.startswith("tutorial.vta_get_started")]


@pytest.mark.parametrize("family", ALU_ONLY)
def test_the_alu_only_families_have_no_gemm(family):
    """The families the dropped-product test leaves out really load no weights (no GEMM to break)."""
    assert not dc.has_load(FAMILIES[family](), MEM_WGT)


@pytest.mark.parametrize("family", [n for n in FAMILIES if n not in ALU_ONLY])
def test_an_engine_that_drops_one_product_is_caught(family):
    from vtasim.sim.functional import run_image
    image = FAMILIES[family]()
    assert dc.has_load(image, MEM_WGT), f"{family}: no weights loaded (an ALU-only stream belongs in ALU_ONLY)"
    with dc.drop_product():                  # a broken multiplier in the numpy executor's GEMM
        bad = run_image(image, executor="numpy")
    assert check_result(image, bad), f"{family}: a GEMM without one product still matches the reference"
