"""The roofline of ``vtasim onnx --report`` names its points by layer, the names offset from the points."""

import pytest

from vtasim.compiler.frontend.execute import LayerRecord
from vtasim.compiler.frontend.report import roofline_figure, roofline_points
from vtasim.hw.config import load_config

matplotlib = pytest.importorskip("matplotlib")


def _records():
    return [LayerRecord("conv1", "qconv", "vta", (1, 64, 56, 56), macs=1_000_000, cycles=10_000, dram_bytes=50_000),
            LayerRecord("conv2", "qconv", "vta", (1, 64, 56, 56), macs=1_000_000, cycles=10_000, dram_bytes=50_000),
            LayerRecord("conv5", "qconv", "vta", (1, 128, 28, 28), macs=500_000, cycles=20_000, dram_bytes=40_000),
            LayerRecord("gemm0", "qdense", "vta", (1, 1000), macs=512_000, cycles=134_861, dram_bytes=521_704)]


def test_points_merge_layers_of_one_shape():
    pts = sorted(roofline_points(_records()))
    assert [names for _, _, names in pts] == [["gemm0"], ["conv5"], ["conv1", "conv2"]]
    assert pts[2][:2] == (1_000_000 / 50_000, 1_000_000 / 10_000)


def test_roofline_names_each_point_off_the_point():
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = roofline_figure(plt, _records(), load_config(), "net")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        notes = [c for c in ax.get_children() if isinstance(c, matplotlib.text.Annotation)]
        assert sorted(n.get_text() for n in notes) == ["conv1, conv2", "conv5", "gemm0"]
        for n in notes:
            px, py = ax.transData.transform(n.xy)
            assert not n.get_window_extent(renderer).contains(px, py), n.get_text()
        for n, (x, y, names) in zip(sorted(notes, key=lambda n: n.xy), sorted(roofline_points(_records()))):
            assert n.xy == (x, y) and n.get_text() == ", ".join(names)
        assert not ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    finally:
        plt.close(fig)
