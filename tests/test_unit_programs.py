"""Spec 7.1 / 7.2 programs: their references are not trivial, and they survive a save and reload.

Each program against its numpy reference and fsim counters, on every engine: ``test_engines.py``."""

import pytest

from vtasim.hw.config import load_config
from vtasim.hw.isa import decode_stream, encode_stream, OP_ALU
from vtasim.sim.functional import run_image
from vtasim.sim.image import MemoryImage, Segment
from vtasim.sim.programs.unit import UNIT_PROGRAMS, build

def test_references_are_not_trivial():
    # a reference of all zeros (or an all-equal output) could hide a model that writes nothing
    cfg = load_config()
    for name in UNIT_PROGRAMS:
        img = build(name, cfg)
        for data in img.expected.values():
            assert len(set(data)) > 2, name


def test_saved_image_runs_identically(tmp_path):
    cfg = load_config()
    img = build("gemm_smt", cfg)
    img.save(tmp_path / "g")
    back = MemoryImage.load(tmp_path / "g")
    assert back.expected_counters == img.expected_counters
    assert run_image(back).outputs == run_image(img).outputs


@pytest.mark.parametrize("name", ["relu", "hw_alu_shr_vec_c", "hw_blocked_gemm_vt2"])
def test_corrupted_program_is_detected(name):
    """Changing one ALU immediate or one input byte must change the output: the check is live."""
    cfg = load_config()
    img = build(name, cfg)
    insns = decode_stream(cfg, img.insn_bytes())
    alu = [i for i, x in enumerate(insns) if x.opcode == OP_ALU]
    segs = list(img.segments)
    if alu and name != "hw_blocked_gemm_vt2":
        insns[alu[0]].imm += 1 if insns[alu[0]].use_imm else 0
        insns[alu[0]].src_factor_in += 0 if insns[alu[0]].use_imm else 1
        raw = encode_stream(cfg, insns)
        segs = [Segment(s.addr, raw) if s.addr == img.insn_addr else s for s in segs]
    else:
        first = segs[0]
        data = bytearray(first.data)
        data[0] ^= 0x55
        segs[0] = Segment(first.addr, bytes(data))
    bad = MemoryImage(cfg, img.insn_addr, img.insn_count, segs, img.outputs, img.expected)
    r = run_image(bad)
    assert r.outputs["out"] != img.expected["out"]


@pytest.mark.parametrize("name", ["relu", "gemm_smt", "hw_alu_shr_vec_c", "alu_mul_vec", "hw_gemm_u"])
def test_legacy_isa(name):
    """HW_VER 0.0.1 (2-bit memory type / ALU opcode): same results; MUL cannot be encoded."""
    from vtasim.hw.isa import IsaError
    cfg = load_config().replace(HW_VER="0.0.1")
    if "mul" in name:
        with pytest.raises(IsaError, match="alu_opcode = 4 does not fit 2 bits"):
            build(name, cfg)
        return
    img = build(name, cfg)
    r = run_image(img)
    assert r.outputs == img.expected and r.counters == img.expected_counters
    assert img.insn_bytes() != build(name, load_config()).insn_bytes()    # the layout really differs
