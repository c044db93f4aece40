"""ResNet-18 C2-C11 conv2d streams (sim.workloads): RTL vs cycle engine on Verilator, identical
bytes (and equal to the numpy conv reference) and identical retire records.  CI runs the spatially
reduced layers (reduce=4) in one simulator process; ``slow`` runs the full layers."""

from __future__ import annotations

import pytest

from sim.workloads import RESNET18

pytestmark = pytest.mark.rtl
LAYERS = list(RESNET18)


def _runs(cfg, reduce):
    from hw.cosim import run_images
    from sim.cycle import run_image as cycle_run
    from sim.workloads import conv_image
    images = {name: conv_image(cfg, name, reduce=reduce) for name in LAYERS}
    rtl = run_images([images[n] for n in LAYERS], sim="verilator", errors="return")
    return {n: (images[n], cycle_run(images[n]), r) for n, r in zip(LAYERS, rtl)}


@pytest.fixture(scope="module")
def reduced(cfg, verilator_build):
    return _runs(cfg, 4)


@pytest.fixture(scope="module")
def full(cfg, verilator_build):
    return _runs(cfg, 1)


@pytest.mark.parametrize("layer", LAYERS)
def test_resnet_reduced(layer, reduced, same_run):
    image, model, rtl = reduced[layer]
    assert image.expected, "the workload carries its numpy reference"
    same_run(image, model, rtl)


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_resnet_full(layer, full, same_run):
    image, model, rtl = full[layer]
    same_run(image, model, rtl)
