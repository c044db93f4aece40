"""Hand-computed cycle counts from docs/timing.md (default L = 16, B = 8, K = 16, FETCH_INSNS = 8,
GEMM/ALU pipe 4).  Every asserted number is derived in the comments from the contract, not by
running the engine; docs/timing.md section 10 carries the same timelines.

ProgramBuilder layout (fixed by sim/builder.py): data buffers at 0x1000, 0x2000, ... in the order
they are declared, instructions on the next 4 KiB page after the last buffer (0x1000 when there is
none).  Every such address is a multiple of 16 words, so a transfer of <= 128 bytes is one burst.
"""

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT
from vtasim.hw.isa import ALU_ADD, ALU_MAX, OP_FINISH, OP_LOAD
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.cycle import run_image


def load_then_wait(cfg, data, **load):
    """``LOAD (push_next); NOP-COMPUTE (pop_prev); FINISH`` with ``data`` as the one buffer at 0x1000
    (instructions at 0x2000, 3 instructions = 6 beats: fetch completes at 22, the LOAD starts at 23
    and the NOP, visible at 24, waits for the LOAD's l2g token)."""
    b = ProgramBuilder(cfg)
    buf = b.data("x", data)
    b.load(dram_base=buf, push_next=1, **load)
    b.nop("compute", pop_prev=1)
    b.finish()
    return run_image(b.build())


def timeline(result):
    """{program_index: (start, end)} from the retire trace."""
    return {r.program_index: (r.start_cycle, r.end_cycle) for r in result.trace}


def test_nop_compute_finish(cfg):
    b = ProgramBuilder(cfg)
    b.nop("compute")
    b.finish()
    r = run_image(b.build())
    # fetch: 2 insns = 32 B = 4 beats, granted 0, complete 0 + 16 + 4 = 20
    # NOP dispatched 20 -> visible 21 -> s = 21, e = s + 1 = 22
    # FINISH dispatched 21, start max(22 visible, 22 + 1 = 23) = 23, e = 24; cycles = 25
    assert timeline(r) == {0: (21, 22), 1: (23, 24)}
    assert r.cycles == 25
    assert list(r.dispatch_cycle) == [20, 21]
    assert r.fetch_chunks == [(0, 20)]


def test_nop_only_two_chunks(cfg):
    b = ProgramBuilder(cfg)
    for _ in range(9):
        b.nop("compute")
    b.finish()
    r = run_image(b.build())
    # chunk 0: insns 0-7 = 128 B = 16 beats at 0x1000 (word 512, aligned): 0 + 16 + 16 = 32
    # d_j = 32 + j (j = 0..7); chunk 1 requested at d_7 + 1 = 40: 2 insns = 4 beats -> 60
    # d_8 = 60, d_9 = 61
    # NOP j (j < 8): visible 33 + j, module free at 34 + 2(j-1) + 1 -> s_j = 33 + 2j, e_j = 34 + 2j
    # NOP 7: (47, 48); NOP 8: visible 61 -> (61, 62); FINISH visible 62, free 63 -> (63, 64)
    assert r.fetch_chunks == [(0, 32), (40, 60)]
    assert list(r.dispatch_cycle) == [32 + j for j in range(8)] + [60, 61]
    tl = timeline(r)
    assert [tl[j] for j in range(8)] == [(33 + 2 * j, 34 + 2 * j) for j in range(8)]
    assert tl[8] == (61, 62) and tl[9] == (63, 64)
    assert r.cycles == 65


def test_load_uop(cfg):
    b = ProgramBuilder(cfg)
    u = b.uops([(0, 0, 0)])                        # 0x1000; instructions at 0x2000
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.finish()
    r = run_image(b.build())
    # fetch 2 insns -> 20; LOAD UOP d 20, s 21, request s + 1 = 22, 1 beat: 22 + 16 + 1 = 39 = e
    # FINISH s 40, e 41; cycles 42  (docs/timing.md 10.A)
    assert timeline(r) == {0: (21, 39), 1: (40, 41)}
    assert r.cycles == 42
    # compute: idle 0-20 (21), busy 21-41 (21)
    assert r.breakdown["compute"] == dict(busy=21, mem_wait=0, token_wait=0, queue_stall=0, idle=21)
    # fetch: burst in service 0-19 (20) + dispatches at 20, 21 -> busy 22; idle 22-41 (20)
    assert r.breakdown["fetch"] == dict(busy=22, mem_wait=0, token_wait=0, queue_stall=0, idle=20)


