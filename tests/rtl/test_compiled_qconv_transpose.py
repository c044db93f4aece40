"""A quantised transposed conv with a non-zero input zero point (DCGAN's upsampling layer, reduced) on the
RTL, both zero-point corrections, with the fixed-point and with the exact requantisation plan:
identical bytes, retire records and cycles to the cycle engine on Verilator; each image carries the
numpy evaluation of its tensor expressions, which the RTL's output bytes must equal, and the unpacked
output equals the layer's numpy reference (with the exact plan: the host's integer execution, the
accumulator of ``qnn.qconv2d_transpose`` requantised by the exact integer rule, where the fixed-point
plan is off by one LSB on the same data)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("path", ["fixed", "exact"])
@pytest.mark.parametrize("correction", ["phase", "position"])
def test_compiled_qconv_transpose_matches_on_the_rtl(correction, path, cfg, verilator_build, same_run):
    from vtasim.compiler import qnn
    from vtasim.compiler.ops.conv2d_transpose import unpack_transpose_output
    from vtasim.compiler.ops.qconv_transpose import build_qconv_transpose
    from vtasim.sim.cycle import run_image
    from vtasim.sim.engines import check_result
    from vtasim.sim.rtl import run_images
    rng = np.random.default_rng(5)
    c, o, za = 2 * cfg.block_in, cfg.block_out, -128
    w = rng.integers(-24, 25, (c, o, 4, 4)).astype(np.int8)
    b = rng.integers(-2000, 2000, o).astype(np.int32)
    x = rng.integers(-128, 128, (cfg.batch, c, 3, 3)).astype(np.int8)
    bound = qnn.conv_transpose_acc_bound(w, b, za, 2)
    plan = qnn.plan_requant(0.004, bound, 0, -128, 127, cfg, path=path)
    if path == "exact":
        acc = qnn.qconv2d_transpose(x, w, za, 0, 2, 1).astype(np.int64) + b.reshape(1, -1, 1, 1)
        host = plan.exact(acc, axis=1)
        fixed = qnn.plan_requant(0.004, bound, 0, -128, 127, cfg, path="fixed")
        assert plan.stages and not np.array_equal(fixed.apply(acc, axis=1), host)
    layer = build_qconv_transpose(cfg, x.shape, w, b, 2, 1, za, plan, correction=correction)
    image = layer.image(x)
    assert image.expected, "the compiled image carries its numpy reference"
    (result,) = run_images([image], sim="verilator", errors="return")
    assert check_result(image, result) == []
    same_run(image, run_image(image), result)
    raw = np.frombuffer(result.outputs[layer.output.name], np.int8).reshape(layer.output.shape)
    want = layer.reference(x)
    assert np.array_equal(unpack_transpose_output(raw)[:x.shape[0], :o], want)
    if path == "exact":
        assert np.array_equal(want, host)
    assert 0.9 <= ((want > -128) & (want < 127)).mean()
