"""Operators compiled from DSL schedules, run on the functional and cycle engines.

References: the image's expected outputs come from evaluating the tensor expressions in numpy
(``vtasim.compiler.dsl.reference``); the tests also recompute the ResNet layers with an independent im2col
product here, and compare ``gemm_counter`` with the ideal count of spec 7.1 (a formula over the
layer's shape), never with anything the compiled program reports about itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.compiler.errors import CompileError
from vtasim.compiler.tuning.knobs import fallback_knobs, tophub_knobs
from vtasim.compiler.ops import compile_workload
from vtasim.compiler.ops.layout import unpack_nchw
from vtasim.compiler.tuning.workloads import RESNET18, parse_workload
from vtasim.hw.config import MEM_ACC, load_config
from vtasim.hw.isa import OP_LOAD, OP_STORE, encode
from vtasim.sim.errors import SimError
from vtasim.sim.image import MemoryImage, Segment
from vtasim.sim.program import load_program

PRESETS = ["config/presets/1x16x16.json", "config/presets/2x16x16.json", "config/presets/1x32x32.json",
           "config/presets/1x8x8.json"]


def _run_both(image):
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.engines import check_result
    from vtasim.sim.functional import run_image as functional_run
    results = {}
    for name, run in (("functional", functional_run), ("cycle", cycle_run)):
        res = run(image)
        assert check_result(image, res) == [], name
        results[name] = res
    assert results["functional"].counters == results["cycle"].counters
    return results


def _conv_reference(wl, data, kernel, bias, shift):
    """NCHW conv (im2col in int64) -> wrap to int32 -> >> shift -> + bias -> clip [0, 127] -> int8."""
    x = unpack_nchw(data).astype(np.int64)
    o, i, kh, kw, bo, bi = kernel.shape
    w = kernel.transpose(0, 4, 1, 5, 2, 3).reshape(o * bo, i * bi, kh, kw).astype(np.int64)
    xp = np.pad(x, ((0, 0), (0, 0), (wl.pad, wl.pad), (wl.pad, wl.pad)))
    cols = np.stack([xp[:, :, ky:ky + wl.stride * wl.oh:wl.stride, kx:kx + wl.stride * wl.ow:wl.stride]
                     for ky in range(wl.k) for kx in range(wl.k)], axis=2)      # n, c, k*k, oh, ow
    acc = np.einsum("ncqhw,ocq->nohw", cols, w.reshape(o * bo, i * bi, kh * kw))
    acc = ((acc + (1 << 31)) % (1 << 32) - (1 << 31)) >> shift
    b = bias[0, :, 0, 0, 0, :].reshape(-1).astype(np.int64)
    return np.clip(acc + b[None, :, None, None], 0, 127).astype(np.int8)


def _sram_extents_fit(image):
    """LOADs/STOREs stay inside their SRAM (an independent recount of what load_program checks)."""
    prog = load_program(image)
    cfg = image.cfg
    f = prog.fields
    for k in range(prog.count):
        op, x = f["opcode"][k], f["x_size"][k]
        if op not in (OP_LOAD, OP_STORE) or x == 0:
            continue
        rows = f["y_size"][k] + f["y_pad_0"][k] + f["y_pad_1"][k]
        cols = x + f["x_pad_0"][k] + f["x_pad_1"][k]
        mem = f["memory_type"][k]
        depth = cfg.sram_depth(MEM_ACC if op == OP_STORE else mem)
        assert f["sram_base"][k] + rows * cols <= depth, (k, mem)
    return prog


@pytest.mark.parametrize("layer", list(RESNET18))
def test_resnet_layer_tophub_full_size(default_cfg, layer):
    wl = parse_workload(layer, default_cfg)
    c = compile_workload(layer, default_cfg, knobs=tophub_knobs(wl, default_cfg))
    res = _run_both(c.image)
    assert res["cycle"].counters["gemm_counter"] == wl.ideal_gemm_uops(default_cfg)
    inputs = c.built.expected
    got = np.frombuffer(res["cycle"].outputs["res"], np.int8).reshape(c.built.func.args[-1].shape)
    assert np.array_equal(got, c.built.expected["res"]) and inputs
    _sram_extents_fit(c.image)
    assert c.stats["uop_kernels"] >= 1


# spatial reduction that keeps the fallback (one output pixel per tile) quick
_FALLBACK_REDUCE = {"C2": 8, "C3": 8, "C4": 8, "C5": 4, "C6": 4, "C7": 4, "C8": 4, "C9": 4, "C10": 4, "C11": 2}


@pytest.mark.parametrize("layer", list(RESNET18))
def test_resnet_layer_fallback_reduced(default_cfg, layer):
    reduce = _FALLBACK_REDUCE[layer.split(".")[1]]
    wl = parse_workload(layer, default_cfg, reduce=reduce)
    c = compile_workload(layer, default_cfg, knobs=fallback_knobs(wl, default_cfg), reduce=reduce, seed=3)
    res = _run_both(c.image)
    assert res["functional"].counters["gemm_counter"] == wl.ideal_gemm_uops(default_cfg)
    _sram_extents_fit(c.image)


def test_conv_reference_is_independent(default_cfg):
    """The numpy reference the image carries equals an im2col conv written here."""
    from vtasim.compiler.dsl.environment import Environment
    from vtasim.compiler.ops import workload_program, workload_shift
    from vtasim.compiler.dsl.reference import evaluate
    wl = parse_workload("resnet18.C3", default_cfg, reduce=4)
    with Environment(default_cfg) as env:
        sch, args, inputs = workload_program(env, wl, fallback_knobs(wl, default_cfg), seed=5)
        got = evaluate(args[-1], inputs)
    want = _conv_reference(wl, inputs["data"], inputs["kernel"], inputs["bias"], workload_shift(wl))
    assert np.array_equal(unpack_nchw(got), want)


@pytest.mark.parametrize("preset", PRESETS)
def test_dense_and_conv_on_every_preset(preset):
    cfg = load_config(preset)
    b, blk = cfg.batch, cfg.block_in
    dense = f"dense.{4 * b}x{4 * blk}x{3 * blk}"
    c = compile_workload(dense, cfg, knobs={"tile_ci": [2, 2], "tile_co": [3, 1]})
    res = _run_both(c.image)
    assert res["cycle"].counters["gemm_counter"] == parse_workload(dense, cfg).ideal_gemm_uops(cfg)
    conv = f"conv2d.6.6.{2 * blk}.{2 * blk}.3.1.1"
    wl = parse_workload(conv, cfg)
    c = compile_workload(conv, cfg, knobs={"tile_h": [2, 3], "tile_w": [1, 6], "tile_co": [1, 2],
                                           "oc_nthread": 1, "h_nthread": 2})
    res = _run_both(c.image)
    assert res["cycle"].counters["gemm_counter"] == wl.ideal_gemm_uops(cfg)
    stride2 = f"conv2d.8.8.{blk}.{2 * blk}.3.1.2"
    c = compile_workload(stride2, cfg, knobs={"tile_h": [1, 4], "tile_w": [1, 4], "tile_co": [2, 1],
                                              "oc_nthread": 2})
    _run_both(c.image)


def test_consecutive_uops_on_one_accumulator_row_are_refused(default_cfg):
    """Spec 3.5's rule: with no output axis between the kernel taps and the tensor axes, consecutive
    uops accumulate into the same row (a RAW hazard); the runtime's VerifyDep names it."""
    with pytest.raises(SimError, match="VerifyDep"):
        compile_workload("conv2d.8.8.16.32.3.1.2", default_cfg,
                         knobs={"tile_w": [1, 4], "tile_co": [2, 1], "oc_nthread": 2})


