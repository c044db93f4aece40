"""A compiled dense layer (``vtasim compile dense.16x64x64``) on the RTL: identical bytes, retire records
and cycles to the cycle engine on Verilator (the ResNet layers are in test_cosim_resnet.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.rtl


def test_compiled_dense_matches_on_the_rtl(cfg, verilator_build, same_run):
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim.cycle import run_image
    from vtasim.sim.rtl import run_images
    image = compile_workload("dense.16x64x64", cfg, knobs={"tile_ci": [2, 2], "tile_co": [2, 2]}).image
    assert image.expected, "the compiled image carries its numpy reference"
    (result,) = run_images([image], sim="verilator", errors="return")
    same_run(image, run_image(image), result)