@pytest.mark.parametrize("reset", [0, 1])
def test_gemm(cfg, reset):
    b = ProgramBuilder(cfg)
    b.gemm(reset_reg=reset, uop_bgn=0, uop_end=1, iter_out=2, iter_in=3)
    b.finish()
    r = run_image(b.build())
    # fetch 2 insns -> 20; GEMM s 21, N = 2*3*1 = 6, e = s + N + 4 = 31; FINISH (32, 33); cycles 34
    assert timeline(r) == {0: (21, 31), 1: (32, 33)}
    assert r.cycles == 34


def test_gemm_empty_loop(cfg):
    b = ProgramBuilder(cfg)
    b.gemm(uop_bgn=0, uop_end=1, iter_out=0, iter_in=3)
    b.finish()
    r = run_image(b.build())
    # N = 0: e = s + 1 = 22; FINISH (23, 24); cycles 25
    assert timeline(r) == {0: (21, 22), 1: (23, 24)}
    assert r.cycles == 25


@pytest.mark.parametrize("use_imm, end", [(1, 28), (0, 30)])
def test_alu(cfg, use_imm, end):
    b = ProgramBuilder(cfg)
    b.alu(alu_opcode=ALU_ADD if use_imm else ALU_MAX, use_imm=use_imm, imm=3 if use_imm else 0,
          uop_bgn=0, uop_end=1, iter_out=1, iter_in=3)
    b.finish()
    r = run_image(b.build())
    # N = 3, s = 21; immediate: e = s + N + 4 = 28; vector: e = s + 2N - 1 + 4 = 30
    # FINISH starts e + 1, ends e + 2; cycles e + 3
    assert timeline(r) == {0: (21, end), 1: (end + 1, end + 2)}
    assert r.cycles == end + 3


def test_load_inp_token_wait(cfg):
    r = load_then_wait(cfg, np.arange(64, dtype=np.int8), memory_type=MEM_INP, x_size=4)   # 4 INP elements
    # fetch 3 insns = 6 beats -> 22; d = 22 (load q), 23 (NOP), 24 (FINISH)
    # LOAD INP s 23, request 24: 64 B at word 512 = 8 beats, granted 24 -> 24 + 16 + 8 = 48 = e
    # l2g pushed at 48, visible 49: NOP (49, 50); FINISH (51, 52); cycles 53
    assert timeline(r) == {0: (23, 48), 1: (49, 50), 2: (51, 52)}
    assert r.cycles == 53
    # compute: idle 0-23 (24; NOP visible from 24), token_wait 24-48 (25), busy 49-52 (4)
    assert r.breakdown["compute"] == dict(busy=4, mem_wait=0, token_wait=25, queue_stall=0, idle=24)
    # load: idle 0-22 (23), busy 23-48 (26), idle 49-52 (4)
    assert r.breakdown["load"] == dict(busy=26, mem_wait=0, token_wait=0, queue_stall=0, idle=27)


def test_load_acc_pads_and_burst_split(cfg):
    b = ProgramBuilder(cfg)
    a = b.data("a", np.arange(4 * 16, dtype=np.int32))     # 0x1000, 4 ACC elements of 64 B
    # x_size 3 from element 1: bytes [0x1040, 0x1100) = words 520..544 -> bursts [520, 528) of 8
    # beats and [528, 544) of 16 beats (the 16-word boundary at 528 splits them)
    # pads: x_pad_0 = 1, y_pad_1 = 1: xt = 4, yt = 2, P = 8 - 3 = 5
    b.load(memory_type=MEM_ACC, dram_base=a.elem(MEM_ACC, 1), x_size=3, x_pad_0=1, y_pad_1=1)
    b.finish()
    r = run_image(b.build())
    # fetch 2 insns -> 20; s = 21; pads at 22..26; first request s + 1 + P = 27
    # burst 1: 27 + 16 + 8 = 51; burst 2 requested and granted at 51: 51 + 16 + 16 = 83 = e
    # FINISH (84, 85); cycles 86
    assert timeline(r) == {0: (21, 83), 1: (84, 85)}
    assert r.cycles == 86