def test_gemm_and_vadd(default_cfg):
    c = compile_workload("gemm.32x64x48", default_cfg, knobs={"tile_b": [4, 8], "tile_ci": [1, 4]})
    res = _run_both(c.image)
    assert res["cycle"].counters["gemm_counter"] == 32 * 4 * 3
    c = compile_workload("vadd.2048", default_cfg)
    res = _run_both(c.image)
    assert res["cycle"].counters["alu_counter"] == 2048 // 16
    assert res["cycle"].counters["acc_load_nbytes"] == 2 * 2048 * 4


def test_alu_chain_every_step_against_numpy(default_cfg):
    from vtasim.compiler.lowering.build import build
    from vtasim.compiler.dsl.environment import Environment
    from vtasim.compiler.ops.alu import alu_chain, schedule_alu
    steps = [("add", 5), ("sub", "B"), ("mul", 3), ("shl", 2), ("shr", 3), ("min", "B"), ("max", -20),
             ("sub", 7), ("clip", -100, 100), ("relu",)]
    m = 8
    rng = np.random.default_rng(1)
    a = rng.integers(-1000, 1000, (1, m, 1, 16)).astype(np.int32)
    b = rng.integers(-100, 100, (1, m, 1, 16)).astype(np.int32)
    want = a.astype(np.int64) + 5 - b
    want = ((want * 3) << 2) >> 3
    want = np.maximum(np.minimum(want, b), -20) - 7
    want = np.maximum(np.minimum(want, 100), -100)
    want = np.maximum(want, 0).astype(np.int8)
    with Environment(default_cfg) as env:
        (pa, pb), out, copies, stages = alu_chain(env, m, steps)
        built = build(schedule_alu(env, m, out, copies, stages, tile=4), [pa, pb, out], {"A": a, "B": b})
    assert np.array_equal(built.expected["C"], want)
    res = _run_both(built.image)
    assert np.array_equal(np.frombuffer(res["cycle"].outputs["C"], np.int8).reshape(want.shape), want)
    # one ALU uop per element and stage: 13 stages (sub B = mul, add, mul; clip = min, max) x 8 elements
    assert res["cycle"].counters["alu_counter"] == 13 * m


