"""Functional model semantics, each case against a reference written with Python integers/numpy."""

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT, load_config
from vtasim.hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import DeadlockError, ProgramError, RunError, TokenOverflowError
from vtasim.sim.functional import run_image
from vtasim.sim.program import load_program
from vtasim.sim.functional import run_program

CFG = load_config()
LANES = CFG.batch * CFG.block_out


def i32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def ref_alu(op, x, y):
    """Spec 3.5 + the documented rules for undefined shifts, on Python ints."""
    if op == ALU_MIN:
        return min(x, y)
    if op == ALU_MAX:
        return max(x, y)
    if op == ALU_ADD:
        return i32(x + y)
    if op == ALU_MUL:
        return i32(x * y)
    if y >= 32:
        return x >> 31
    if y >= 0:
        return x >> y
    if y > -32:
        return i32(x << -y)
    return 0


def acc_roundtrip(rows_a, alu_insns, rows_b=None, out_rows=None, uops=((0, 0, 0),)):
    """LOAD ACC a (+ b after it), run ALU instructions, then dump the whole acc region as int32.

    The acc region is read back through the machine state so no narrowing hides lane values."""
    b = ProgramBuilder(CFG)
    a = np.asarray(rows_a, dtype="<i4").reshape(-1, LANES)
    na = a.shape[0]
    ab = b.data("a", a)
    ub = b.uops(list(uops))
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=len(uops))
    b.load(memory_type=MEM_ACC, dram_base=ab, x_size=na)
    if rows_b is not None:
        bb = b.data("b", np.asarray(rows_b, dtype="<i4").reshape(-1, LANES))
        b.load(memory_type=MEM_ACC, sram_base=na, dram_base=bb, x_size=len(rows_b))
    for kw in alu_insns:
        b.alu(**kw)
    b.finish()
    img = b.build()
    from vtasim.sim.functional import FunctionalMachine  # noqa: F401  (state is inspected below)
    prog = load_program(img)
    m = run_program(prog, img.dram())
    return m.acc.copy(), m.counters


@pytest.mark.parametrize("op", [ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL])
def test_alu_vector_all_ops_edge_values(op):
    rng = np.random.default_rng(op)
    edge = [-(1 << 31), (1 << 31) - 1, -1, 0, 1, 31, 32, 33, -31, -32, -33, 100, -100, 1 << 20, 7, -7]
    x = np.array(edge * 2, dtype=np.int64)[:LANES * 2]
    y = rng.permutation(np.array(edge * 2, dtype=np.int64))[:LANES * 2]
    x, y = x[:LANES * 2].reshape(2, LANES), y[:LANES * 2].reshape(2, LANES)
    acc, cnt = acc_roundtrip(x, [dict(alu_opcode=op, uop_end=1, iter_in=2, dst_factor_in=1, src_factor_in=1)],
                             rows_b=y, uops=[(0, 2, 0)])
    want = [[ref_alu(op, int(a), int(c)) for a, c in zip(ra, rc)] for ra, rc in zip(x, y)]
    assert acc[:2].tolist() == want
    assert acc[2:4].tolist() == y.tolist()          # the source is untouched
    assert cnt["alu_counter"] == 2


@pytest.mark.parametrize("imm", [-32768, -40, -32, -31, -5, -1, 0, 1, 5, 31, 32, 40, 32767])
def test_shr_immediate_rules(imm):
    x = np.array([-(1 << 31), -12345, -1, 0, 1, 12345, (1 << 31) - 1] + [77] * (LANES - 7))
    acc, _ = acc_roundtrip(x, [dict(alu_opcode=ALU_SHR, use_imm=1, imm=imm, uop_end=1)])
    assert acc[0].tolist() == [ref_alu(ALU_SHR, int(v), imm) for v in x]


def test_alu_repeated_dst_accumulates_sequentially():
    # dst factor 0 in the inner loop: every iteration adds src row i to row 0, in order
    rows = np.arange(5 * LANES).reshape(5, LANES) - 40
    acc, cnt = acc_roundtrip(rows, [dict(alu_opcode=ALU_ADD, uop_end=1, iter_in=4, dst_factor_in=0,
                                         src_factor_in=1)], uops=[(0, 1, 0)])
    assert acc[0].tolist() == (rows[0] + rows[1:].sum(axis=0)).tolist()
    assert cnt["alu_counter"] == 4