def test_store(cfg):
    b = ProgramBuilder(cfg)
    y = b.output("y", 16)                                  # 0x1000, one OUT element
    b.store(sram_base=0, dram_base=y, x_size=1, push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    r = run_image(b.build())
    # fetch 3 insns -> 22; STORE d 22, s 23, request 24: 16 B = 2 beats -> 24 + 16 + 2 = 42 = e
    # s2g visible 43: NOP (43, 44); FINISH (45, 46); cycles 47
    assert timeline(r) == {0: (23, 42), 1: (43, 44), 2: (45, 46)}
    assert r.cycles == 47
    assert [rec.module for rec in r.trace] == ["store", "compute", "compute"]


def test_two_loads_contend_for_the_port(cfg):
    b = ProgramBuilder(cfg)
    a = b.data("a", np.zeros(16, dtype=np.int32))          # 0x1000: one ACC element
    x = b.data("x", np.zeros(64, dtype=np.int8))           # 0x2000: four INP elements; insns 0x3000
    b.load(memory_type=MEM_ACC, dram_base=a, x_size=1, x_pad_0=1)
    b.load(memory_type=MEM_INP, dram_base=x, x_size=4, push_next=1)
    b.nop("compute", pop_prev=1)
    b.finish()
    r = run_image(b.build())
    # fetch 4 insns = 8 beats -> 24; d = 24 (ACC, compute q), 25 (INP, load q), 26, 27
    # LOAD ACC s 25, one pad (P = 2 - 1) at 26, request 27
    # LOAD INP s 26, request 27
    # at 27 both wait; inp (priority 2) beats acc (4): inp granted 27, 8 beats -> 51 = e(INP)
    # acc granted 51, 64 B at word 512 = 8 beats -> 75 = e(ACC)
    # NOP (76, 77) (l2g visible since 52); FINISH (78, 79); cycles 80
    assert timeline(r) == {0: (25, 75), 1: (26, 51), 2: (76, 77), 3: (78, 79)}
    assert r.cycles == 80
    # compute: idle 0-24 (25), busy 25-26 (2), mem_wait 27-50 (24), busy 51-79 (29)
    assert r.breakdown["compute"] == dict(busy=31, mem_wait=24, token_wait=0, queue_stall=0, idle=25)
    # load: idle 0-25 (26), busy 26-51 (26), idle 52-79 (28)
    assert r.breakdown["load"] == dict(busy=26, mem_wait=0, token_wait=0, queue_stall=0, idle=26 + 28)


def test_full_command_queue(cfg):
    small = cfg.replace(CMD_QUEUE_DEPTH=1)
    b = ProgramBuilder(small)
    b.gemm(uop_bgn=0, uop_end=1, iter_in=10)
    b.gemm(uop_bgn=0, uop_end=1)
    b.finish()
    r = run_image(b.build())
    # fetch 3 insns = 6 beats -> 22; GEMM0 d 22 (queue 0 < 1)
    # at 23 the queue holds GEMM0 (dispatched < 23, started < 23: none) -> full; GEMM0 starts 23
    # at 24 occupancy 1 - 1 = 0 -> GEMM1 d 24; at 25 occupancy 2 - 1 = 1 -> FINISH waits
    # GEMM0: N = 10, e = 23 + 10 + 4 = 37; GEMM1 s 38, e = 38 + 1 + 4 = 43
    # occupancy at 39 = 2 - 2 = 0 -> FINISH d 39, visible 40, module free 44 -> (44, 45); cycles 46
    assert list(r.dispatch_cycle) == [22, 24, 39]
    assert timeline(r) == {0: (23, 37), 1: (38, 43), 2: (44, 45)}
    assert r.cycles == 46
    # fetch: busy = burst 0-21 (22) + dispatches 22, 24, 39 (3) = 25; queue_stall 23 and 25-38 (15);
    # idle 40-45 (6)
    assert r.breakdown["fetch"] == dict(busy=25, mem_wait=0, token_wait=0, queue_stall=15, idle=6)


def test_retire_order_and_opcodes(cfg):
    b = ProgramBuilder(cfg)
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1)
    b.finish()
    r = run_image(b.build())
    # fetch 3 insns -> 22; NOP-LOAD d 22, s 23, e 24; NOP-COMPUTE d 23, visible 24, l2g visible 25:
    # (25, 26); FINISH (27, 28); cycles 29
    assert [(x.module, x.index_in_module, x.program_index, x.opcode, x.start_cycle, x.end_cycle)
            for x in r.trace] == [("load", 0, 0, OP_LOAD, 23, 24), ("compute", 0, 1, OP_LOAD, 25, 26),
                                  ("compute", 1, 2, OP_FINISH, 27, 28)]
    assert r.cycles == 29


def test_load_wgt_two_bursts(cfg):
    r = load_then_wait(cfg, np.zeros(256, np.int8), memory_type=MEM_WGT, x_size=1)   # 256 B = 32 beats
    # fetch 3 insns -> 22; LOAD WGT s 23, words 512..544 = bursts [512, 528) and [528, 544)
    # burst 1 granted 24 -> 24 + 16 + 16 = 56; burst 2 granted 56 -> 88 = e
    # NOP (89, 90); FINISH (91, 92); cycles 93
    assert timeline(r) == {0: (23, 88), 1: (89, 90), 2: (91, 92)}
    assert r.cycles == 93


