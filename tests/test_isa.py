"""ISA: bit positions pinned by hand for the default config (spec 2.4-2.9), random round trips."""

import numpy as np
import pytest

from vtasim.hw.config import (MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, PRESETS, load_config,
                       load_preset)
from vtasim.hw.isa import (INSN_FIELDS, MODULE_COMPUTE, MODULE_LOAD, MODULE_STORE, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD,
                    OP_STORE, Insn, IsaError, decode, decode_fields, decode_stream, decode_uop, decode_uops, encode,
                    encode_stream, encode_uop, encode_uops, layout, module_of)

CONFIGS = [*PRESETS, "legacy"]       # every shipped preset (1x16x16 is the default) and HW_VER 0.0.1


def cfg_of(name):
    return load_config().replace(HW_VER="0.0.1") if name == "legacy" else load_preset(name)


def word(insn, cfg=None):
    return int.from_bytes(encode(cfg or load_config(), insn), "little")


# ---- hand-written vectors: default config ----------------------------------------------------------
def test_header_bits():
    assert word(Insn(opcode=OP_FINISH)) == 3
    assert word(Insn(opcode=OP_FINISH, pop_prev=1)) == 3 | 1 << 3
    assert word(Insn(opcode=OP_FINISH, pop_next=1)) == 3 | 1 << 4
    assert word(Insn(opcode=OP_FINISH, push_prev=1)) == 3 | 1 << 5
    assert word(Insn(opcode=OP_FINISH, push_next=1)) == 3 | 1 << 6


def test_mem_layout_spec_2_4():
    i = Insn(opcode=OP_STORE, memory_type=MEM_OUT, sram_base=0xBEEF, dram_base=0xDEADBEEF, y_size=0x1234,
             x_size=0x5678, x_stride=0x9ABC, y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=0xF)
    want = (1 | 4 << 7 | 0xBEEF << 10 | 0xDEADBEEF << 26 | 0x1234 << 64 | 0x5678 << 80 | 0x9ABC << 96
            | 1 << 112 | 2 << 116 | 3 << 120 | 0xF << 124)
    assert word(i) == want
    # bytes 0-7 are word0, little-endian
    assert encode(load_config(), i)[:8] == (want & (2**64 - 1)).to_bytes(8, "little")


def test_gemm_layout_spec_2_5():
    f = dict(reset_reg=1, uop_bgn=0x1ABC, uop_end=0x2DEF, iter_out=0x3001, iter_in=0x2002,
             dst_factor_out=0x7FF, dst_factor_in=0x401, src_factor_out=0x402, src_factor_in=0x403,
             wgt_factor_out=0x3FF, wgt_factor_in=0x201)
    want = (2 | 1 << 7 | 0x1ABC << 8 | 0x2DEF << 21 | 0x3001 << 35 | 0x2002 << 49
            | 0x7FF << 64 | 0x401 << 75 | 0x402 << 86 | 0x403 << 97 | 0x3FF << 108 | 0x201 << 118)
    assert word(Insn(opcode=OP_GEMM, **f)) == want
    assert not want >> 63 & 1            # the hole at bit 63


@pytest.mark.parametrize("imm,bits", [(-3, 0xFFFD), (32767, 0x7FFF), (-32768, 0x8000), (5, 5)])
def test_alu_layout_spec_2_6(imm, bits):
    i = Insn(opcode=OP_ALU, uop_bgn=1, uop_end=2, iter_out=3, iter_in=4, dst_factor_out=5, dst_factor_in=6,
             src_factor_out=7, src_factor_in=8, alu_opcode=4, use_imm=1, imm=imm)
    want = (4 | 1 << 8 | 2 << 21 | 3 << 35 | 4 << 49 | 5 << 64 | 6 << 75 | 7 << 86 | 8 << 97
            | 4 << 108 | 1 << 111 | bits << 112)
    assert word(i) == want
    assert decode(load_config(), want.to_bytes(16, "little")).imm == imm