def test_tile_larger_than_its_sram_is_named(default_cfg):
    knobs = {"tile_h": [1, 56], "tile_w": [1, 56], "tile_co": [1, 4]}
    with pytest.raises(CompileError, match=r"storage_rewrite.*exceeds local\.acc_buffer's 2048 elements"):
        compile_workload("resnet18.C2", default_cfg, knobs=knobs)


def test_padded_load_over_several_channel_blocks_is_an_unsupported_pattern(default_cfg):
    """Spec 4.2: a padded input tile can span only one input-channel block per DMA."""
    with pytest.raises(CompileError, match=r"inject_dma: dma_copy of `data_pad`: padding on loop"):
        compile_workload("resnet18.C2", default_cfg, knobs={"tile_ci": [1, 4]})


def test_immediate_out_of_range_is_named(default_cfg):
    from vtasim.compiler.lowering.build import build
    from vtasim.compiler.dsl.environment import Environment
    from vtasim.compiler.ops.alu import alu_chain, schedule_alu
    with Environment(default_cfg) as env:
        (pa,), out, copies, stages = alu_chain(env, 4, [("add", 70000)])
        with pytest.raises(CompileError, match="70000"):
            build(schedule_alu(env, 4, out, copies, stages), [pa, out], {"A": np.zeros((1, 4, 1, 16), np.int32)})


def test_compiled_image_round_trips_through_disasm(default_cfg, tmp_path):
    """disasm -> assemble -> encode gives the same bytes, and the re-assembled image replays identically."""
    from vtasim.hw.disasm import assemble, dump
    from vtasim.sim.cycle import run_image
    c = compile_workload("resnet18.C7", default_cfg, reduce=2, knobs={"tile_co": [8, 2], "tile_h": [1, 7], "oc_nthread": 2})
    saved = c.image.save(tmp_path / "img")
    image = MemoryImage.load(saved)
    prog = load_program(image)
    insns = [prog.insn(i) for i in range(prog.count)]
    again = assemble(dump(insns))
    raw = b"".join(encode(default_cfg, insn, i) for i, insn in enumerate(again))
    assert raw == image.insn_bytes()
    segs = [Segment(s.addr, raw) if s.addr == image.insn_addr else s for s in image.segments]
    rebuilt = MemoryImage(default_cfg, image.insn_addr, len(again), segs, image.outputs, image.expected)
    a, b = run_image(image), run_image(rebuilt)
    assert a.outputs == b.outputs and a.cycles == b.cycles and a.trace == b.trace
