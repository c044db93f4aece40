"""Bad programs on the cycle engine end with the right error, naming instruction, field and rule;
deadlocks end with the report (docs/timing.md 7), never a hang."""

import numpy as np
import pytest

from vtasim.hw.config import MEM_INP, MEM_UOP
from vtasim.hw.disasm import one_line
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.cycle import run_image
from vtasim.sim.errors import DeadlockError, ProgramError, RunError, TokenOverflowError
from vtasim.sim.program import load_program


def test_unbalanced_token_deadlock_report(cfg):
    b = ProgramBuilder(cfg)
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1)
    b.nop("compute", pop_prev=1)         # the second l2g token is never pushed
    b.finish()
    img = b.build()
    with pytest.raises(DeadlockError) as ei:
        run_image(img)
    err = ei.value
    assert "\n" not in str(err)
    assert "compute insn 2 needs l2g" in str(err)
    text = one_line(load_program(img).insn(2))
    assert f"instruction 2 `{text}` waits for token l2g" in err.report
    assert "load: done" in err.report and "store: done" in err.report
    assert "tokens: l2g=0, g2l=0, s2g=0, g2s=0" in err.report
    assert "queue 2/512" in err.report          # NOP 2 and FINISH are queued in compute


def test_fetch_blocked_on_full_queue_deadlock(cfg):
    # queue depth 1: the load queue holds a NOP waiting for g2l; the compute NOP that would push
    # it sits behind a second load NOP that fetch cannot dispatch
    b = ProgramBuilder(cfg.replace(CMD_QUEUE_DEPTH=1))
    b.nop("load", pop_next=1)
    b.nop("load")
    b.nop("compute", push_prev=1)
    b.finish()
    with pytest.raises(DeadlockError) as ei:
        run_image(b.build())
    assert "load insn 0 needs g2l" in str(ei.value)
    assert "fetch: instruction 1" in ei.value.report and "load queue full (1/1)" in ei.value.report


def test_token_overflow(cfg):
    b = ProgramBuilder(cfg.replace(TOKEN_QUEUE_DEPTH=1))
    b.nop("load", push_next=1)
    b.nop("load", push_next=1)           # the compute NOPs only come after: l2g reaches 2 > 1
    for _ in range(4):
        b.nop("compute")
    b.nop("compute", pop_prev=1)
    b.nop("compute", pop_prev=1)
    b.finish()
    with pytest.raises(TokenOverflowError) as ei:
        run_image(b.build())
    assert "instruction 1" in str(ei.value) and "l2g" in str(ei.value) and "TOKEN_QUEUE_DEPTH = 1" in str(ei.value)


def test_finish_with_unfinished_load(cfg):
    b = ProgramBuilder(cfg)
    x = b.data("x", np.zeros(64, np.int8))
    b.load(memory_type=MEM_INP, dram_base=x, x_size=4)     # FINISH does not wait for it
    b.finish()
    with pytest.raises(RunError) as ei:
        run_image(b.build())
    assert "load instruction 0" in str(ei.value) and "FINISH" in str(ei.value)


def test_gemm_index_out_of_range(cfg):
    b = ProgramBuilder(cfg)
    u = b.uops([(cfg.acc_depth - 2, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.gemm(uop_bgn=0, uop_end=1, iter_in=3, dst_factor_in=1)   # dst reaches depth - 2 + 2 = depth
    b.finish()
    with pytest.raises(ProgramError) as ei:
        run_image(b.build())
    msg = str(ei.value)
    assert msg.startswith("instruction 1 ") and "dst_idx" in msg and str(cfg.acc_depth) in msg
    assert ei.value.index == 1 and ei.value.field == "dst_idx"


def test_alu_src_index_out_of_range(cfg):
    b = ProgramBuilder(cfg)
    u = b.uops([(0, cfg.acc_depth - 1, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.alu(alu_opcode=2, use_imm=0, uop_bgn=0, uop_end=1, iter_out=2, src_factor_out=1)
    b.finish()
    with pytest.raises(ProgramError) as ei:
        run_image(b.build())
    assert ei.value.index == 1 and ei.value.field == "src_idx"


def test_static_errors_come_from_the_shared_checker(cfg):
    b = ProgramBuilder(cfg)
    b.nop("compute")                     # no FINISH
    with pytest.raises(ProgramError) as ei:
        run_image(b.build())
    assert "FINISH" in str(ei.value)