def test_uop_layout_spec_2_8():
    cfg = load_config()
    assert encode_uop(cfg, 0x7FF, 0x123, 0x3FF) == 0x7FF | 0x123 << 11 | 0x3FF << 22
    assert decode_uop(cfg, 0x7FF | 0x123 << 11 | 0x3FF << 22) == (0x7FF, 0x123, 0x3FF)
    assert encode_uops(cfg, [(1, 2, 3)]).tobytes() == (1 | 2 << 11 | 3 << 22).to_bytes(4, "little")


def test_legacy_layout_spec_2_9():
    cfg = cfg_of("legacy")
    m = Insn(opcode=OP_LOAD, memory_type=3, sram_base=0xFFFF, dram_base=0xFFFFFFFF, y_size=1)
    assert word(m, cfg) == 3 << 7 | 0xFFFF << 9 | 0xFFFFFFFF << 25 | 1 << 64
    a = Insn(opcode=OP_ALU, alu_opcode=3, use_imm=1, imm=-1)
    assert word(a, cfg) == 4 | 3 << 108 | 1 << 110 | 0xFFFF << 111
    with pytest.raises(IsaError, match="memory_type = 5 does not fit 2 bits"):
        encode(cfg, Insn(opcode=OP_LOAD, memory_type=MEM_ACC_8BIT))


def test_nop_flavours_and_modules():
    assert module_of(OP_LOAD, MEM_INP) == module_of(OP_LOAD, MEM_WGT) == MODULE_LOAD
    assert all(module_of(OP_LOAD, m) == MODULE_COMPUTE for m in (MEM_UOP, MEM_ACC, MEM_ACC_8BIT))
    assert module_of(OP_STORE, MEM_UOP) == MODULE_STORE
    assert all(module_of(op, 0) == MODULE_COMPUTE for op in (OP_GEMM, OP_ALU, OP_FINISH))
    from vtasim.sim.builder import ProgramBuilder
    b = ProgramBuilder(load_config())
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1)
    b.nop("store", push_prev=1)
    raw = [int.from_bytes(r, "little") for r in b._raw]
    assert raw == [0 | 1 << 6 | MEM_INP << 7, 0 | 1 << 3 | MEM_UOP << 7, 1 | 1 << 5 | MEM_UOP << 7]


# ---- errors ---------------------------------------------------------------------------------------
def test_field_overflow_errors():
    cfg = load_config()
    with pytest.raises(IsaError, match=r"instruction 7: field uop_bgn = 8192 does not fit 13 bits \[0, 8191\]"):
        encode(cfg, Insn(opcode=OP_GEMM, uop_bgn=8192), 7)
    with pytest.raises(IsaError, match=r"field imm = 32768 does not fit 16 signed bits"):
        encode(cfg, Insn(opcode=OP_ALU, imm=32768))
    with pytest.raises(IsaError, match="field imm = 3 is not part of a GEMM instruction"):
        encode(cfg, Insn(opcode=OP_GEMM, imm=3))
    with pytest.raises(IsaError, match="field x_size = -1 does not fit"):
        encode(cfg, Insn(opcode=OP_LOAD, x_size=-1))
    with pytest.raises(IsaError, match="opcode 6 is not one of"):
        encode(cfg, Insn(opcode=6))
    with pytest.raises(IsaError, match="instruction 2: field opcode = 5 is not a VTA opcode"):
        decode(cfg, (5).to_bytes(16, "little"), 2)
    with pytest.raises(IsaError, match="not a multiple of 16"):
        decode_stream(cfg, b"\0" * 40)
    with pytest.raises(IsaError, match="not a multiple of 16"):
        decode_fields(cfg, b"\0" * 17)
    with pytest.raises(IsaError, match="dst_idx = 2048 does not fit 11 bits"):
        encode_uop(cfg, 2048, 0, 0)


def test_undefined_bits_are_ignored():
    cfg = load_config()
    junk = (2**128 - 1) & ~7 | OP_FINISH          # FINISH with every other bit set
    i = decode(cfg, junk.to_bytes(16, "little"))
    assert i.opcode == OP_FINISH and i.pop_prev == 1 and i.x_size == 0
    m = decode(cfg, ((1 << 58) | (1 << 62) | OP_LOAD).to_bytes(16, "little"))    # the hole 58-63
    assert m == Insn(opcode=OP_LOAD)