def test_alu_reads_row_written_earlier_in_same_instruction():
    # uop k: acc[k+1] = acc[k+1] + acc[k]  -> a running prefix sum only if executed in order
    rows = np.arange(4 * LANES).reshape(4, LANES) % 7 + 1
    acc, _ = acc_roundtrip(rows, [dict(alu_opcode=ALU_ADD, uop_end=1, iter_in=3, dst_factor_in=1,
                                       src_factor_in=1)], uops=[(1, 0, 0)])
    assert acc[:4].tolist() == np.cumsum(rows, axis=0).tolist()


def test_alu_add_imm_repeated_dst():
    rows = np.full((1, LANES), 10)
    acc, _ = acc_roundtrip(rows, [dict(alu_opcode=ALU_ADD, use_imm=1, imm=-3, uop_end=1, iter_out=2, iter_in=3)])
    assert acc[0].tolist() == [10 - 3 * 6] * LANES


def test_iteration_zero_and_empty_range_are_noops():
    rows = np.arange(LANES).reshape(1, LANES)
    acc, cnt = acc_roundtrip(rows, [dict(alu_opcode=ALU_ADD, use_imm=1, imm=5, uop_end=1, iter_in=0),
                                    dict(alu_opcode=ALU_ADD, use_imm=1, imm=5, uop_end=1, iter_out=0),
                                    dict(alu_opcode=ALU_ADD, use_imm=1, imm=5, uop_bgn=1, uop_end=1),
                                    dict(alu_opcode=ALU_ADD, use_imm=1, imm=5, uop_bgn=1, uop_end=0)])
    assert acc[0].tolist() == rows[0].tolist()
    assert cnt["alu_counter"] == 0


def gemm_image(x_tiles, w_tiles, acc_init, gemm_kw, uops, reset_first=False, store_n=None):
    b = ProgramBuilder(CFG)
    xb = b.data("x", np.asarray(x_tiles, np.int8))
    wb = b.data("w", np.asarray(w_tiles, np.int8))
    ab = b.data("acc0", np.asarray(acc_init, "<i4"))
    n_acc = len(acc_init)
    b.output("out", n_acc * CFG.out_elem_bytes)
    ub = b.uops(uops)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=len(uops))
    b.load(memory_type=MEM_ACC, dram_base=ab, x_size=n_acc)
    b.load(memory_type=MEM_INP, dram_base=xb, x_size=len(x_tiles), push_next=0)
    b.load(memory_type=MEM_WGT, dram_base=wb, x_size=len(w_tiles), push_next=1)
    if reset_first:
        b.gemm(reset_reg=1, uop_end=1)
    b.gemm(pop_prev=1, **gemm_kw)
    b.finish()
    return b.build()


def test_gemm_repeated_dst_and_wrap():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, size=(3, CFG.batch, CFG.block_in))
    w = rng.integers(-128, 128, size=(2, CFG.block_out, CFG.block_in))
    acc0 = np.full((1, LANES), (1 << 31) - 5)     # near int32 max: the sums must wrap
    uops = [(0, s, wi) for s in range(3) for wi in range(2)]
    img = gemm_image(x, w, acc0, dict(uop_end=len(uops), iter_out=2), uops)
    m = run_program(load_program(img), img.dram())
    want = [i32(int(acc0[0, o]) + 2 * sum(int(x[s, 0] @ w[wi, o % CFG.block_out])
                                              for s in range(3) for wi in range(2)))
            for o in range(LANES)]
    assert m.acc[0].tolist() == want
    assert m.counters["gemm_counter"] == 2 * 6


def test_gemm_reset_zeroes_and_counts_nothing():
    img = gemm_image(np.ones((1, CFG.batch, CFG.block_in)), np.ones((1, CFG.block_out, CFG.block_in)),
                     np.full((2, LANES), 9), dict(reset_reg=1, uop_end=1, iter_in=2, dst_factor_in=1), [(0, 0, 0)])
    m = run_program(load_program(img), img.dram())
    assert not m.acc[:2].any()
    assert m.counters["gemm_counter"] == 0


