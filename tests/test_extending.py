"""The recipe "A resized buffer" of ``docs/extending.md``, step by step.

A resized buffer is a config file with ``LOG_*_BUFF_SIZE`` rows of ``vtasim.hw.config.TVM_KEYS`` changed;
everything else derives from it.  The test writes such a file (the input buffer doubled, the weight
buffer halved to pay for it in the ISA),
checks what the recipe says derives from it (depth, ISA fields, RTL header and ``vta_top``
parameters, ``vtasim config``), and runs a program that uses the new upper half on the functional and
cycle engines against numpy; the same program is rejected on the default config, naming the field
and its limit; a buffer too large for the ISA is rejected naming the rule.  The RTL half
(``vtasim diff`` on the resized config) is ``tests/rtl/test_timing_conformance.py``'s machinery
applied to a new config: one build, run by the lead's full suite through ``tests/test_engines.py``
once the config is a preset.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_checks import vtasim
from vtasim.hw.config import MEM_INP, MEM_UOP, MEM_WGT, ConfigError, default_config_path, load_config
from vtasim.hw.isa import IsaError, layout
from vtasim.hw.rtl_params import header_defines
from vtasim.hw.rtl_report import expected_top
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.engines import check_result, run_engine


def resized(tmp_path, **keys):
    raw = json.loads(default_config_path().read_text())
    raw.update(keys)
    path = tmp_path / "resized.json"
    path.write_text(json.dumps(raw))
    return path


def upper_half_program(cfg, base: int):
    """LOAD INP and WGT, one GEMM reading the input element at ``sram_base = base``, STORE: the OUT bytes
    are ``inp @ wgt.T`` cut to int8 (fsim's truncation), computed by numpy."""
    rng = np.random.default_rng(11)
    a = rng.integers(-128, 128, size=(cfg.batch, cfg.block_in), dtype=np.int64)
    w = rng.integers(-128, 128, size=(cfg.block_out, cfg.block_in), dtype=np.int64)
    b = ProgramBuilder(cfg)
    abuf, wbuf = b.data("inp", a.astype(np.int8)), b.data("wgt", w.astype(np.int8))
    out = b.output("out", cfg.out_elem_bytes)
    u = b.uops([(0, base, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.load(memory_type=MEM_INP, sram_base=base, dram_base=abuf, y_size=1, x_size=1, x_stride=1)
    b.load(memory_type=MEM_WGT, dram_base=wbuf, y_size=1, x_size=1, x_stride=1, push_next=1)
    b.gemm(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, pop_prev=1, push_next=1)
    b.store(dram_base=out, y_size=1, x_size=1, x_stride=1, pop_prev=1, push_prev=1)
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1, pop_next=1)
    b.finish()
    b.expect("out", (a @ w.T).astype(np.int8))
    return b.build()


def test_a_resized_input_buffer(tmp_path, same_run):
    """The recipe's example: INP doubled, paid for by halving WGT (the default config fills the GEMM
    instruction's second word: 2 * 11 + 2 * 11 + 2 * 10 = 64 bits)."""
    old = load_config()
    path = resized(tmp_path, LOG_INP_BUFF_SIZE=old.LOG_INP_BUFF_SIZE + 1, LOG_WGT_BUFF_SIZE=old.LOG_WGT_BUFF_SIZE - 1)
    cfg = load_config(path)
    # what derives from the changed rows
    assert cfg.inp_depth == 2 * old.inp_depth and cfg.wgt_depth == old.wgt_depth // 2
    assert layout(cfg).uop["src_idx"][1] == layout(old).uop["src_idx"][1] + 1
    assert layout(cfg).gemm["src_factor_out"][1] == layout(old).gemm["src_factor_out"][1] + 1
    assert layout(cfg).gemm["wgt_factor_out"][1] == layout(old).gemm["wgt_factor_out"][1] - 1
    assert header_defines(cfg)["LOG_INP_DEPTH"] == cfg.log_inp_depth == old.log_inp_depth + 1
    assert header_defines(cfg)["INP_DEPTH"] == cfg.inp_depth
    assert expected_top(cfg).params["LOG_INP_DEPTH"] == cfg.log_inp_depth
    doc = json.loads(vtasim("config", "--config", str(path), "--json").stdout)
    assert (doc["derived"]["inp_depth"], doc["derived"]["wgt_depth"]) == (cfg.inp_depth, cfg.wgt_depth)
    # the new rows hold data on both models, equal to numpy and to each other
    image = upper_half_program(cfg, base=old.inp_depth)
    func, cyc = run_engine("functional", image), run_engine("cycle", image)
    assert check_result(image, func) == [] and check_result(image, cyc) == []
    same_run(image, func, cyc, timing=False)
    # the same program on the old size is refused, naming the field, the value and the limit
    with pytest.raises(IsaError, match=rf"src_idx = {old.inp_depth} does not fit {old.log_inp_depth} bits"):
        upper_half_program(old, base=old.inp_depth)


def test_a_buffer_too_large_for_the_isa_names_the_rule(tmp_path):
    """Growing INP alone overflows the GEMM instruction's second word: refused with the keys and the rule."""
    with pytest.raises(ConfigError, match=r"LOG_INP_BUFF_SIZE=16.*overflow the ISA.*GEMM instruction needs 66 bits"):
        load_config(resized(tmp_path, LOG_INP_BUFF_SIZE=16))
