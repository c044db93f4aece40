"""Compiled programs on the RTL: ResNet-18 C2 and C8 (spatially reduced, TopHub knobs adapted) and a
dense layer from ``vtasim compile``, RTL vs cycle engine on Verilator: identical bytes (equal to the
numpy reference of the tensor expressions) and identical retire records and cycle counts."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.rtl

WORKLOADS = (("resnet18.C2", 4), ("resnet18.C8", 4), ("dense.16x64x64", 1))


def test_compiled_workloads_match_on_the_rtl(cfg, verilator_build, same_run):
    from compiler.ops import compile_workload
    from sim.cycle import run_image
    from sim.rtl import run_images
    images = [compile_workload(name, cfg, reduce=reduce).image for name, reduce in WORKLOADS]
    rtl = run_images(images, sim="verilator", errors="return")
    failures = []
    for (name, _), image, result in zip(WORKLOADS, images, rtl):
        try:
            assert image.expected, "the compiled image carries its numpy reference"
            same_run(image, run_image(image), result)
        except Exception as exc:     # noqa: BLE001 - every workload is checked, then all failures named
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)
