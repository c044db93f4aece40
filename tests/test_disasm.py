"""Disassembly (TVM DUMP_INSN shape + the fields TVM omits) and the assembler that reads it back."""

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_UOP, load_config
from vtasim.hw.disasm import DisasmError, assemble, dump, insn_lines, one_line
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, Insn, decode_stream, layout
from vtasim.sim.programs.unit import UNIT_PROGRAMS

CFG = load_config()


def test_tvm_shape_of_each_kind():
    load = Insn(opcode=OP_LOAD, memory_type=MEM_INP, sram_base=0x12, dram_base=0x345, y_size=2, x_size=3,
                x_stride=7, y_pad_0=1, y_pad_1=0, x_pad_0=2, x_pad_1=1, push_next=1)
    assert insn_lines(load) == ["LOAD INP", "\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1",
                                "\tDRAM: 0x00000345, SRAM:0x0012", "\ty: size=2, pad=[1, 0]",
                                "\tx: size=3, stride=7, pad=[2, 1]"]
    gemm = Insn(opcode=OP_GEMM, reset_reg=1, uop_bgn=3, uop_end=9, iter_out=2, iter_in=5, dst_factor_out=1,
                dst_factor_in=2, src_factor_out=3, src_factor_in=4, wgt_factor_out=5, wgt_factor_in=6)
    assert insn_lines(gemm)[2:] == ["\treset_out: 1", "\trange (3, 9)",
                                    "\touter loop - iter: 2, wgt: 5, inp: 3, acc: 1",
                                    "\tinner loop - iter: 5, wgt: 6, inp: 4, acc: 2"]
    alu = Insn(opcode=OP_ALU, alu_opcode=1, use_imm=1, imm=-7, uop_end=1, iter_out=1, iter_in=4)
    assert insn_lines(alu)[0] == "ALU - max imm" and insn_lines(alu)[-1] == "\timm: -7, use_imm: 1"
    assert insn_lines(Insn(opcode=OP_ALU, alu_opcode=3, use_imm=1))[0] == "ALU - shr"
    assert insn_lines(Insn(opcode=OP_STORE, memory_type=MEM_OUT, x_size=1, y_size=1))[0] == "STORE:"
    assert insn_lines(Insn(opcode=OP_FINISH)) == ["FINISH"]
    assert insn_lines(Insn(opcode=OP_LOAD, memory_type=MEM_UOP, pop_prev=1))[0] == "NOP-COMPUTE-STAGE"
    assert insn_lines(Insn(opcode=OP_LOAD, memory_type=MEM_INP))[0] == "NOP-MEMORY-STAGE"
    assert insn_lines(Insn(opcode=OP_STORE, memory_type=MEM_UOP)) == [
        "NOP-STORE-STAGE", "\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0"]


def test_queue_counts():
    text = dump([Insn(opcode=OP_LOAD, memory_type=MEM_INP, push_next=1),
                 Insn(opcode=OP_LOAD, memory_type=MEM_UOP, pop_prev=1, pop_next=1), Insn(opcode=OP_FINISH)])
    lines = text.splitlines()
    assert lines[0] == "There are 3 instructions"
    assert lines[3:5] == ["\tl2g_queue = 1, g2l_queue = 0", "\ts2g_queue = 0, g2s_queue = 0"]
    assert lines[7:9] == ["\tl2g_queue = 0, g2l_queue = 0", "\ts2g_queue = -1, g2s_queue = 0"]


@pytest.mark.parametrize("name", ["gemm_smt", "relu", "hw_alu_shr_vec_u", "hw_blocked_gemm_vt2", "padded_load_all"])
def test_round_trip_unit_programs(name):
    img = UNIT_PROGRAMS[name](CFG)
    insns = decode_stream(CFG, img.insn_bytes())
    text = dump(insns)
    assert assemble(text) == insns
    assert dump(assemble(text)) == text


def _random(rng, opcode):
    f = {"opcode": opcode}
    for name, (_lo, width) in layout(CFG).of(opcode).items():
        if name != "opcode":
            f[name] = int(rng.integers(-(1 << (width - 1)), 1 << (width - 1))) if name == "imm" \
                else int(rng.integers(0, 1 << width))
    return Insn(**f)


def test_round_trip_random_fields():
    rng = np.random.default_rng(5)
    insns = [_random(rng, op) for _ in range(80) for op in (OP_LOAD, OP_STORE, OP_GEMM, OP_ALU, OP_FINISH)]
    # NOPs with leftover fields, every memory type and ALU opcode (including undefined ones)
    insns += [Insn(opcode=OP_LOAD, memory_type=t, sram_base=s) for t in range(8) for s in (0, 3)]
    insns += [Insn(opcode=OP_STORE, memory_type=t, x_size=x, y_size=1) for t in range(8) for x in (0, 2)]
    insns += [Insn(opcode=OP_ALU, alu_opcode=a, use_imm=u) for a in range(8) for u in (0, 1)]
    text = dump(insns)
    assert assemble(text) == insns
    assert dump(assemble(text)) == text


def test_uop_lines_are_skipped_by_the_assembler():
    img = UNIT_PROGRAMS["gemm"](CFG)
    insns = decode_stream(CFG, img.insn_bytes())
    text = dump(insns, uops=lambda insn: [(1, 2, 3)] * insn.x_size)
    assert "\t[0000]\t acc=1, inp=2, wgt=3" in text
    assert assemble(text) == insns


def test_assembler_errors():
    with pytest.raises(DisasmError, match="instruction 0: text lacks field"):
        assemble("INSTRUCTION 0: ALU - add imm\n\treset_out: 0\n")
    with pytest.raises(DisasmError, match="cannot read line"):
        assemble("INSTRUCTION 0: GEMM\n\tbogus line\n")
    with pytest.raises(DisasmError, match="out of order"):
        assemble("INSTRUCTION 1: FINISH\n")
    with pytest.raises(DisasmError, match="unknown ALU operation"):
        assemble("INSTRUCTION 0: ALU - div\n")
    with pytest.raises(DisasmError, match="unexpected text"):
        assemble("INSTRUCTION 0: FINISH\nrandom words\n")


def test_one_line():
    assert one_line(Insn(opcode=OP_LOAD, memory_type=MEM_UOP, pop_prev=1, pop_next=1)) == \
        "NOP-COMPUTE-STAGE [pop_prev pop_next]"
    assert one_line(Insn(opcode=OP_ALU, alu_opcode=3, use_imm=1, imm=-2, uop_end=1, iter_out=1, iter_in=3,
                         dst_factor_in=1)) == "ALU shr -2 uop=[0,1) out=1(dst 0, src 0) in=3(dst 1, src 0)"
    assert one_line(Insn(opcode=OP_LOAD, memory_type=MEM_ACC_8BIT, x_size=2, y_size=1, x_stride=2)).startswith(
        "LOAD ACC_8BIT")