def test_gemm_index_overflow_is_an_error():
    img = gemm_image(np.ones((1, CFG.batch, CFG.block_in)), np.ones((1, CFG.block_out, CFG.block_in)),
                     np.zeros((1, LANES)), dict(uop_end=1, iter_in=3, wgt_factor_in=CFG.wgt_depth // 2),
                     [(0, 0, 0)])
    with pytest.raises(ProgramError, match=r"instruction 4: GEMM wgt index \d+ .*i_in 2.*depth 1024") as e:
        run_image(img)
    assert e.value.index == 4 and e.value.field == "wgt_idx"


def test_alu_index_overflow_is_an_error():
    b = ProgramBuilder(CFG)
    ub = b.uops([(CFG.acc_depth - 1, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=1)
    b.alu(alu_opcode=ALU_ADD, uop_end=1, iter_in=2, dst_factor_in=1)
    b.finish()
    with pytest.raises(ProgramError, match=r"instruction 1: ALU dst index 2048 .*depth 2048"):
        run_image(b.build())


def test_padded_2d_load_and_strided_store():
    """INP load with all four pads and a row stride, checked through the SRAM; strided STORE gaps."""
    rng = np.random.default_rng(2)
    src = rng.integers(-128, 128, size=(4, 7, CFG.batch, CFG.block_in)).astype(np.int8)
    b = ProgramBuilder(CFG)
    xb = b.data("x", src)
    b.load(memory_type=MEM_INP, sram_base=3, dram_base=xb.elem(MEM_INP, 8), y_size=2, x_size=3, x_stride=7,
           y_pad_0=1, y_pad_1=2, x_pad_0=2, x_pad_1=1)
    b.finish()
    img = b.build()
    m = run_program(load_program(img), img.dram())
    block = np.zeros((5, 6, CFG.batch, CFG.block_in), np.int8)
    block[1:3, 2:5] = src[1:3, 1:4]
    assert np.array_equal(m.inp[3:33].reshape(block.shape), block)
    assert not m.inp[:3].any() and not m.inp[33:40].any()
    assert m.counters["inp_load_nbytes"] == 6 * CFG.inp_elem_bytes


def test_store_truncates_and_strides():
    vals = (np.arange(4 * LANES) * 37 - 3000).reshape(4, LANES)
    b = ProgramBuilder(CFG)
    ab = b.data("a", vals.astype("<i4"))
    out = b.output("out", 2 * 5 * CFG.out_elem_bytes)
    b.load(memory_type=MEM_ACC, dram_base=ab, x_size=4, push_next=1)
    b.store(dram_base=out, y_size=2, x_size=2, x_stride=5, pop_prev=1, push_prev=1)
    b.finish(pop_next=1)
    r = run_image(b.build())
    got = np.frombuffer(r.outputs["out"], np.int8).reshape(2, 5, LANES)
    assert np.array_equal(got[:, :2].reshape(4, LANES), vals.astype(np.int64).astype(np.int8))
    assert not got[:, 2:].any()
    assert r.counters["out_store_nbytes"] == 4 * CFG.out_elem_bytes


def test_acc_8bit_sign_extends():
    vals = np.arange(3 * LANES, dtype=np.int64).reshape(3, LANES) * 11 % 256 - 128
    b = ProgramBuilder(CFG)
    vb = b.data("v", vals.astype(np.int8))
    b.load(memory_type=MEM_ACC_8BIT, sram_base=5, dram_base=vb, x_size=3)
    b.finish()
    img = b.build()
    m = run_program(load_program(img), img.dram())
    assert m.acc[5:8].tolist() == vals.tolist()
    assert m.counters["acc_load_nbytes"] == 3 * CFG.acc_elem_bytes     # fsim counts acc element size


def test_uop_load_2d():
    b = ProgramBuilder(CFG)
    ub = b.uops([(i, i + 1, i + 2) for i in range(8)])
    b.load(memory_type=MEM_UOP, sram_base=10, dram_base=ub, y_size=2, x_size=2, x_stride=4, x_pad_0=1)
    b.finish()
    img = b.build()
    m = run_program(load_program(img), img.dram())
    from vtasim.hw.isa import decode_uop
    got = [decode_uop(CFG, int(w)) for w in m.uop[10:16]]
    assert got == [(0, 0, 0), (0, 1, 2), (1, 2, 3), (0, 0, 0), (4, 5, 6), (5, 6, 7)]
    assert m.counters["uop_load_nbytes"] == 16


# ---- scheduler ------------------------------------------------------------------------------------
def test_deadlock_is_reported():
    b = ProgramBuilder(CFG)
    b.nop("compute", pop_prev=1)        # waits for an l2g token nobody pushes
    b.nop("store", pop_prev=1)
    b.finish()
    with pytest.raises(DeadlockError, match=r"compute insn 0 needs l2g; store insn 1 needs g2s; tokens l2g=0") as e:
        run_image(b.build())
    assert "NOP-COMPUTE-STAGE [pop_prev]" in e.value.report


def test_finish_with_work_left_is_an_error():
    b = ProgramBuilder(CFG)
    b.nop("store", pop_prev=1)
    b.alu(alu_opcode=ALU_ADD, use_imm=1, imm=1, uop_end=1, push_next=0)
    b.finish()
    with pytest.raises(RunError, match="store instruction 0"):
        run_image(b.build())


def test_token_order_matters_and_leftovers_are_reported():
    # store runs only after compute pushes; compute's second push is never popped
    b = ProgramBuilder(CFG)
    b.nop("compute", push_next=1)
    b.nop("compute", push_next=1)
    b.nop("store", pop_prev=1, push_prev=1)
    b.finish(pop_next=1)
    r = run_image(b.build())
    assert r.leftover_tokens == {"g2s": 1}


def _mutual_pushes(depth):
    """Compute and store each push twice into queues that only the other module could drain."""
    b = ProgramBuilder(CFG.replace(TOKEN_QUEUE_DEPTH=depth))
    b.nop("compute", push_next=1)
    b.nop("compute", push_next=1)      # g2s: store never pops it
    b.nop("store", push_prev=1)
    b.nop("store", push_prev=1)        # s2g: only FINISH pops one
    b.finish(pop_next=1)
    return b.build()


def test_token_overflow():
    with pytest.raises(TokenOverflowError, match="instruction 1: push to token queue g2s would exceed "
                                                 "TOKEN_QUEUE_DEPTH = 1") as e:
        run_image(_mutual_pushes(1))
    assert e.value.index == 1 and e.value.field == "g2s"
    # with room for two tokens the same program runs and reports what is left over
    assert run_image(_mutual_pushes(2)).leftover_tokens == {"g2s": 2, "s2g": 1}


def test_full_token_queue_stalls_the_producer():
    """Three pushes into a queue of two are fine when the consumer can pop in between."""
    cfg = CFG.replace(TOKEN_QUEUE_DEPTH=2)
    b = ProgramBuilder(cfg)
    for _ in range(3):
        b.nop("load", push_next=1)
    for _ in range(3):
        b.nop("compute", pop_prev=1)
    b.finish()
    r = run_image(b.build())
    assert r.order == [0, 1, 3, 4, 2, 5, 6]


def test_out_of_order_consumers_wait():
    """Compute pops a token the load module pushes later in program order: the scheduler must wait."""
    rng = np.random.default_rng(3)
    vals = rng.integers(-100, 100, size=(2, LANES))
    b = ProgramBuilder(CFG)
    ab = b.data("a", vals.astype("<i4"))
    out = b.output("out", 2 * CFG.out_elem_bytes)
    b.store(dram_base=out, x_size=2, pop_prev=1, push_prev=1)     # first in program order
    b.load(memory_type=MEM_ACC, dram_base=ab, x_size=2, push_next=1)
    b.finish(pop_next=1)
    r = run_image(b.build())
    assert r.outputs["out"] == vals.astype(np.int8).tobytes()


def test_resnet_c2_scale_stream():
    """~450k GEMM uops (the ResNet-18 C2 count) as a tiled GEMM with requantization, vs numpy."""
    from vtasim.sim.programs.unit import tiled_gemm
    img = tiled_gemm(CFG, "c2scale", 3136, 576, 64, bm=64, bk=64, bn=64, vt=2, requant=(8, 0, 127))
    r = run_image(img)
    assert r.counters == img.expected_counters and r.counters["gemm_counter"] == 451584
    assert r.outputs == img.expected and r.leftover_tokens == {}


def test_alu_immediate_still_checks_src_index():
    b = ProgramBuilder(CFG)
    ub = b.uops([(0, CFG.acc_depth - 1, 0)])
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=1)
    b.alu(alu_opcode=ALU_ADD, use_imm=1, imm=1, uop_end=1, iter_in=2, src_factor_in=1)
    b.finish()
    with pytest.raises(ProgramError, match=r"instruction 1: ALU src index 2048 .*depth 2048") as e:
        run_image(b.build())
    assert e.value.field == "src_idx"


def test_execution_order_follows_the_documented_scheduler():
    """Scan load, compute, store; each runs while its tokens allow (order recorded in extra)."""
    b = ProgramBuilder(CFG)
    b.nop("compute", pop_prev=1, push_next=1)      # 0: waits for load's token
    b.nop("load", push_next=1)                     # 1
    b.nop("store", pop_prev=1, push_prev=1)        # 2
    b.nop("load")                                  # 3
    b.finish(pop_next=1)                           # 4
    r = run_image(b.build())
    assert r.order == [1, 3, 0, 2, 4]


def test_builder_uop_load_defaults_to_all_uops():
    b = ProgramBuilder(CFG)
    u = b.uops([(1, 0, 0), (2, 0, 0), (3, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u)
    b.finish()
    assert b.insns[0].x_size == 3 and b.insns[0].y_size == 1 and b.insns[0].x_stride == 3


# ---- random programs against a literal transcription of spec 3.2-3.5 ---------------------------
def naive_run(cfg, insns, uops, dram):
    """Spec 3.x pseudocode, one uop and one lane at a time, program order (the streams below are
    token-ordered so that program order is a legal schedule)."""
    from vtasim.hw.isa import OP_ALU as A, OP_GEMM as G, OP_LOAD as L, OP_STORE as S
    inp = np.zeros((cfg.inp_depth, cfg.batch * cfg.block_in), np.int64)
    wgt = np.zeros((cfg.wgt_depth, cfg.block_out * cfg.block_in), np.int64)
    acc = np.zeros((cfg.acc_depth, LANES), np.int64)
    uop = [None] * cfg.uop_depth
    cnt = dict.fromkeys(["inp", "wgt", "acc", "uop", "out", "gemm", "alu"], 0)
    for i in insns:
        if i.opcode == L and i.x_size:
            xt = i.x_pad_0 + i.x_size + i.x_pad_1
            eb = cfg.dram_elem_bytes(i.memory_type)
            for r in range(i.y_pad_0 + i.y_size + i.y_pad_1):
                for c in range(xt):
                    k = i.sram_base + r * xt + c
                    dr, dc = r - i.y_pad_0, c - i.x_pad_0
                    inside = 0 <= dr < i.y_size and 0 <= dc < i.x_size
                    a = (i.dram_base + dr * i.x_stride + dc) * eb
                    raw = dram[a:a + eb] if inside else np.zeros(eb, np.uint8)
                    if i.memory_type == MEM_UOP:
                        uop[k] = int.from_bytes(raw.tobytes(), "little")
                    elif i.memory_type == MEM_INP:
                        inp[k] = raw.view(np.int8)
                    elif i.memory_type == MEM_WGT:
                        wgt[k] = raw.view(np.int8)
                    else:
                        acc[k] = raw.view("<i4")
            key = {MEM_UOP: "uop", MEM_INP: "inp", MEM_WGT: "wgt", MEM_ACC: "acc"}[i.memory_type]
            cnt[key] += i.x_size * i.y_size * cfg.sram_elem_bytes(i.memory_type)
        elif i.opcode == S and i.x_size:
            for r in range(i.y_size):
                for c in range(i.x_size):
                    a = (i.dram_base + r * i.x_stride + c) * cfg.out_elem_bytes
                    dram[a:a + LANES] = [v & 0xFF for v in acc[i.sram_base + r * i.x_size + c]]
            cnt["out"] += i.x_size * i.y_size * cfg.out_elem_bytes
        elif i.opcode in (G, A):
            for io in range(i.iter_out):
                for ii in range(i.iter_in):
                    for u in range(i.uop_bgn, i.uop_end):
                        d, s, w = decode_uop(cfg, uop[u])
                        d += io * i.dst_factor_out + ii * i.dst_factor_in
                        s += io * i.src_factor_out + ii * i.src_factor_in
                        w += io * i.wgt_factor_out + ii * i.wgt_factor_in
                        if i.opcode == G and i.reset_reg:
                            acc[d] = 0
                        elif i.opcode == G:
                            x = inp[s].reshape(cfg.batch, cfg.block_in)
                            m = wgt[w].reshape(cfg.block_out, cfg.block_in)
                            acc[d] = [i32(int(v)) for v in acc[d] + (x @ m.T).reshape(-1)]
                        else:
                            acc[d] = [ref_alu(i.alu_opcode, int(a), i.imm if i.use_imm else int(b))
                                      for a, b in zip(acc[d], acc[s])]
            n = i.iter_out * i.iter_in * max(0, i.uop_end - i.uop_bgn)
            if i.opcode == A:
                cnt["alu"] += n
            elif not i.reset_reg:
                cnt["gemm"] += n
    return cnt


from vtasim.hw.isa import decode_uop  # noqa: E402


def random_program(cfg, seed):
    rng = np.random.default_rng(seed)
    r = lambda lo, hi: int(rng.integers(lo, hi))
    b = ProgramBuilder(cfg)
    xb = b.data("x", rng.integers(-128, 128, size=(16, cfg.batch * cfg.block_in)).astype(np.int8))
    wb = b.data("w", rng.integers(-128, 128, size=(8, cfg.block_out * cfg.block_in)).astype(np.int8))
    big = [-(1 << 31), (1 << 31) - 1, -1, 0, 1, 40, -40, 1 << 16]
    acc0 = np.where(rng.random((24, LANES)) < 0.2, rng.choice(big, size=(24, LANES)),
                    rng.integers(-1000, 1000, size=(24, LANES)))
    ab = b.data("a", acc0.astype("<i4"))
    ub = b.uops([(r(0, 24), r(0, 16), r(0, 8)) for _ in range(48)])
    out = b.output("out", 64 * cfg.out_elem_bytes)
    b.load(memory_type=MEM_INP, dram_base=xb, y_size=4, x_size=4, x_stride=4, x_pad_0=r(0, 2), y_pad_1=r(0, 2))
    b.load(memory_type=MEM_WGT, dram_base=wb, x_size=8, push_next=1)
    b.load(memory_type=MEM_UOP, dram_base=ub, pop_prev=1)
    b.load(memory_type=MEM_ACC, dram_base=ab, y_size=4, x_size=6, x_stride=6, y_pad_0=r(0, 2), x_pad_1=r(0, 2))
    for _ in range(25):
        bgn = r(0, 48)
        loop = dict(uop_bgn=bgn, uop_end=min(48, bgn + r(0, 4)), iter_out=r(0, 4), iter_in=r(0, 4),
                    dst_factor_out=r(0, 4), dst_factor_in=r(0, 4), src_factor_out=r(0, 3), src_factor_in=r(0, 3))
        if rng.random() < 0.4:
            b.gemm(reset_reg=int(rng.random() < 0.2), wgt_factor_out=r(0, 2), wgt_factor_in=r(0, 2), **loop)
        else:
            op = r(0, 5)
            imm = r(-40, 40) if op == ALU_SHR else r(-32768, 32768)
            b.alu(alu_opcode=op, use_imm=r(0, 2), imm=imm, **loop)
    b.nop("compute", push_next=1)
    b.store(dram_base=out, y_size=4, x_size=16, x_stride=16, pop_prev=1, push_prev=1)
    b.finish(pop_next=1)
    return b.build(), b.insns


@pytest.mark.parametrize("seed", range(16))
def test_random_programs_match_spec_transcription(seed):
    img, insns = random_program(CFG, seed)
    r = run_image(img)
    dram = img.dram()
    cnt = naive_run(CFG, insns, None, dram)
    assert r.outputs["out"] == img.output_bytes(dram, "out")
    assert [r.counters[k] for k in ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                                    "out_store_nbytes", "gemm_counter", "alu_counter")] == list(cnt.values())


def _alu_loop_image(uops, **loop):
    b = ProgramBuilder(CFG)
    ub = b.uops(uops)
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=len(uops))
    b.alu(alu_opcode=ALU_ADD, uop_end=len(uops), **loop)
    b.finish()
    return b.build()


@pytest.mark.parametrize("seed", range(40))
def test_index_error_names_the_first_bad_index_in_execution_order(seed):
    """The reported (index, uop, i_out, i_in) is the first out-of-range one of a brute-force walk."""
    rng = np.random.default_rng(seed)
    depth = CFG.acc_depth
    n_uop = int(rng.integers(1, 4))
    uops = [(int(rng.integers(0, depth)), int(rng.integers(0, depth)), 0) for _ in range(n_uop)]
    loop = dict(iter_out=int(rng.integers(1, 6)), iter_in=int(rng.integers(1, 6)),
                dst_factor_out=int(rng.integers(0, 700)), dst_factor_in=int(rng.integers(0, 300)),
                src_factor_out=int(rng.integers(0, 700)), src_factor_in=int(rng.integers(0, 300)))
    first = None
    for name, k in (("dst", 0), ("src", 1)):
        for io in range(loop["iter_out"]):
            for ii in range(loop["iter_in"]):
                for u, t in enumerate(uops):
                    v = t[k] + io * loop[f"{name}_factor_out"] + ii * loop[f"{name}_factor_in"]
                    if first is None and v >= depth:
                        first = (name, v, u, io, ii)
    img = _alu_loop_image(uops, **loop)
    if first is None:
        run_image(img)
        return
    name, v, u, io, ii = first
    with pytest.raises(ProgramError) as e:
        run_image(img)
    assert str(e.value) == (f"instruction 1: ALU {name} index {v} (uop {u}, i_out {io}, i_in {ii}) "
                            f"is beyond the buffer depth {depth}")


def test_huge_out_of_range_loop_fails_before_allocating():
    # 16383 x 16383 x 8 uops: index arrays of the whole nest would take GBs; the range check comes first
    import tracemalloc
    img = _alu_loop_image([(0, 0, 0)] * 8, iter_out=16383, iter_in=16383, dst_factor_in=1)
    tracemalloc.start()
    try:
        with pytest.raises(ProgramError, match=r"ALU dst index 2048 \(uop 0, i_out 0, i_in 2048\)"):
            run_image(img)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"


@pytest.mark.parametrize("op", [ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL])
def test_alu_imm_on_a_repeated_row_equals_applying_it_k_times(op):
    """An immediate ALU loop over one row (dst factor 0): the row gets ``k`` sequential applications."""
    x = np.array([-(1 << 31), (1 << 31) - 1, -1, 0, 1, 3, -3, 12345, -12345, 1 << 20, -(1 << 20), 77, -77,
                  (1 << 30) + 7, -(1 << 30) - 9, 255][:LANES] * (LANES // 16 or 1))[:LANES]
    for imm in (-32768, -33, -32, -31, -7, -1, 0, 1, 5, 31, 32, 40, 32767):
        for k in (1, 2, 3, 7, 33):
            want = [int(v) for v in x]
            for _ in range(k):
                want = [ref_alu(op, v, imm) for v in want]
            acc, cnt = acc_roundtrip(x.reshape(1, LANES), [dict(alu_opcode=op, use_imm=1, imm=imm, uop_end=1,
                                                                iter_in=k, dst_factor_in=0)])
            assert acc[0].tolist() == want, (imm, k)
            assert cnt["alu_counter"] == k


def test_long_immediate_loop_over_few_rows():
    # 2000 x 2000 uops over each of 2 rows: a row-by-row Python walk (minutes) is not needed
    rows = np.array([[5] * LANES, [-3] * LANES])
    acc, cnt = acc_roundtrip(rows, [dict(alu_opcode=ALU_ADD, use_imm=1, imm=30000, uop_end=2, iter_out=2000,
                                         iter_in=2000)], uops=[(0, 0, 0), (1, 0, 0)])
    k = 2000 * 2000
    assert acc[0].tolist() == [i32(5 + 30000 * k)] * LANES and acc[1].tolist() == [i32(-3 + 30000 * k)] * LANES
    assert cnt["alu_counter"] == 2 * k
