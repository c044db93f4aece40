"""A multi-op VTA region (a residual block: two convolutions and the add, one image) on the RTL."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("fuse", [True, False], ids=["add-fused", "add-kernel"])
def test_region_image_identical_on_the_rtl(fuse, cfg, tmp_path, verilator_build, same_run):
    """The residual block's one image on Verilator (the add fused into the second convolution, or a
    kernel of its own): the same bytes, retire records and cycles as the cycle engine, and the image's
    numpy oracle."""
    from vtasim.compiler.frontend.execute import execute
    from vtasim.compiler.frontend.models import blocks
    from vtasim.compiler.frontend.network import Network
    from vtasim.compiler.frontend.region_chain import VtaChainRegion
    from vtasim.sim.cycle import run_image
    from vtasim.sim.rtl import run_images
    path = blocks.residual_block(tmp_path / "res.onnx", c=16, hw=8)
    net = Network.from_onnx(path, cfg, skip_first_conv=False, fuse_adds=fuse)
    (chain,) = {id(r): r for r in net.regions.values() if isinstance(r, VtaChainRegion)}.values()
    x = np.random.default_rng(11).random(net.graph.inputs[net.input_name][0], np.float32)
    vals = {}
    execute(net.graph, net.regions, {net.input_name: x}, engine="reference", values_out=vals)
    (image,) = chain.images({v: vals[v] for v in chain.inputs})
    assert image.expected, "the region image carries its numpy oracle"
    (result,) = run_images([image], sim="verilator", errors="return")
    same_run(image, run_image(image), result)
