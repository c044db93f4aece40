"""Runtime stream builder (vtasim.compiler.runtime) against references derived by hand from the runtime rules.

The worked examples of compiler spec 6.2 (simple GEMM) and 3.2 (vector add) are replayed by calling
the API exactly as the lowered programs there do; the expected instruction/flag listings below were
derived on paper from the rules of compiler spec 5.2-5.4 / hardware spec 5.3-5.5, not produced by the
code under test.  Outputs are compared with numpy, counters with fsim's (spec 3.3) or hand counts.
"""

import numpy as np
import pytest

from vtasim.compiler.runtime import CommandQueue, DramBuffer, RuntimeContractError
from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, default_config_path, load_config
from vtasim.hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_SHR, OP_ALU, OP_GEMM, OP_LOAD, OP_STORE, decode_stream, decode_uops
from vtasim.sim import functional
from vtasim.sim.errors import SimError
from tvm_runtime_model import listing

# ---- helpers -------------------------------------------------------------------------------------


def run_functional(image):
    return functional.run_image(image)


def run_cycle(image):
    from vtasim.sim.cycle import run_image
    return run_image(image, progress=False)


def uop_segment(image, q):
    """(dst, src, wgt) triples of the image's uop segment, read from DRAM where the first LOAD UOP points."""
    n = q.stats["uops"]
    dram = image.dram()
    insns = decode_stream(image.cfg, image.insn_bytes())
    base = min(i.dram_base for i in insns if i.opcode == OP_LOAD and i.memory_type == MEM_UOP and i.x_size)
    eb = image.cfg.uop_elem_bytes
    words = dram[base * eb: (base + n) * eb].view("<u4")
    return [tuple(int(v) for v in t) for t in zip(*decode_uops(image.cfg, words))]


def record(loops, uops, mode=0, reset=0, opcode=0, use_imm=0, imm=0, calls=None):
    def rec(k):
        if calls is not None:
            calls.append(1)
        for lp in loops:
            k.loop_begin(*lp)
        for d, s, w in uops:
            k.push(mode, reset, d, s, w, opcode, use_imm, imm)
        for _ in loops:
            k.loop_end()
    return rec


# ---- spec 6.2: simple GEMM -----------------------------------------------------------------------
N_BLK, M_BLK = 16, 16          # spec 3.3: o=1, n=16, m=16 blocks


def gemm_data(cfg, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 8, size=(1, N_BLK, cfg.batch, cfg.block_in), dtype=np.int8)
    b = rng.integers(-8, 8, size=(M_BLK, N_BLK, cfg.block_out, cfg.block_in), dtype=np.int8)
    # independent reference: unpack to plain matrices and matmul
    a_mat = a.transpose(0, 2, 1, 3).reshape(cfg.batch, N_BLK * cfg.block_in).astype(np.int64)
    w_mat = b.transpose(0, 2, 1, 3).reshape(M_BLK * cfg.block_out, N_BLK * cfg.block_in).astype(np.int64)
    c_mat = (a_mat @ w_mat.T).astype(np.int8)             # STORE truncates to int8
    c = c_mat.reshape(cfg.batch, M_BLK, cfg.block_out).transpose(1, 0, 2)[None]
    return a, b, np.ascontiguousarray(c)


def simple_gemm(cfg, max_insns=None, seed=0):
    """The lowered program of compiler spec 6.2, call for call."""
    a, b, c = gemm_data(cfg, seed)
    q = CommandQueue(cfg, max_insns=max_insns, name="gemm")
    A = q.alloc_input("A", a)
    B = q.alloc_input("B", b)
    C = q.alloc_output("C", c.nbytes)
    q.expect("C", c)
    calls = []
    # CS(2){ UOPK{ LOOP(16,1,0,0) UOP(0,1,0,0,0) } push(2,1) }
    q.push_gemm_op(("reset", 0), record([(M_BLK, 1, 0, 0)], [(0, 0, 0)], reset=1, calls=calls))
    q.dep_push(2, 1)
    for ko in range(N_BLK):
        q.dep_pop(2, 1)
        q.load_buffer_2d(A, ko, 1, 1, 1, 0, 0, 0, 0, 0, MEM_INP)
        q.load_buffer_2d(B, ko, 1, M_BLK, N_BLK, 0, 0, 0, 0, 0, MEM_WGT)
        q.dep_push(1, 2)
        q.dep_pop(1, 2)
        q.push_gemm_op(("gemm", 0), record([(M_BLK, 1, 0, 1)], [(0, 0, 0)], calls=calls))
        q.dep_push(2, 1)
    q.dep_push(2, 3)
    q.dep_pop(2, 1)
    q.dep_pop(2, 3)
    q.store_buffer_2d(0, MEM_OUT, C, 0, M_BLK, 1, M_BLK)
    q.synchronize()
    return q, calls


def expected_gemm_listing():
    """Derived by hand (see the module docstring of vtasim.compiler.runtime.stream for the rules)."""
    rows = [("LD-UOP", ""), ("GEMM", "U")]                 # reset kernel; push(2,1) merges onto it
    for ko in range(N_BLK):
        rows += [("LD-INP", "p"), ("LD-WGT", "u")]            # pop(2,1) rides the load; push(1,2) merges
        if ko == 0:
            rows += [("LD-UOP", "P"), ("GEMM", "U")]        # first use of the GEMM kernel loads it
        else:
            rows += [("GEMM", "PU")]
    rows[-1] = ("GEMM", "PUu")                             # push(2,3) merges onto the last GEMM
    rows += [("ST", "PU"),                                 # pop(2,3); closing push(3,2) merges
             ("NOP-MEM", "p"),                             # drain pop(2,1) committed by closing push(1,2)
             ("NOP-MEM", "u"),                             # ... which cannot merge into a NOP LOAD
             ("NOP-COMPUTE", "Pp"),                        # closing pops
             ("FINISH", "")]
    return rows