# ---- random round trips ---------------------------------------------------------------------------
def random_insn(cfg, rng, opcode):
    lay = layout(cfg).of(opcode)
    f = {"opcode": opcode}
    for name, (_lo, width) in lay.items():
        if name == "opcode":
            continue
        if name == "imm":
            f[name] = int(rng.integers(-(1 << (width - 1)), 1 << (width - 1)))
        else:
            f[name] = int(rng.integers(0, 1 << width))
    return Insn(**f)


@pytest.mark.parametrize("cname", CONFIGS)
def test_random_round_trip(cname):
    cfg = cfg_of(cname)
    rng = np.random.default_rng(len(cname))
    insns = [random_insn(cfg, rng, op) for _ in range(60) for op in (OP_LOAD, OP_STORE, OP_GEMM, OP_ALU, OP_FINISH)]
    raw = encode_stream(cfg, insns)
    assert decode_stream(cfg, raw) == insns
    fields = decode_fields(cfg, raw)
    for name in INSN_FIELDS:
        assert fields[name].tolist() == [getattr(i, name) for i in insns], name
    # the same bytes held in an ndarray of another dtype decode the same (bytes, not elements)
    for arr in (np.frombuffer(raw, np.uint8), np.frombuffer(raw, "<u4"), np.frombuffer(raw, "<u8").reshape(-1, 2)):
        assert {k: v.tolist() for k, v in decode_fields(cfg, arr).items()} == \
            {k: v.tolist() for k, v in fields.items()}, arr.dtype
    lay = layout(cfg)
    for kind in ("mem", "gemm", "alu"):
        spans = sorted(getattr(lay, kind).values())
        for (lo, w), (lo2, _) in zip(spans, spans[1:]):
            assert lo + w <= lo2                            # no overlap
        assert all((lo < 64) == (lo + w <= 64) for lo, w in spans)   # no field straddles bit 64
        assert max(lo + w for lo, w in spans) <= 128
    uop = [(int(rng.integers(0, 1 << lay.uop["dst_idx"][1])), int(rng.integers(0, 1 << lay.uop["src_idx"][1])),
            int(rng.integers(0, 1 << lay.uop["wgt_idx"][1]))) for _ in range(100)]
    words = encode_uops(cfg, uop)
    assert [decode_uop(cfg, w) for w in words] == uop
    assert list(zip(*(a.tolist() for a in decode_uops(cfg, words)))) == uop
    assert sum(w for _, w in lay.uop.values()) <= 32


def test_legacy_store_memory_type():
    """0.0.1's 2-bit memory_type holds VTA_MEM_ID_OUT (4) as 0; 0.0.2 keeps 4."""
    from vtasim.hw.isa import store_mem_type
    assert store_mem_type(load_config()) == MEM_OUT
    assert store_mem_type(cfg_of("legacy")) == 0


def test_encode_fast_path_equals_the_checked_path():
    """encode's precomputed fast path gives the same bytes, and the same error, as the field-by-field
    checked encoder on random instructions (in and out of range, fields the opcode lacks, non-ints)."""
    import random

    from vtasim.hw.config import load_config
    from vtasim.hw.isa import INSN_FIELDS, Insn, IsaError, _encode_checked, encode
    cfg = load_config()
    rng = random.Random(5)
    for k in range(5000):
        fields = {f: rng.choice([0, 0, 1, rng.randint(-40000, 70000), 1 << 40]) for f in INSN_FIELDS if f != "opcode"}
        if k % 97 == 0:
            fields["x_size"] = True                     # a bool is not an integer field value
        insn = Insn(opcode=rng.choice([0, 1, 2, 3, 4, 7]), **fields)
        outcome = []
        for fn in (encode, _encode_checked):
            try:
                outcome.append(fn(cfg, insn, k))
            except IsaError as exc:
                outcome.append(str(exc))
        assert outcome[0] == outcome[1], insn
