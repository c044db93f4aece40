"""The RTL's bit-exact runs check something: on the reduced workload families (ResNet-18 C2-C11 at
reduce=2, a dense layer, the tutorials, the digits regions, a short GEMM-bound stream) one bit of one
weight, input element or uop moves the Verilog's output bytes, the unmutated runs equal the cycle
engine, and an RTL whose GEMM array drops one product fails the numpy reference.

Every image (base and mutants) runs in one Verilator process on the session's shared build; CI runs a
subset (a 1x1 and a 3x3 stride-2 layer, the dense layer, a tutorial, a digits region, the GEMM-bound
stream), ``slow`` every family member."""

from __future__ import annotations

import shutil

import pytest

import data_checks as dc
from data_families import families
from vtasim.sim.engines import check_result

pytestmark = pytest.mark.rtl

FAMILIES = families(reduce=2, gemm_bound_size=(2, 64))
CI_SET = ["resnet18.C4", "resnet18.C9", "dense.16x64x64", "tutorial.matrix_multiply", "digits.1", "gemm-bound"]
# The product of batch row 0, output lane 0 and input lane 0 is never added (the functional mutant of
# data_checks.drop_product, in the Verilog).
GEMM_CORE = "vta_gemm_core.v"
DROP_ONE = ("          dot = dot + a * w;",
            "          if (b != 0 || o != 0 || k != 0) dot = dot + a * w;")


@pytest.mark.parametrize("members", [pytest.param(CI_SET, id="ci"),
                                     pytest.param(list(FAMILIES), id="all", marks=pytest.mark.slow)])
def test_one_bit_moves_the_rtl_output(cfg, verilator_build, same_run, members):
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.rtl import run_images
    batch, where = [], []
    for name in members:
        image = FAMILIES[name]()
        for what, img in {"base": image, **dc.mutants(image)}.items():
            batch.append(img)
            where.append((name, what))
    results = run_images(batch, sim="verilator", errors="return")
    base, failures = {}, []
    for (name, what), img, res in zip(where, batch, results):
        if isinstance(res, BaseException):
            failures.append(f"{name} {what}: {res}")
        elif what == "base":
            base[name] = res
            try:
                same_run(img, cycle_run(img), res)
            except AssertionError as exc:
                failures.append(f"{name}: RTL differs from the cycle engine: {exc}")
        elif name in base and not dc.outputs_move(base[name], res):
            failures.append(f"{name}: flipping one {what} left the RTL output unchanged")
    assert not failures, "\n".join(failures)


def test_rtl_that_drops_one_product_is_caught(tmp_path, monkeypatch):
    from vtasim.sim.rtl import run_images
    from vtasim.sim.rtl.runner import default_rtl_dir
    monkeypatch.setenv("VTASIM_BUILD_DIR", str(tmp_path / "builds"))      # the mutant's build stays private
    rtl = tmp_path / "rtl"
    shutil.copytree(default_rtl_dir(), rtl)
    path = rtl / GEMM_CORE
    text = path.read_text()
    assert text.count(DROP_ONE[0]) == 1, f"mutation site not found once in {GEMM_CORE}: update the test"
    path.write_text(text.replace(*DROP_ONE))
    images = [FAMILIES["dense.16x64x64"]()]              # Icarus is slow: one small layer
    results = run_images(images, sim="icarus", rtl_dir=rtl, errors="return")
    for image, res in zip(images, results):
        assert not isinstance(res, BaseException), res
        assert check_result(image, res), "an RTL GEMM without one product still matches the reference"