def test_simple_gemm_stream_structure():
    cfg = load_config()
    q, calls = simple_gemm(cfg)
    image = q.build()
    assert len(calls) == 2                                 # each kernel recorded once
    assert listing(image) == expected_gemm_listing()
    st = q.stats
    assert st["insns"] == 56 == image.insn_count
    assert st["insns_by_opcode"] == {"LOAD": 37, "STORE": 1, "GEMM": 17, "FINISH": 1, "ALU": 0}
    assert st["nops"] == 3 and st["uop_kernels"] == 2 and st["uops"] == 2 and st["uop_bytes"] == 8
    assert st["uop_loads"] == 2 and st["uop_evictions"] == 0 and st["flushes"] == 0 and st["kernel_hits"] == 15
    assert st["tokens"] == {"l2g": {"push": 17, "pop": 17}, "g2l": {"push": 17, "pop": 17},
                            "s2g": {"push": 1, "pop": 1}, "g2s": {"push": 1, "pop": 1}}
    insns = decode_stream(cfg, image.insn_bytes())
    reset, gemm = insns[1], insns[5]
    assert (reset.reset_reg, reset.uop_bgn, reset.uop_end, reset.iter_out, reset.iter_in) == (1, 0, 1, M_BLK, 1)
    assert (reset.dst_factor_out, reset.src_factor_out, reset.wgt_factor_out) == (1, 0, 0)
    assert (gemm.reset_reg, gemm.uop_bgn, gemm.uop_end, gemm.iter_out, gemm.iter_in) == (0, 1, 2, M_BLK, 1)
    assert (gemm.dst_factor_out, gemm.src_factor_out, gemm.wgt_factor_out) == (1, 0, 1)
    assert (gemm.dst_factor_in, gemm.src_factor_in, gemm.wgt_factor_in) == (0, 0, 0)
    # loads: dram_base = buffer address / element bytes + offset
    A, B = image.segments[0], image.segments[1]
    ld_a, ld_b = insns[2], insns[3]
    assert ld_a.dram_base == A.addr // cfg.inp_elem_bytes and (ld_a.x_size, ld_a.y_size, ld_a.x_stride) == (1, 1, 1)
    assert ld_b.dram_base == B.addr // cfg.wgt_elem_bytes and (ld_b.x_size, ld_b.y_size, ld_b.x_stride) == (1, 16, 16)
    assert insns[6].dram_base == A.addr // cfg.inp_elem_bytes + 1         # ko = 1
    # the two LOAD UOPs read the two kernels' uops from the uop segment
    uops = uop_segment(image, q)
    assert uops == [(0, 0, 0), (0, 0, 0)]
    assert insns[4].dram_base == insns[0].dram_base + 1 and insns[4].sram_base == 1


@pytest.mark.parametrize("engine", ["functional", "cycle"])
def test_simple_gemm_runs(engine):
    cfg = load_config()
    q, _ = simple_gemm(cfg)
    image = q.build()
    r = (run_functional if engine == "functional" else run_cycle)(image)
    assert r.outputs["C"] == image.expected["C"]
    # fsim stats of spec 3.3
    assert r.counters == {"inp_load_nbytes": 256, "wgt_load_nbytes": 65536, "acc_load_nbytes": 0,
                          "uop_load_nbytes": 8, "out_store_nbytes": 256, "gemm_counter": 256, "alu_counter": 0}
    assert r.leftover_tokens == {}


PRESETS = ["1x16x16", "2x16x16", "1x32x32", "1x8x8"]


def preset(name):
    return load_config(default_config_path().parent / "presets" / f"{name}.json")


@pytest.mark.parametrize("name", PRESETS)
def test_simple_gemm_on_presets(name):
    """The same calls on every preset: shapes and byte counts follow the config's element sizes."""
    cfg = preset(name)
    q, _ = simple_gemm(cfg)
    image = q.build()
    assert listing(image) == expected_gemm_listing()
    r = run_functional(image)
    assert r.outputs["C"] == image.expected["C"]
    assert r.counters == {"inp_load_nbytes": N_BLK * cfg.inp_elem_bytes,
                          "wgt_load_nbytes": N_BLK * M_BLK * cfg.wgt_elem_bytes, "acc_load_nbytes": 0,
                          "uop_load_nbytes": 2 * cfg.uop_elem_bytes, "out_store_nbytes": M_BLK * cfg.out_elem_bytes,
                          "gemm_counter": N_BLK * M_BLK, "alu_counter": 0}


# ---- spec 3.2: vector add ------------------------------------------------------------------------
VADD_N = 64


def vector_add(cfg, seed=1):
    rng = np.random.default_rng(seed)
    shape = (1, VADD_N, cfg.batch, cfg.block_out)
    a = rng.integers(-(1 << 20), 1 << 20, size=shape, dtype=np.int32)
    b = rng.integers(-(1 << 20), 1 << 20, size=shape, dtype=np.int32)
    c = (a.astype(np.int64) + b).astype(np.int32).astype(np.int8)
    q = CommandQueue(cfg, name="vadd")
    A, B = q.alloc_input("A", a), q.alloc_input("B", b)
    C = q.alloc_output("C", c.nbytes)
    q.expect("C", c)
    # CS(2){ LD(A, ACC, sram 0); LD(B, ACC, sram 64); UOPK{LOOP(64,1,1,0) UOP(1,0,0,64,0,ADD)}; push(2,3) }
    q.load_buffer_2d(A, 0, VADD_N, 1, VADD_N, 0, 0, 0, 0, 0, MEM_ACC)
    q.load_buffer_2d(B, 0, VADD_N, 1, VADD_N, 0, 0, 0, 0, VADD_N, MEM_ACC)
    q.push_alu_op(("vadd", 0), record([(VADD_N, 1, 1, 0)], [(0, VADD_N, 0)], mode=1, opcode=ALU_ADD))
    q.dep_push(2, 3)
    q.dep_pop(2, 3)
    q.store_buffer_2d(0, MEM_OUT, C, 0, VADD_N, 1, VADD_N)
    q.synchronize()
    return q


