"""Every kind of bad input gives exit code 2 and one line naming the instruction, field and limit."""

import json

import pytest

from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_OUT, MEM_UOP, default_config_path, load_config
from vtasim.hw.isa import ALU_ADD, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, Insn, encode
from vtasim.sim.cli import main
from vtasim.sim.image import MemoryImage, Segment

CFG = load_config()
DATA_ADDR, INSN_ADDR = 0x1000, 0x2000


def image(insns, raw_patch=None, data=b"\0" * 4096):
    raw = [bytearray(encode(CFG, i)) for i in insns]
    if raw_patch:
        raw_patch(raw)
    return MemoryImage(CFG, INSN_ADDR, len(raw), [Segment(DATA_ADDR, data), Segment(INSN_ADDR, b"".join(raw))])


def run_cli(tmp_path, capsys, img):
    img.save(tmp_path / "img")
    rc = main(["run", str(tmp_path / "img")])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


FIN = Insn(opcode=OP_FINISH)


CASES = {
    "unknown opcode": ([Insn(opcode=OP_FINISH), FIN], lambda raw: raw[0].__setitem__(0, 6),
                       r"instruction 0: field opcode = 6 is not a VTA opcode"),
    "unknown memory type": ([Insn(opcode=OP_LOAD, memory_type=7, x_size=1, y_size=1, x_stride=1), FIN], None,
                            r"instruction 0: LOAD field memory_type = 7 is not a loadable type"),
    "store of acc type": ([Insn(opcode=OP_STORE, memory_type=MEM_ACC, x_size=1, y_size=1, x_stride=1), FIN], None,
                          r"instruction 0: STORE field memory_type = 3 must be 4 OUT"),
    "unknown alu opcode": ([Insn(opcode=OP_ALU, alu_opcode=6, uop_end=1, iter_in=1, iter_out=1), FIN], None,
                           r"instruction 0: field alu_opcode = 6 is not an ALU opcode"),
    "sram out of range": ([Insn(opcode=OP_LOAD, memory_type=MEM_INP, sram_base=2040, x_size=4, y_size=3,
                                x_stride=4, push_next=1), FIN], None,
                          r"instruction 0: LOAD INP writes SRAM elements \[2040, 2052\).*depth 2048"),
    "sram out of range by pads": ([Insn(opcode=OP_LOAD, memory_type=MEM_ACC, sram_base=2040, x_size=1, y_size=1,
                                        x_stride=1, y_pad_1=15), FIN], None,
                                  r"instruction 0: LOAD ACC writes SRAM elements \[2040, 2056\).*depth 2048"),
    "store sram out of range": ([Insn(opcode=OP_STORE, memory_type=MEM_OUT, sram_base=2047, x_size=2, y_size=1,
                                      x_stride=2), FIN], None,
                                r"instruction 0: STORE reads SRAM elements \[2047, 2049\).*depth 2048"),
    "dram out of range": ([Insn(opcode=OP_LOAD, memory_type=MEM_ACC, dram_base=0x2000 // 64 + 100, x_size=1,
                                y_size=1, x_stride=1), FIN], None,
                          r"instruction 0: LOAD ACC touches DRAM bytes up to .* beyond the image DRAM of 0x3000"),
    "dram stride out of range": ([Insn(opcode=OP_STORE, memory_type=MEM_OUT, dram_base=0x100, x_size=1, y_size=3,
                                       x_stride=60000), FIN], None,
                                 r"instruction 0: STORE OUT touches DRAM bytes up to"),
    "pads on store": ([Insn(opcode=OP_STORE, memory_type=MEM_OUT, dram_base=0x100, x_size=1, y_size=1, x_stride=1,
                            x_pad_1=2), FIN], None,
                      r"instruction 0: STORE field x_pad_1 = 2 must be 0"),
    "load with prev flag": ([Insn(opcode=OP_LOAD, memory_type=MEM_INP, pop_prev=1), FIN], None,
                            r"instruction 0: load-module instruction has pop_prev = 1"),
    "store with next flag": ([Insn(opcode=OP_STORE, memory_type=MEM_UOP, push_next=1), FIN], None,
                             r"instruction 0: STORE has push_next = 1"),
    "uop range": ([Insn(opcode=OP_GEMM, uop_bgn=8000, uop_end=8200, iter_out=1, iter_in=1), FIN], None,
                  r"instruction 0: GEMM field uop_end = 8200 is beyond the uop buffer depth 8192"),
    "no finish": ([Insn(opcode=OP_LOAD, memory_type=MEM_UOP)], None, r"instruction 0: no FINISH"),
    "finish not last": ([FIN, Insn(opcode=OP_LOAD, memory_type=MEM_UOP), FIN], None,
                        r"instruction 0: FINISH at 0 is not the last instruction"),
    "unbalanced tokens": ([Insn(opcode=OP_LOAD, memory_type=MEM_UOP, pop_next=1), FIN], None,
                          r"deadlock before FINISH: compute insn 0 needs s2g; tokens l2g=0, g2l=0, s2g=0, g2s=0"),
    "run-time index overflow": ([Insn(opcode=OP_ALU, alu_opcode=ALU_ADD, uop_end=1, iter_out=1, iter_in=3000,
                                      dst_factor_in=1, src_factor_in=0), FIN], None,
                                r"instruction 0: ALU dst index 2048 .* beyond the buffer depth 2048"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_program(tmp_path, capsys, case):
    insns, patch, want = CASES[case]
    rc, err = run_cli(tmp_path, capsys, image(insns, patch))
    assert rc == 2
    assert len(err) == 1, err
    assert err[0].startswith("vtasim: error: ")
    import re
    assert re.search(want, err[0]), err[0]


def test_lowest_index_wins(tmp_path, capsys):
    insns = [Insn(opcode=OP_LOAD, memory_type=MEM_UOP),
             Insn(opcode=OP_STORE, memory_type=MEM_OUT, x_size=1, y_size=1, x_stride=1, y_pad_0=1),
             Insn(opcode=OP_LOAD, memory_type=6), FIN]
    rc, err = run_cli(tmp_path, capsys, image(insns))
    assert rc == 2 and "instruction 1: STORE field y_pad_0 = 1" in err[0]


@pytest.mark.parametrize("mutate,want", [
    (lambda d: d.pop("LOG_BLOCK"), "missing key 'LOG_BLOCK'"),
    (lambda d: d.update(LOG_BATCH="0"), "'LOG_BATCH' = '0' must be an integer"),
    (lambda d: d.update(LOG_ACC_BUFF_SIZE=18), "overflow the ISA"),
    (lambda d: d.update(BURST_BEATS=3), "'BURST_BEATS' = 3 must be a power of two"),
])
def test_bad_config_cli(tmp_path, capsys, mutate, want):
    d = json.loads(default_config_path().read_text())
    mutate(d)
    (tmp_path / "c.json").write_text(json.dumps(d))
    assert main(["config", "--config", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and want in err[0]


def test_truncated_and_misaligned_instruction_files(tmp_path, capsys):
    img = image([FIN])
    img.save(tmp_path / "img")
    doc = json.loads((tmp_path / "img" / "image.json").read_text())
    seg = [s for s in doc["segments"] if s["addr"] == INSN_ADDR][0]
    (tmp_path / "img" / seg["file"]).write_bytes(b"\3" + b"\0" * 10)     # truncated: 11 of 16 bytes
    assert main(["run", str(tmp_path / "img")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "insn.count = 1 needs 16 bytes" in err[0]
    doc["insn"]["addr"] = INSN_ADDR + 4
    (tmp_path / "img" / "image.json").write_text(json.dumps(doc))
    assert main(["run", str(tmp_path / "img")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a multiple of 16" in err[0]


def test_hostile_image_via_cli(tmp_path, capsys):
    img = image([FIN])
    img.save(tmp_path / "img")
    doc = json.loads((tmp_path / "img" / "image.json").read_text())
    doc["segments"][0]["file"] = "../../etc/passwd"
    (tmp_path / "img" / "image.json").write_text(json.dumps(doc))
    assert main(["run", str(tmp_path / "img")]) == 2
    assert "escapes the image directory" in capsys.readouterr().err


def test_deadlock_report_with_verbose(tmp_path, capsys):
    img = image([Insn(opcode=OP_LOAD, memory_type=MEM_INP, pop_next=1), Insn(opcode=OP_FINISH, pop_prev=1)])
    img.save(tmp_path / "img")
    assert main(["-v", "run", str(tmp_path / "img")]) == 2
    err = capsys.readouterr().err
    assert "load insn 0 needs g2l" in err.splitlines()[0]
    assert "load: instruction 0 `NOP-MEMORY-STAGE [pop_next]` waits for token g2l" in err
