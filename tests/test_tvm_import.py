"""Import of TVM artefacts: raw instruction buffer + DRAM dumps, and DUMP_INSN text."""


import pytest

from vtasim.hw.config import MEM_ACC_8BIT, load_config
from vtasim.hw.disasm import dump
from vtasim.hw.isa import ALU_SHR, OP_ALU, OP_LOAD, Insn, decode_stream
from vtasim.sim.cli import main
from vtasim.sim.errors import ImageError
from vtasim.sim.functional import run_image
from vtasim.sim.image import MemoryImage, Output
from vtasim.sim.programs.tvm_import import TvmImportWarning, from_buffers, from_dump_text, parse_output, parse_placement
from vtasim.sim.programs.unit import UNIT_PROGRAMS

CFG = load_config()

# A stream as TVM's runtime prints it (hardware spec 5.8): no immediates, no use_imm for shr,
# nothing after "LOAD " for ACC_8BIT, FINISH without a dep line.
TVM_TEXT = """There are 5 instructions
INSTRUCTION 0: LOAD UOP
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0
\tDRAM: 0x00000400, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=1, stride=1, pad=[0, 0]
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 1: LOAD \tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0
\tDRAM: 0x00000200, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=4, stride=4, pad=[0, 0]
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 2: ALU - shr
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1
\treset_out: 0
\trange (0, 1)
\touter loop - iter: 1, dst: 0, src: 0
\tinner loop - iter: 4, dst: 1, src: 1
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 3: ALU - max imm
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0
\treset_out: 0
\trange (0, 1)
\touter loop - iter: 1, dst: 0, src: 0
\tinner loop - iter: 4, dst: 1, src: 1
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 4: FINISH
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
"""


def test_tvm_text_import_warns_for_missing_fields():
    with pytest.warns(TvmImportWarning) as rec:
        insns = from_dump_text(CFG, TVM_TEXT)
    msgs = [str(w.message) for w in rec]
    assert any("lacks field imm for 2 instruction(s) (2, 3)" in m for m in msgs)
    assert any("lacks field use_imm for 1 instruction(s) (2)" in m for m in msgs)
    assert any("lacks field memory_type for 1 instruction(s) (1)" in m and "ACC_8BIT" in m for m in msgs)
    assert insns[1] == Insn(opcode=OP_LOAD, memory_type=MEM_ACC_8BIT, dram_base=0x200, y_size=1, x_size=4,
                            x_stride=4)
    assert insns[2].opcode == OP_ALU and insns[2].alu_opcode == ALU_SHR and insns[2].imm == 0
    assert insns[3].use_imm == 1 and insns[3].imm == 0
    assert len(insns) == 5


def test_tvm_text_of_a_unit_program():
    """Our dump with the TVM-omitted lines removed imports to the same stream except the immediates."""
    img = UNIT_PROGRAMS["relu"](CFG)
    insns = decode_stream(CFG, img.insn_bytes())
    tvm_text = "\n".join(l for l in dump(insns).splitlines() if not l.startswith("\timm:"))
    with pytest.warns(TvmImportWarning, match="lacks field imm"):
        got = from_dump_text(CFG, "compiler chatter\n" + tvm_text + "\nmore output\n")
    for a, b in zip(got, insns):
        b.imm = 0 if b.opcode == OP_ALU else b.imm
        assert a == b


def test_raw_buffers_reproduce_the_run():
    img = UNIT_PROGRAMS["gemm_smt"](CFG)
    segs = [(s.data, s.addr) for s in img.segments if s.addr != img.insn_addr]
    back = from_buffers(CFG, img.insn_bytes(), img.insn_addr, segs, img.outputs)
    assert run_image(back).outputs == run_image(img).outputs


def test_raw_buffer_errors():
    with pytest.raises(ImageError, match="not a multiple of 16.*4 trailing"):
        from_buffers(CFG, b"\0" * 20, 0)
    with pytest.raises(Exception, match="instruction 1: field opcode = 7"):
        from_buffers(CFG, (3).to_bytes(16, "little") + (7).to_bytes(16, "little"), 0)
    with pytest.raises(ImageError, match="FILE@ADDRESS"):
        parse_placement("dram.bin")
    with pytest.raises(ImageError, match="not a number"):
        parse_placement("dram.bin@zz")
    with pytest.raises(ImageError, match="plain name"):
        parse_output("../x@0x100:16")
    assert parse_output("y@0x100:16") == Output("y", 256, 16)


def test_cli_import_raw(tmp_path, capsys):
    img = UNIT_PROGRAMS["relu"](CFG)
    (tmp_path / "insn.bin").write_bytes(img.insn_bytes())
    args = ["import-tvm", "--insn", str(tmp_path / "insn.bin"), "--out", str(tmp_path / "img"),
            "--insn-addr", hex(img.insn_addr)]
    for i, s in enumerate(img.segments):
        if s.addr != img.insn_addr:
            (tmp_path / f"d{i}.bin").write_bytes(s.data)
            args += ["--dram", f"{tmp_path / f'd{i}.bin'}@{s.addr:#x}"]
    o = img.outputs[0]
    args += ["--output", f"{o.name}@{o.addr:#x}:{o.nbytes}"]
    assert main(args) == 0
    back = MemoryImage.load(tmp_path / "img")
    assert run_image(back).outputs == {o.name: img.expected[o.name]}


def test_cli_import_text_warns(tmp_path, capsys):
    (tmp_path / "dump.txt").write_text(TVM_TEXT)
    assert main(["import-tvm", "--dump", str(tmp_path / "dump.txt"), "--out", str(tmp_path / "img")]) == 0
    err = capsys.readouterr().err
    assert "vtasim: warning: TVM dump lacks field imm" in err
    assert MemoryImage.load(tmp_path / "img").insn_count == 5


def test_cli_import_errors(tmp_path, capsys):
    (tmp_path / "bad.bin").write_bytes(b"\0" * 24)
    assert main(["import-tvm", "--insn", str(tmp_path / "bad.bin"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a multiple of 16" in err[0]
    assert not (tmp_path / "o").exists()