def test_vector_add_structure_and_runs():
    cfg = load_config()
    q = vector_add(cfg)
    image = q.build()
    assert listing(image) == [("LD-ACC", ""), ("LD-ACC", ""), ("LD-UOP", ""), ("ALU", "u"), ("ST", "PU"),
                              ("NOP-MEM", "u"), ("NOP-COMPUTE", "Pp"), ("FINISH", "")]
    alu = decode_stream(cfg, image.insn_bytes())[3]
    # one ALU loop goes to the *inner* fields
    assert (alu.iter_out, alu.iter_in, alu.dst_factor_in, alu.src_factor_in) == (1, VADD_N, 1, 1)
    assert (alu.alu_opcode, alu.use_imm, alu.uop_bgn, alu.uop_end) == (ALU_ADD, 0, 0, 1)
    assert q.stats["uop_bytes"] == 4
    acc_bytes = 2 * VADD_N * cfg.acc_elem_bytes
    want = {"inp_load_nbytes": 0, "wgt_load_nbytes": 0, "acc_load_nbytes": acc_bytes, "uop_load_nbytes": 4,
            "out_store_nbytes": VADD_N * cfg.out_elem_bytes, "gemm_counter": 0, "alu_counter": VADD_N}
    for run in (run_functional, run_cycle):
        r = run(image)
        assert r.outputs["C"] == image.expected["C"]
        assert r.counters == want
        assert r.leftover_tokens == {}


# ---- spec 6.3: blocked GEMM 1x1024x1024 with the ALU epilogue ---------------------------------------
BG_IN, BG_OUT, BG_OC_BLK, BG_IC_BLK = 64, 64, 16, 16         # blocks; oc/ic blocks per tile