def test_load_acc_8bit(cfg):
    b = ProgramBuilder(cfg)
    a = b.data("a", np.zeros(32, np.int8))                 # 0x1000, two ACC_8BIT elements of 16 B
    b.load(memory_type=MEM_ACC_8BIT, dram_base=a, x_size=2)
    b.finish()
    r = run_image(b.build())
    # DRAM element = BATCH * BLOCK_OUT = 16 B: 32 B = 4 beats; s 21, request 22 -> 22 + 16 + 4 = 42
    # FINISH (43, 44); cycles 45
    assert timeline(r) == {0: (21, 42), 1: (43, 44)}
    assert r.cycles == 45


def test_multi_row_load(cfg):
    r = load_then_wait(cfg, np.zeros(128, np.int8), memory_type=MEM_INP, y_size=2, x_size=1, x_stride=4)
    # rows: bytes [0x1000, 0x1010) = 2 beats, [0x1040, 0x1050) = 2 beats, one transfer each
    # s 23; row 0 requested 24 -> 24 + 16 + 2 = 42; row 1 requested 42 -> 60 = e
    # NOP (61, 62); FINISH (63, 64); cycles 65
    assert timeline(r) == {0: (23, 60), 1: (61, 62), 2: (63, 64)}
    assert r.cycles == 65


def test_nop_store_token(cfg):
    b = ProgramBuilder(cfg)
    b.nop("store", push_prev=1)
    b.nop("compute", pop_next=1)
    b.finish()
    r = run_image(b.build())
    # fetch 3 insns -> 22; NOP-STORE d 22 -> (23, 24), s2g visible 25
    # NOP-COMPUTE d 23, visible 24, waits for s2g -> (25, 26); FINISH (27, 28); cycles 29
    assert timeline(r) == {0: (23, 24), 1: (25, 26), 2: (27, 28)}
    assert r.cycles == 29
    assert r.breakdown["compute"]["token_wait"] == 1      # cycle 24


def test_load_without_rows_only_pads(cfg):
    from vtasim.sim import functional
    b = ProgramBuilder(cfg)
    a = b.data("a", np.arange(16, dtype=np.int32))
    b.load(memory_type=MEM_ACC, dram_base=a, sram_base=3, x_size=2, y_size=0, y_pad_0=1, x_pad_1=1)
    b.finish()
    img = b.build()
    r = run_image(img)
    # xt = 3, yt = 1, P = 3 - 0 = 3 pad elements at 22..24; no transfer: e = s + 1 + P = 21 + 4 = 25
    # FINISH (26, 27); cycles 28
    assert timeline(r) == {0: (21, 25), 1: (26, 27)}
    assert r.cycles == 28
    assert np.array_equal(r.dram, functional.run_image(img, executor="numpy").dram)


def test_burst_split_at_the_aligned_boundary_not_only_capped(cfg):
    """A transfer of exactly K = 16 words that starts mid-block: the aligned-boundary rule (docs/timing.md
    4.1) splits it into two 8-beat bursts, each paying the latency; mere capping at K beats would move it
    in one burst (e = 22 + 16 + 16 = 38, cycles 41).  Those differ by L, so this timeline tells them apart."""
    b = ProgramBuilder(cfg)
    a = b.data("a", np.arange(4 * 16, dtype=np.int32))     # 0x1000, 4 ACC elements of 64 B = 8 words
    # x_size 2 from element 1: bytes [0x1040, 0x10c0) = words 520..536 (16 words, one K-block's worth)
    # -> bursts [520, 528) and [528, 536), 8 beats each (528 is a multiple of 16)
    b.load(memory_type=MEM_ACC, dram_base=a.elem(MEM_ACC, 1), x_size=2)
    b.finish()
    r = run_image(b.build())
    # fetch 2 insns = 4 beats -> 20; LOAD ACC d 20, s 21, no pads: first request at 22
    # burst 1 granted 22: 22 + 16 + 8 = 46; burst 2 requested and granted 46: 46 + 16 + 8 = 70 = e
    # FINISH (71, 72); cycles 73
    assert timeline(r) == {0: (21, 70), 1: (71, 72)}
    assert r.cycles == 73
    # compute: idle 0-20 (21), busy 21-72 (52; a free port grants at once, so no mem_wait)
    assert r.breakdown["compute"] == dict(busy=52, mem_wait=0, token_wait=0, queue_stall=0, idle=21)
