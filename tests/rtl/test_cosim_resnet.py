"""ResNet-18 C2-C11 compiled from their DSL schedules (TopHub knobs): RTL vs cycle engine on Verilator,
identical bytes (equal to the numpy reference of the tensor expressions) and identical retire
records.  CI runs the spatially reduced layers (reduce=4, TopHub adapted) in one simulator process;
``slow`` runs the full layers."""

from __future__ import annotations

import pytest

from vtasim.compiler.tuning.workloads import RESNET18

pytestmark = pytest.mark.rtl
LAYERS = list(RESNET18)


def _runs(cfg, reduce):
    from vtasim.compiler.ops import compile_workload
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.rtl import run_images
    images = {name: compile_workload(name, cfg, reduce=reduce).image for name in LAYERS}
    rtl = run_images([images[n] for n in LAYERS], sim="verilator", errors="return")
    return {n: (images[n], cycle_run(images[n]), r) for n, r in zip(LAYERS, rtl)}


def _check_all(runs, same_run):
    """Every layer checked, every failing layer named (one test per batch, so pytest-xdist does
    not run the batch once per worker)."""
    failures = []
    for name, (image, model, rtl) in runs.items():
        try:
            assert image.expected, "the workload carries its numpy reference"
            same_run(image, model, rtl)
        except Exception as exc:     # noqa: BLE001 - collected (assertions included), then reported
            failures.append(f"{name}: {exc}")
    assert not failures, f"{len(failures)} of {len(runs)} layers differ:\n" + "\n".join(failures)


def test_resnet_reduced(cfg, verilator_build, same_run):
    _check_all(_runs(cfg, 4), same_run)


@pytest.mark.slow
def test_resnet_full(cfg, verilator_build, same_run):
    _check_all(_runs(cfg, 1), same_run)