def blocked_gemm(cfg, seed=2):
    """The lowered program of compiler spec 6.3, with the epilogue drain pop(3,2) moved before the
    sync (compiler spec 5.4: the planner's pop after coproc_sync is a quirk a clean runtime refuses)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, size=(1, BG_IN, cfg.batch, cfg.block_in), dtype=np.int8)
    weight = rng.integers(-128, 128, size=(BG_OUT, BG_IN, cfg.block_out, cfg.block_in), dtype=np.int8)
    d = data.transpose(0, 2, 1, 3).reshape(cfg.batch, -1).astype(np.int64)
    w = weight.transpose(0, 2, 1, 3).reshape(BG_OUT * cfg.block_out, -1).astype(np.int64)
    ref = np.clip((d @ w.T) >> cfg.inp_width, 0, 127).astype(np.int8)
    ref = np.ascontiguousarray(ref.reshape(cfg.batch, BG_OUT, cfg.block_out).transpose(1, 0, 2)[None])
    q = CommandQueue(cfg, name="bgemm")
    D, W = q.alloc_input("data", data), q.alloc_input("weight", weight)
    R = q.alloc_output("res", ref.nbytes)
    q.expect("res", ref)
    q.dep_push(3, 2)
    for oc in range(BG_OUT // BG_OC_BLK):
        q.dep_pop(3, 2)
        q.push_gemm_op(("reset", 0), record([(BG_OC_BLK, 1, 0, 0)], [(0, 0, 0)], reset=1))
        q.dep_push(2, 1)
        for ic in range(BG_IN // BG_IC_BLK):
            q.dep_pop(2, 1)
            q.load_buffer_2d(D, ic * BG_IC_BLK, BG_IC_BLK, 1, BG_IC_BLK, 0, 0, 0, 0, 0, MEM_INP)
            q.load_buffer_2d(W, oc * BG_OC_BLK * BG_IN + ic * BG_IC_BLK, BG_IC_BLK, BG_OC_BLK, BG_IN,
                             0, 0, 0, 0, 0, MEM_WGT)
            q.dep_push(1, 2)
            q.dep_pop(1, 2)
            q.push_gemm_op(("gemm", 0), record([(BG_OC_BLK, 1, 0, BG_IC_BLK), (BG_IC_BLK, 0, 1, 1)], [(0, 0, 0)]))
            q.dep_push(2, 1)
        q.dep_pop(2, 1)
        for site, (op, imm) in enumerate(((ALU_SHR, cfg.inp_width), (ALU_MAX, 0), (ALU_MIN, 127))):
            q.push_alu_op(("alu", site), record([(BG_OC_BLK, 1, 1, 0)], [(0, 0, 0)], mode=1, opcode=op,
                                                use_imm=1, imm=imm))
        q.dep_push(2, 3)
        q.dep_pop(2, 3)
        for i in range(BG_OC_BLK):
            q.store_buffer_2d(i, MEM_OUT, R, oc * BG_OC_BLK + i, 1, 1, 1)
        q.dep_push(3, 2)
    q.dep_pop(3, 2)
    q.synchronize()
    return q


def test_blocked_gemm_structure_and_runs():
    cfg = load_config()
    q = blocked_gemm(cfg)
    image = q.build()
    st = q.stats
    # by hand: 5 kernels loaded once (uop SRAM never fills); per tile a reset GEMM + 4 GEMMs, 3 ALUs,
    # 16 stores; NOPs: prologue push(3,2), the previous tile's drain pop(2,1) meeting the next
    # tile's first pop(2,1) (3x), closing NOP-STORE/NOP-MEM pop/NOP-MEM push/2 NOP-COMPUTE
    assert st["insns_by_opcode"] == {"LOAD": 44, "STORE": 66, "GEMM": 20, "ALU": 12, "FINISH": 1}
    assert st["insns"] == 143 and st["nops"] == 9
    assert st["uop_kernels"] == 5 and st["uop_loads"] == 5 and st["uop_evictions"] == 0
    assert st["tokens"] == {"l2g": {"push": 17, "pop": 17}, "g2l": {"push": 20, "pop": 20},
                            "s2g": {"push": 6, "pop": 6}, "g2s": {"push": 4, "pop": 4}}
    kinds = listing(image)
    assert kinds[0] == ("NOP-STORE", "U")
    assert kinds[-6:] == [("NOP-STORE", "U"), ("NOP-MEM", "p"), ("NOP-MEM", "u"), ("NOP-COMPUTE", "p"),
                          ("NOP-COMPUTE", "Pp"), ("FINISH", "")]
    insns = decode_stream(cfg, image.insn_bytes())
    # NOP flavours of hardware spec 2.7: LOAD INP (load), LOAD UOP (compute), STORE UOP (store), all
    # sizes and addresses 0
    flavour = {(OP_LOAD, MEM_INP), (OP_LOAD, MEM_UOP), (OP_STORE, MEM_UOP)}
    nops = [i for i in insns if i.opcode in (OP_LOAD, OP_STORE) and i.x_size == 0]
    assert len(nops) == 9
    for i in nops:
        assert (i.opcode, i.memory_type) in flavour
        assert (i.sram_base, i.dram_base, i.y_size, i.x_stride, i.x_pad_0, i.x_pad_1, i.y_pad_0, i.y_pad_1) == (0,) * 8
    g = next(i for i in insns if i.opcode == OP_GEMM and not i.reset_reg)
    # two GEMM loops: loop[0] -> outer, loop[1] -> inner
    assert (g.iter_out, g.dst_factor_out, g.src_factor_out, g.wgt_factor_out) == (BG_OC_BLK, 1, 0, BG_IC_BLK)
    assert (g.iter_in, g.dst_factor_in, g.src_factor_in, g.wgt_factor_in) == (BG_IC_BLK, 0, 1, 1)
    want = {"inp_load_nbytes": 4 * 4 * BG_IC_BLK * cfg.inp_elem_bytes,
            "wgt_load_nbytes": 16 * BG_OC_BLK * BG_IC_BLK * cfg.wgt_elem_bytes,
            "acc_load_nbytes": 0, "uop_load_nbytes": 5 * cfg.uop_elem_bytes,
            "out_store_nbytes": BG_OUT * cfg.out_elem_bytes,
            "gemm_counter": 16 * BG_OC_BLK * BG_IC_BLK, "alu_counter": 4 * 3 * BG_OC_BLK}
    for run in (run_functional, run_cycle):
        r = run(image)
        assert r.outputs["res"] == image.expected["res"]
        assert r.counters == want and r.leftover_tokens == {}


def test_alu_loop_mapping():
    cfg = load_config()
    q = CommandQueue(cfg)
    q.push_alu_op("none", record([], [(0, 1, 0)], mode=1, opcode=ALU_ADD))
    q.push_alu_op("one", record([(3, 2, 1, 0)], [(0, 1, 0)], mode=1, opcode=ALU_ADD))
    q.push_alu_op("two", record([(3, 2, 1, 0), (5, 7, 6, 0)], [(0, 1, 0)], mode=1, opcode=ALU_ADD))
    q.push_gemm_op("gnone", record([], [(0, 0, 0)]))
    q.push_gemm_op("gone", record([(3, 2, 1, 4)], [(0, 0, 0)]))
    got = [(i.iter_out, i.dst_factor_out, i.src_factor_out, i.wgt_factor_out,
            i.iter_in, i.dst_factor_in, i.src_factor_in, i.wgt_factor_in) for i in q.insns if i.opcode != OP_LOAD]
    assert got == [(1, 0, 0, 0, 1, 0, 0, 0),            # ALU, no loop
                   (1, 0, 0, 0, 3, 2, 1, 0),            # ALU, one loop -> inner
                   (3, 2, 1, 0, 5, 7, 6, 0),            # ALU, two loops -> outer/inner
                   (1, 0, 0, 0, 1, 0, 0, 0),            # GEMM, no loop
                   (3, 2, 1, 4, 1, 0, 0, 0)]            # GEMM, one loop -> outer


def test_acc8_load_runs_in_compute_stage():
    cfg = load_config()
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, size=(8, cfg.batch, cfg.block_out), dtype=np.int8)
    q = CommandQueue(cfg)
    X = q.alloc_input("X", x)
    Y = q.alloc_output("Y", x.nbytes)
    q.dep_push(3, 2)
    q.dep_pop(3, 2)                         # a compute pop: it must ride the ACC_8BIT load
    q.load_buffer_2d(X, 2, 6, 1, 6, 0, 0, 0, 0, 2, MEM_ACC_8BIT)
    q.load_buffer_2d(X, 0, 2, 1, 2, 0, 0, 0, 0, 0, MEM_ACC_8BIT)
    q.dep_push(2, 3)
    q.dep_pop(2, 3)
    q.store_buffer_2d(0, MEM_OUT, Y, 0, 8, 1, 8)
    q.synchronize()
    image = q.build()
    kinds = listing(image)
    assert kinds[:4] == [("NOP-STORE", "U"), ("LD-ACC8", "p"), ("LD-ACC8", "u"), ("ST", "PU")]
    ld = decode_stream(cfg, image.insn_bytes())[1]
    assert ld.dram_base == image.segments[0].addr // cfg.acc8_elem_bytes + 2
    r = run_functional(image)
    assert r.outputs["Y"] == x.tobytes()
    # fsim counts an ACC_8BIT element at the accumulator element size (hardware spec 6)
    assert r.counters["acc_load_nbytes"] == 8 * cfg.acc_elem_bytes


# ---- spec 6.5: shift-and-scale (requantize pattern), fsim stats from a recorded run ---------------


def test_shift_and_scale_counters():
    cfg = load_config()
    m, n, shift, scale = 2, 8, 5, 3
    rng = np.random.default_rng(11)
    a = rng.integers(-(1 << 12), 1 << 12, size=(m, n, cfg.batch, cfg.block_out), dtype=np.int32)
    ref = ((a.astype(np.int64) + shift) >> scale).astype(np.int8)
    q = CommandQueue(cfg, name="shift_scale")
    A = q.alloc_input("A", a)
    R = q.alloc_output("res", ref.nbytes)
    q.expect("res", ref)
    q.load_buffer_2d(A, 0, m * n, 1, m * n, 0, 0, 0, 0, 0, MEM_ACC)
    for site, (op, imm) in enumerate(((ALU_ADD, shift), (ALU_SHR, scale))):
        # two folded loops (m, n) over contiguous rows
        q.push_alu_op(("alu", site), record([(m, n, n, 0), (n, 1, 1, 0)], [(0, 0, 0)], mode=1, opcode=op,
                                            use_imm=1, imm=imm))
    q.dep_push(2, 3)
    q.dep_pop(2, 3)
    q.store_buffer_2d(0, MEM_OUT, R, 0, m * n, 1, m * n)
    q.synchronize()
    image = q.build()
    r = run_functional(image)
    assert r.outputs["res"] == image.expected["res"]
    # compiler spec 6.5: acc_load 1024 B, uop 8 B, out 256 B, alu_counter 32
    assert r.counters == {"inp_load_nbytes": 0, "wgt_load_nbytes": 0, "acc_load_nbytes": 1024,
                          "uop_load_nbytes": 8, "out_store_nbytes": 256, "gemm_counter": 0, "alu_counter": 32}


# ---- kernel cache, ring eviction ------------------------------------------------------------------


def test_kernel_cached_and_not_reloaded_while_resident():
    cfg = load_config()
    q = CommandQueue(cfg)
    calls = []
    rec = record([(4, 1, 1, 0)], [(0, 0, 0)], mode=1, opcode=ALU_SHR, use_imm=1, imm=0, calls=calls)
    q.push_alu_op("k", rec)
    q.push_alu_op("k", rec)
    q.push_alu_op("k", lambda k: pytest.fail("recorded twice"))
    assert len(calls) == 1
    assert [i.opcode for i in q.insns] == [OP_LOAD, OP_ALU, OP_ALU, OP_ALU]
    assert q.stats["uop_loads"] == 1 and q.stats["kernel_hits"] == 2


def small_uop_cfg(depth_log2=3):
    cfg = load_config()
    # uop depth = uop buffer bytes / 4 bytes per uop
    return cfg.replace(LOG_UOP_BUFF_SIZE=depth_log2 + 2)


def test_ring_eviction_and_reload_runs_correctly():
    cfg = small_uop_cfg(3)
    assert cfg.uop_depth == 8
    rows = 24
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, size=(rows, cfg.batch, cfg.block_out), dtype=np.int32)
    q = CommandQueue(cfg, name="ring")
    X = q.alloc_input("X", x)
    Y = q.alloc_output("Y", rows * cfg.out_elem_bytes)
    # three ALU "add immediate" kernels of 5, 3, 4 uops on disjoint acc rows
    kernels = {"K1": (list(range(0, 5)), 1), "K2": (list(range(8, 11)), 2), "K3": (list(range(16, 20)), 3)}

    def rec(name):
        dsts, imm = kernels[name]
        return record([], [(d, 0, 0) for d in dsts], mode=1, opcode=ALU_ADD, use_imm=1, imm=imm)

    q.load_buffer_2d(X, 0, rows, 1, rows, 0, 0, 0, 0, 0, MEM_ACC)
    order = ["K1", "K2", "K3", "K2", "K1", "K2"]
    for name in order:
        q.push_alu_op(name, rec(name))
    q.dep_push(2, 3)
    q.dep_pop(2, 3)
    q.store_buffer_2d(0, MEM_OUT, Y, 0, rows, 1, rows)
    q.synchronize()
    # by hand: K1 -> [0,5), K2 -> [5,8), K3 wraps to [0,4) evicting K1, K2 still resident,
    # K1 wraps to [0,5) evicting K3, K2 (at 5) still resident
    loads = [(i.sram_base, i.x_size) for i in q.insns if i.opcode == OP_LOAD and i.memory_type == MEM_UOP
             and i.x_size]
    assert loads == [(0, 5), (5, 3), (0, 4), (0, 5)]
    alus = [(i.uop_bgn, i.uop_end, i.imm) for i in q.insns if i.opcode == OP_ALU]
    assert alus == [(0, 5, 1), (5, 8, 2), (0, 4, 3), (5, 8, 2), (0, 5, 1), (5, 8, 2)]
    st = q.stats
    assert st["uop_loads"] == 4 and st["uop_evictions"] == 2 and st["uop_kernels"] == 3 and st["uops"] == 12
    image = q.build()
    ref = x.copy()
    for name in order:
        dsts, imm = kernels[name]
        ref[dsts] += imm
    r = run_functional(image)
    assert r.outputs["Y"] == ref.astype(np.int8).tobytes()
    assert r.counters["uop_load_nbytes"] == (5 + 3 + 4 + 5) * cfg.uop_elem_bytes
    assert r.counters["alu_counter"] == sum(len(kernels[n][0]) for n in order)


def test_kernel_as_large_as_the_uop_buffer_fits_and_evicts_everything():
    cfg = small_uop_cfg(3)
    q = CommandQueue(cfg)
    q.push_alu_op("a", record([], [(d, 0, 0) for d in range(3)], mode=1, opcode=ALU_ADD, use_imm=1, imm=1))
    q.push_alu_op("b", record([], [(d, 0, 0) for d in range(8)], mode=1, opcode=ALU_ADD, use_imm=1, imm=1))
    q.push_alu_op("a", record([], [], mode=1))
    assert q.stats["uop_evictions"] == 2 and q.stats["uop_loads"] == 3


# ---- dependence flags ----------------------------------------------------------------------------


def test_pending_pop_nop_and_push_merging():
    cfg = load_config()
    rng = np.random.default_rng(5)
    x = rng.integers(-9, 9, size=(4, cfg.batch, cfg.block_out), dtype=np.int32)
    inp = rng.integers(-9, 9, size=(2, cfg.batch, cfg.block_in), dtype=np.int8)
    q = CommandQueue(cfg)
    X = q.alloc_input("X", x)
    I = q.alloc_input("I", inp)
    Y = q.alloc_output("Y", 4 * cfg.out_elem_bytes)
    q.load_buffer_2d(X, 0, 4, 1, 4, 0, 0, 0, 0, 0, MEM_ACC)                       # 0 LD-ACC
    q.push_alu_op("relu", record([(4, 1, 1, 0)], [(0, 0, 0)], mode=1, opcode=ALU_MAX, use_imm=1, imm=0))
    q.dep_push(2, 1)                # merges onto the ALU (push_prev)
    q.dep_push(2, 1)                # the ALU already pushes prev: a NOP-COMPUTE carries it
    q.dep_pop(2, 1)                 # pending pop_next on load
    q.dep_pop(2, 1)                 # second pending pop of the same kind: the first becomes a NOP-MEM
    q.load_buffer_2d(I, 0, 2, 1, 2, 0, 0, 0, 0, 0, MEM_INP)                       # carries the second pop
    q.dep_push(1, 2)                # merges onto the INP load (push_next)
    q.dep_push(2, 3)                # last insn is a load: NOP-COMPUTE(push_next)
    q.dep_pop(1, 2)                 # pending on compute ...
    q.dep_pop(2, 3)                 # pending on store
    q.dep_push(3, 2)                # commits the store pop as NOP-STORE, then merges push_prev onto it
    q.dep_pop(3, 2)                 # compute now has pop_prev and pop_next pending
    q.store_buffer_2d(0, MEM_OUT, Y, 0, 4, 1, 4)                                  # store: no pending pop
    q.synchronize()
    image = q.build()
    assert listing(image) == [
        ("LD-ACC", ""), ("LD-UOP", ""), ("ALU", "U"), ("NOP-COMPUTE", "U"),
        ("NOP-MEM", "p"), ("LD-INP", "pu"), ("NOP-COMPUTE", "u"), ("NOP-STORE", "PU"),
        # closing: push(3,2) merges onto the ST; push(1,2) -> NOP-MEM; pop(3,2) meets the program's
        # pending pop_next -> NOP-COMPUTE with both pending pops; then the closing pops
        ("ST", "U"), ("NOP-MEM", "u"), ("NOP-COMPUTE", "Pp"), ("NOP-COMPUTE", "Pp"), ("FINISH", "")]
    r = run_functional(image)
    assert r.outputs["Y"] == np.maximum(x, 0).astype(np.int8).tobytes()
    assert r.leftover_tokens == {}


def test_push_never_merges_into_a_nop_load():
    q = CommandQueue(load_config())
    q.dep_pop(2, 1)
    q.dep_push(1, 2)                # commits the pop as NOP-MEM, which a push may not merge into
    assert [(i.opcode, i.pop_next, i.push_next) for i in q.insns] == [(OP_LOAD, 1, 0), (OP_LOAD, 0, 1)]
    assert q.stats["nops"] == 2


# ---- automatic flush -----------------------------------------------------------------------------


@pytest.mark.parametrize("max_insns", [8, 13, 40])
def test_auto_flush_barrier(max_insns):
    cfg = load_config()
    q, calls = simple_gemm(cfg, max_insns=max_insns)
    image = q.build()
    st = q.stats
    assert st["flushes"] >= 1 and len(calls) == 2
    kinds = listing(image)
    assert [k for k, _ in kinds].count("FINISH") == 1 and kinds[-1] == ("FINISH", "")
    # every barrier ends with compute NOPs popping the load and the store token; when the program
    # had a compute pop pending, the closing pop of the same kind first commits it (pending-pop rule)
    origins = q.origins
    barrier_ends = [i for i, o in enumerate(origins)
                    if o == "flush" and (i + 1 == len(origins) or origins[i + 1] != "flush")]
    assert len(barrier_ends) == st["flushes"]
    for i in barrier_ends:
        assert kinds[i][0] == "NOP-COMPUTE" and "P" in kinds[i][1]
        group = kinds[i - 1][1] + kinds[i][1] if kinds[i - 1][0] == "NOP-COMPUTE" else kinds[i][1]
        assert "p" in group
    # TVM's rule per segment: an instruction is appended only while count + 6 <= max_insns
    start = 0
    for i in barrier_ends + [len(origins) - 1]:
        body = [o for o in origins[start:i + 1] if o not in ("flush", "synchronize")]
        assert len(body) <= max_insns - 6 + 2
        start = i + 1
    # uop residency is reset at each barrier: kernels come back with new LOAD UOPs
    assert st["uop_loads"] > 2
    r = run_functional(image)
    assert r.outputs["C"] == image.expected["C"]
    assert r.counters["gemm_counter"] == 256 and r.counters["uop_load_nbytes"] == 4 * st["uop_loads"]
    assert r.leftover_tokens == {}


def test_auto_flush_runs_on_cycle_engine():
    cfg = load_config()
    q, _ = simple_gemm(cfg, max_insns=13)
    image = q.build()
    r = run_cycle(image)
    assert r.outputs["C"] == image.expected["C"]


def test_default_max_insns_is_tvm_max_xfer():
    q = CommandQueue(load_config())
    assert q.max_insns == (1 << 25) // 16


# ---- errors --------------------------------------------------------------------------------------


def raises(match):
    return pytest.raises(RuntimeContractError, match=match)


@pytest.fixture
def q():
    return CommandQueue(load_config())


def test_error_class():
    assert issubclass(RuntimeContractError, SimError)


@pytest.mark.parametrize("loops,uops,kw,match", [
    ([], [(0, 0, 0), (0, 0, 0)], {}, r"uop 1 writes dst 0, which uop 0 also writes.*VerifyDep"),
    ([], [(0, 0, 0), (1, 0, 0), (0, 0, 0)], {}, r"uop 2 writes dst 0, which uop 0.*VerifyDep"),
    ([(2, 1, 0, 0)] * 3, [(0, 0, 0)], {}, r"loop level 3.*at most 2 loop levels"),
    ([(0, 1, 0, 0)], [(0, 0, 0)], {}, r"loop_begin: extent = 0 is out of range"),
    ([(16384, 1, 0, 0)], [(0, 0, 0)], {}, r"extent = 16384 is out of range \[1, 16383\]"),
    ([(4096, 1, 0, 0)], [(0, 0, 0)], {}, r"dst index reaches 4095.*beyond the acc buffer depth 2048"),
    ([], [(0, 2048, 0)], {}, r"uop 0: src = 2048 is out of range \[0, 2047\]"),
    ([], [], {}, r"pushed no uop"),
])
def test_gemm_kernel_errors(q, loops, uops, kw, match):
    with raises(r"push_gemm_op\(key='k'\).*" + match):
        q.push_gemm_op("k", record(loops, uops, **kw))
    assert q.insns == [] and q.kernels == []              # nothing emitted, nothing cached


def test_kernel_rule_errors(q):
    def loop_after_uop(k):
        k.push(0, 0, 0, 0, 0)
        k.loop_begin(2, 1, 0, 0)
    with raises(r"push_gemm_op\(key='a'\): loop_begin after uop 0.*every loop begins before the first uop"):
        q.push_gemm_op("a", loop_after_uop)

    def mixed_reset(k):
        k.push(0, 1, 0, 0, 0)
        k.push(0, 0, 1, 0, 0)
    with raises(r"key='b'.*uop 1 has reset = 0, uop 0 has 1.*share mode, reset"):
        q.push_gemm_op("b", mixed_reset)

    def mixed_imm(k):
        k.push(1, 0, 0, 0, 0, ALU_ADD, 1, 3)
        k.push(1, 0, 1, 0, 0, ALU_ADD, 1, 4)
    with raises(r"push_alu_op\(key='c'\).*uop 1 has imm = 4, uop 0 has 3.*opcode, use_imm and imm"):
        q.push_alu_op("c", mixed_imm)

    def mixed_op(k):
        k.push(1, 0, 0, 0, 0, ALU_ADD, 1, 3)
        k.push(1, 0, 1, 0, 0, ALU_MAX, 1, 3)
    with raises(r"uop 1 has opcode = 1, uop 0 has 2"):
        q.push_alu_op("d", mixed_op)
    with raises(r"push_gemm_op\(key='e'\).*uop 0 has mode 1 \(ALU\); this call records a GEMM kernel"):
        q.push_gemm_op("e", record([], [(0, 0, 0)], mode=1))
    with raises(r"push_alu_op\(key='f'\).*imm = 32768 is out of range \[-32768, 32767\]"):
        q.push_alu_op("f", record([], [(0, 0, 0)], mode=1, opcode=ALU_ADD, use_imm=1, imm=1 << 15))
    with raises(r"opcode = 7 is not an ALU opcode"):
        q.push_alu_op("g", record([], [(0, 0, 0)], mode=1, opcode=7))
    with raises(r"an ALU loop has no weight factor"):
        q.push_alu_op("h", record([(2, 1, 1, 1)], [(0, 0, 0)], mode=1, opcode=ALU_ADD))

    def unclosed(k):
        k.loop_begin(2, 1, 0, 0)
        k.push(0, 0, 0, 0, 0)
    with raises(r"1 loop_begin without loop_end"):
        q.push_gemm_op("i", unclosed)
    with raises(r"kernel_key \[1\] is not hashable"):
        q.push_gemm_op([1], record([], [(0, 0, 0)]))
    q.push_gemm_op("ok", record([], [(0, 0, 0)]))
    with raises(r"push_alu_op\(key='ok'\): the key names a GEMM kernel"):
        q.push_alu_op("ok", record([], [(0, 0, 0)], mode=1))


def test_kernel_larger_than_uop_buffer():
    cfg = small_uop_cfg(3)
    q = CommandQueue(cfg)
    with raises(r"push_alu_op\(key='big'\): kernel has 9 uops, more than the uop SRAM holds \(8"):
        q.push_alu_op("big", record([], [(d, 0, 0) for d in range(9)], mode=1, opcode=ALU_ADD, use_imm=1))


def test_load_store_errors(q):
    cfg = q.cfg
    a = q.alloc_input("A", np.zeros((4, cfg.batch, cfg.block_in), np.int8))
    c = q.alloc_output("C", 4 * cfg.out_elem_bytes)
    with raises(r"load_buffer_2d\(A, mem UOP\): dst_mem_type UOP: uop loads are made by push_gemm_op"):
        q.load_buffer_2d(a, 0, 1, 1, 1, 0, 0, 0, 0, 0, MEM_UOP)
    with raises(r"load_buffer_2d\(A, mem OUT\): dst_mem_type = 4 is not a load type"):
        q.load_buffer_2d(a, 0, 1, 1, 1, 0, 0, 0, 0, 0, MEM_OUT)
    with raises(r"load_buffer_2d\(A, mem INP\): x_size = 0 is out of range \[1, inf\]"):
        q.load_buffer_2d(a, 0, 0, 1, 1, 0, 0, 0, 0, 0, MEM_INP)
    with raises(r"load_buffer_2d\(A, mem INP\): instruction 0: field x_pad_0 = 16 does not fit 4 bits \[0, 15\]"):
        q.load_buffer_2d(a, 0, 1, 1, 1, 16, 0, 0, 0, 0, MEM_INP)
    with raises(r"load_buffer_2d\(A, mem INP\): .*x_stride = 65536 does not fit 16 bits"):
        q.load_buffer_2d(a, 0, 1, 1, 65536, 0, 0, 0, 0, 0, MEM_INP)
    with raises(r"load_buffer_2d\(A, mem INP\): touches bytes up to 80 of buffer 'A', which has 64"):
        q.load_buffer_2d(a, 1, 4, 1, 4, 0, 0, 0, 0, 0, MEM_INP)
    with raises(r"load_buffer_2d\(A, mem INP\): x_pad_before = -1 is out of range"):
        q.load_buffer_2d(a, 0, 1, 1, 1, -1, 0, 0, 0, 0, MEM_INP)
    with raises(r"writes SRAM elements \[2047, 2049\).*beyond the INP buffer depth 2048"):
        q.load_buffer_2d(a, 0, 2, 1, 2, 0, 0, 0, 0, cfg.inp_depth - 1, MEM_INP)
    with raises(r"load_buffer_2d\(A\): dst_mem_type = 1.5 must be an integer"):
        q.load_buffer_2d(a, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1.5)
    other = CommandQueue(cfg).alloc_input("A", np.zeros(16, np.int8))
    with raises(r"load_buffer_2d: .* is not a DramBuffer of this queue"):
        q.load_buffer_2d(other, 0, 1, 1, 1, 0, 0, 0, 0, 0, MEM_INP)
    with raises(r"store_buffer_2d\(C\): src_mem_type = 3 \(ACC\); a store reads the OUT view"):
        q.store_buffer_2d(0, MEM_ACC, c, 0, 1, 1, 1)
    with raises(r"store_buffer_2d\(C\): touches bytes up to 80 of buffer 'C'"):
        q.store_buffer_2d(0, MEM_OUT, c, 1, 4, 1, 4)
    with raises(r"store_buffer_2d\(C\): reads SRAM elements \[2046, 2050\), beyond the OUT buffer depth 2048"):
        q.store_buffer_2d(cfg.out_depth - 2, MEM_OUT, c, 0, 4, 1, 4)
    assert q.insns == []


def test_dependence_errors(q):
    with raises(r"dep_pop\(1, 3\): there is no token queue between load and store"):
        q.dep_pop(1, 3)
    with raises(r"dep_push\(3, 1\): there is no token queue between load and store"):
        q.dep_push(3, 1)
    with raises(r"dep_push\(2, 2\): a stage has no token queue to itself"):
        q.dep_push(2, 2)
    with raises(r"dep_pop\(0, 1\): from_stage = 0 is not a stage"):
        q.dep_pop(0, 1)


def test_buffer_and_queue_errors(q):
    q.alloc_input("A", np.zeros(16, np.int8))
    with raises(r"alloc_output\('A'\): the name is already used"):
        q.alloc_output("A", 16)
    with raises(r"alloc_input\('a/b'\): not a plain buffer name"):
        q.alloc_input("a/b", np.zeros(16, np.int8))
    with raises(r"alloc_output\('C'\): nbytes = 0 is out of range"):
        q.alloc_output("C", 0)
    with raises(r"expect\('A'\): no output of that name"):
        q.expect("A", b"\0" * 16)
    q.alloc_output("C", 16)
    with raises(r"expect\('C'\): 8 bytes given, the output has 16"):
        q.expect("C", b"\0" * 8)
    with raises(r"max_insns = 7 is out of range \[8, inf\]"):
        CommandQueue(q.cfg, max_insns=7)
    with raises(r"build: called before synchronize\(\)"):
        q.build()
    q.synchronize()
    with raises(r"dep_pop\(2, 1\): the stream was closed by synchronize\(\)"):
        q.dep_pop(2, 1)
    with raises(r"synchronize: the stream was closed"):
        q.synchronize()
    assert isinstance(q.build().insn_count, int)


def test_pop_without_push_is_refused_at_build(q):
    q.dep_pop(1, 2)
    q.push_gemm_op("k", record([], [(0, 0, 0)]))
    q.synchronize()
    with raises(r"build: token queue l2g has 2 pops and 1 pushes"):
        q.build()


def test_dram_buffer_is_exported():
    q = CommandQueue(load_config())
    a = q.alloc_input("A", np.zeros(64, np.int8))
    assert isinstance(a, DramBuffer) and a.nbytes == 64 and a.addr % 4096 == 0


def test_recorder_is_closed_after_its_callback(q):
    kept = []

    def rec(k):
        kept.append(k)
        k.push(0, 0, 0, 0, 0)
    q.push_gemm_op("k", rec)
    with raises(r"push_gemm_op\(key='k'\): push after the record callback returned"):
        kept[0].push(0, 0, 1, 0, 0)


def test_isa_width_error_names_the_call_and_emits_nothing():
    # HW_VER 0.0.1 has a 2-bit alu_opcode: MUL (4) does not fit; nothing may be emitted or cached
    q = CommandQueue(load_config().replace(HW_VER="0.0.1"))
    with raises(r"push_alu_op\(key='mul'\): instruction 0: field alu_opcode = 4 does not fit 2 bits \[0, 3\]"):
        q.push_alu_op("mul", record([], [(0, 0, 0)], mode=1, opcode=4, use_imm=1, imm=2))
    assert q.insns == [] and q.kernels == []


def test_numpy_integers_are_accepted():
    cfg = load_config()
    q = CommandQueue(cfg)
    a = q.alloc_input("A", np.zeros((4, cfg.batch, cfg.block_in), np.int8))
    n = np.int64
    q.load_buffer_2d(a, n(0), n(4), n(1), n(4), n(0), n(0), n(0), n(0), n(0), n(MEM_INP))
    q.dep_push(n(1), n(2))
    assert q.insns[0].x_size == 4 and q.insns[0].push_next == 1


def test_fast_and_checked_dma_paths_agree():
    """load/store_buffer_2d take a fast path for plain valid ints; it must build what the checked path
    builds, and hand every edge case (at and past each limit) to the checked path's errors."""
    cfg = load_config()
    rng = np.random.default_rng(13)
    queues = [CommandQueue(cfg), CommandQueue(cfg)]
    bufs = [(q.alloc_input("X", np.zeros(1 << 16, np.int8)), q.alloc_output("Y", 1 << 14)) for q in queues]
    for _ in range(300):
        mem = int(rng.choice([MEM_INP, MEM_WGT, MEM_ACC, MEM_ACC_8BIT]))
        depth = cfg.sram_depth(mem)
        x, y = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        pads = [int(v) for v in rng.integers(0, 3, size=4)]
        args = [int(rng.integers(0, 8)), x, y, x + int(rng.integers(0, 3)), *pads,
                int(rng.integers(depth - 60, depth)), mem]
        sargs = [int(rng.integers(cfg.out_depth - 40, cfg.out_depth)), MEM_OUT, int(rng.integers(0, 40)),
                 x, y, x + int(rng.integers(0, 3))]
        outcome = []
        for q, (X, Y) in zip(queues, bufs):
            fast = q is queues[0]
            try:
                (q.load_buffer_2d if fast else q._load_checked)(X, *args)
                r = "ok"
            except RuntimeContractError as e:
                r = str(e)
            try:
                (q.store_buffer_2d if fast else q._store_checked)(sargs[0], sargs[1], Y, *sargs[2:])
                r2 = "ok"
            except RuntimeContractError as e:
                r2 = str(e)
            outcome.append((r, r2))
        assert outcome[0] == outcome[1]
    assert queues[0].insns == queues[1].insns and queues[0].origins == queues[1].origins
    assert len(queues[0].insns) > 100                    # both outcomes were exercised
    assert len(queues[0].insns) < 600
