"""A compiled grouped conv2d (two groups of whole blocks, reduced) and a depthwise layer on the RTL:
identical bytes, retire records and cycles to the cycle engine on Verilator; both images carry the
numpy evaluation of their tensor expressions, which the RTL's output bytes must equal."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.rtl


def test_compiled_group_conv_matches_on_the_rtl(cfg, verilator_build, same_run):
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim.cycle import run_image
    from vtasim.sim.engines import check_result
    from vtasim.sim.rtl import run_images
    images = [compile_workload(name, cfg).image
              for name in ("group_conv2d.4.4.64.64.3.1.1.2", "depthwise_conv2d.5.5.32.3.1.1")]
    results = run_images(images, sim="verilator", errors="return")
    for image, result in zip(images, results):
        assert image.expected, "the compiled image carries its numpy reference"
        assert check_result(image, result) == []
        same_run(image, run_image(image), result)
