"""The four TVM VTA tutorials ported in examples/.

Each example's ``main`` is run (``--out`` saves its memory image) and must exit 0: it compiled
the schedule, ran the image on the functional and the cycle engine and matched the numpy
reference the script computes the way the TVM tutorial does.  Then the saved image is decoded
instruction by instruction and compared with the lowered programs of compiler spec 3.2 and 6.2-6.4
turned into an instruction stream by the runtime rules of compiler spec 5.2-5.4:

* a pending ``dep_pop`` rides on the next instruction of its stage; a second pending pop of the
  same kind first becomes a NOP carrying the earlier one;
* a ``dep_push`` sets the push bit of the stream's last instruction when that one belongs to the
  pushing stage and does not push that way yet, else it becomes a NOP (a NOP *load* belongs to no
  stage, so it never takes a later push; a NOP store does);
* a uop kernel is recorded once; a kernel not resident in uop SRAM is loaded (LOAD UOP in the
  compute stage, carrying the pending compute pops) right before its GEMM/ALU;
* ``coproc_sync`` closes with push(3,2), push(1,2), pop(3,2), pop(1,2), commit, FINISH.

Every expected listing, field and counter below is derived by hand from the tutorial's schedule
and those rules, never taken from the compiler's output; the derivations are in the comments.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest

import vtasim.sim.cycle
import vtasim.sim.functional
from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT, load_config
from vtasim.hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_SHR, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, \
    decode_stream, decode_uops
from vtasim.compiler.ops.data import requant_shift
from vtasim.sim.image import MemoryImage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CFG = load_config()
COUNTERS = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes", "out_store_nbytes",
            "gemm_counter", "alu_counter")


# ---- running the examples ------------------------------------------------------------------------


def load_example(name: str):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))          # the scripts import their helper _tutorial
    spec = importlib.util.spec_from_file_location(f"vta_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# (script, extra argv): the conv full size (C8) and reduced by 4 (64 -> 64 channels)
RUNS = {
    "vadd": ("vta_get_started", []),
    "gemm": ("matrix_multiply", []),
    "gemm_opt": ("matrix_multiply_opt", []),
    "conv_r4": ("convolution_opt", ["--reduce", "4"]),
    "conv": ("convolution_opt", []),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """key -> (exit code, stdout, saved image); each example runs once per module."""
    cache = {}

    def get(key):
        if key not in cache:
            script, extra = RUNS[key]
            out = tmp_path_factory.mktemp(key)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = load_example(script).main(["--out", str(out), *extra])
            cache[key] = (rc, buf.getvalue(), MemoryImage.load(out))
        return cache[key]
    return get


def printed_counters(text: str) -> dict:
    """The "Execution statistics" block the script printed: fsim counter name -> value."""
    got = dict(re.findall(r"^\t(\w+)\s*:\s*(\d+)$", text, flags=re.M))
    return {k: int(v) for k, v in got.items()}


# ---- decoding an image ---------------------------------------------------------------------------


def kind_of(i) -> str:
    if i.opcode == OP_LOAD:
        if i.x_size == 0:
            return {MEM_INP: "NOP-MEM", MEM_UOP: "NOP-COMPUTE"}[i.memory_type]
        return {MEM_UOP: "LD-UOP", MEM_INP: "LD-INP", MEM_WGT: "LD-WGT", MEM_ACC: "LD-ACC",
                MEM_ACC_8BIT: "LD-ACC8"}[i.memory_type]
    if i.opcode == OP_STORE:
        return "NOP-STORE" if i.x_size == 0 else "ST"
    return {OP_GEMM: "GEMM", OP_ALU: "ALU", OP_FINISH: "FINISH"}[i.opcode]


def flags_of(i) -> str:
    # P pop_prev, p pop_next, U push_prev, u push_next
    return "".join(c for c, f in (("P", i.pop_prev), ("p", i.pop_next), ("U", i.push_prev), ("u", i.push_next)) if f)


def decode(image):
    """[(kind, flags, insn, uops)]: uops of a GEMM/ALU are the (dst, src, wgt) triples it executes,
    read through a model of the uop SRAM that only the image's LOAD UOPs fill (from DRAM)."""
    cfg = image.cfg
    dram = image.dram()
    eb = cfg.uop_elem_bytes
    sram = {}
    rows = []
    for i in decode_stream(cfg, image.insn_bytes()):
        kind, uops = kind_of(i), None
        if kind == "LD-UOP":
            assert i.y_size == 1
            words = dram[i.dram_base * eb:(i.dram_base + i.x_size) * eb].view("<u4")
            for k, t in enumerate(zip(*decode_uops(cfg, words))):
                sram[i.sram_base + k] = tuple(int(v) for v in t)
        elif kind in ("GEMM", "ALU"):
            uops = [sram[k] for k in range(i.uop_bgn, i.uop_end)]     # KeyError: a uop never loaded
        rows.append((kind, flags_of(i), i, uops))
    return rows


def check_stream(image, want):
    """Compare the decoded image with ``want``: [(kind, flags, {field: value}, uops or None)]."""
    got = decode(image)
    assert [(k, f) for k, f, _, _ in got] == [(k, f) for k, f, _, _ in want]
    for n, ((kind, _, insn, uops), (_, _, fields, want_uops)) in enumerate(zip(got, want)):
        have = {name: getattr(insn, name) for name in fields}
        assert have == fields, f"instruction {n} ({kind})"
        if want_uops is not None:
            assert uops == want_uops, f"uops of instruction {n} ({kind})"
    return got


def ld(sram, dram, x, y, stride, pads=(0, 0, 0, 0)):
    """LOAD fields; pads = (x before, y before, x after, y after) as VTALoadBuffer2D takes them."""
    return dict(sram_base=sram, dram_base=dram, x_size=x, y_size=y, x_stride=stride,
                x_pad_0=pads[0], y_pad_0=pads[1], x_pad_1=pads[2], y_pad_1=pads[3])


def st(sram, dram, x, y, stride):
    return dict(sram_base=sram, dram_base=dram, x_size=x, y_size=y, x_stride=stride)


def loops(outer=(1, 0, 0, 0), inner=(1, 0, 0, 0), reset=None):
    """GEMM/ALU loop fields: (extent, dst, src, wgt) of the outer and inner hardware loop."""
    f = dict(iter_out=outer[0], dst_factor_out=outer[1], src_factor_out=outer[2],
             iter_in=inner[0], dst_factor_in=inner[1], src_factor_in=inner[2])
    if reset is not None:                       # GEMM only: reset flag and weight factors
        f.update(reset_reg=reset, wgt_factor_out=outer[3], wgt_factor_in=inner[3])
    return f


def alu(op, use_imm, imm, outer=(1, 0, 0, 0), inner=(1, 0, 0, 0)):
    return dict(loops(outer, inner), alu_opcode=op, use_imm=use_imm, imm=imm)


CLOSE = [("NOP-MEM", "u", {}, None),            # sync push(1,2): a NOP load takes no later push
         ("NOP-COMPUTE", "Pp", {}, None),       # sync pop(3,2) + pop(1,2), committed together
         ("FINISH", "", {}, None)]


def segment_base(image, elem_bytes, dram_base, nbytes):
    """A load's dram_base must be the start of an input segment of the input's size."""
    seg = [s for s in image.segments if s.addr == dram_base * elem_bytes]
    assert len(seg) == 1 and len(seg[0].data) >= nbytes
    return dram_base


def run_both(image):
    """Run on both engines: output equals the image's expected (numpy) bytes, no token left;
    returns the (equal) counters and the cycle count."""
    results = [vtasim.sim.functional.run_image(image), vtasim.sim.cycle.run_image(image)]
    for r in results:
        for name, data in image.expected.items():
            assert r.outputs[name] == data, f"{r.engine}: output {name} differs"
        assert r.leftover_tokens == {}
    assert results[0].counters == results[1].counters
    return results[1].counters, results[1].cycles


def check_run(runs, key, want_counters):
    rc, text, image = runs(key)
    assert rc == 0, text[-2000:]
    counters, cycles = run_both(image)
    assert counters == want_counters
    printed = printed_counters(text)
    assert {k: printed[k] for k in COUNTERS} == want_counters        # fsim names, as the script printed them
    assert printed["cycle_count"] == cycles > 0                        # the cycle engine is deterministic
    return image


# ---- vector add (spec 3.2) -----------------------------------------------------------------------
# Schedule: A_buf, B_buf, C_buf in acc; DMA on A_buf, B_buf, C; alu on C_buf. m = 64 elements.
# Lowered (spec 3.2): CS(2){ LD(A, x=64, y=1, stride=64, sram 0, ACC); LD(B, ..., sram 64, ACC);
#   UOPK{ LOOP(64, 1, 1, 0) UOP(1, 0, dst 0, src 64, ADD) }; push(2,3) } CS(3){ pop(2,3); ST(0, x=64) }; sync
VADD_M = 64


def test_vector_add(runs):
    # counters: two ACC loads of 64 elements x 64 B; one kernel of 1 uop (4 B) loaded once;
    # 64 output elements x 16 B; the ALU runs 1 uop x 64 iterations; no GEMM.
    want = {"inp_load_nbytes": 0, "wgt_load_nbytes": 0, "acc_load_nbytes": 2 * VADD_M * 64,
            "uop_load_nbytes": 1 * 4, "out_store_nbytes": VADD_M * 16, "gemm_counter": 0, "alu_counter": VADD_M}
    image = check_run(runs, "vadd", want)
    rows = decode(image)
    a = segment_base(image, 64, rows[0][2].dram_base, VADD_M * 64)
    b = segment_base(image, 64, rows[1][2].dram_base, VADD_M * 64)
    c = image.output("C").addr // 16
    check_stream(image, [
        ("LD-ACC", "", ld(0, a, VADD_M, 1, VADD_M), None),
        ("LD-ACC", "", ld(VADD_M, b, VADD_M, 1, VADD_M), None),     # B right after A in the merged acc buffer
        ("LD-UOP", "", dict(x_size=1), None),
        # one ALU loop -> the inner fields; C_buf computed in place over A_buf
        ("ALU", "u", alu(ALU_ADD, 0, 0, inner=(VADD_M, 1, 1, 0)), [(0, VADD_M, 0)]),      # push(2,3) merges
        ("ST", "PU", st(0, c, VADD_M, 1, VADD_M), None),            # pop(2,3); sync push(3,2) merges
        *CLOSE])


# ---- simple GEMM (spec 3.3 / 6.2) ----------------------------------------------------------------
# o = 1, n = m = 16 blocks.  Lowered (spec 6.2):
#   CS(2){ UOPK{LOOP(16,1,0,0) UOP reset} push(2,1) }
#   for ko < 16: CS(1){ pop(2,1); LD(A, ko, 1,1,1, INP); LD(B, ko, 1,16,16, WGT); push(1,2) }
#                CS(2){ pop(1,2); UOPK{LOOP(16,1,0,1) UOP(0,0,0)}; push(2,1) }
#   push(2,3); pop(2,1); CS(3){ pop(2,3); ST(0, C, 0, 16, 1, 16) }; sync
N, M = 16, 16


def test_simple_gemm(runs):
    # fsim stats printed by TVM for this schedule (spec 3.3): 16 loads of one 16 B input element;
    # 16 loads of 16 weight elements x 256 B; 2 kernels of 1 uop; 16 output elements; each of the
    # 16 GEMMs runs 16 iterations of 1 uop (the reset GEMM does not count).
    want = {"inp_load_nbytes": 256, "wgt_load_nbytes": 65536, "acc_load_nbytes": 0, "uop_load_nbytes": 8,
            "out_store_nbytes": 256, "gemm_counter": 256, "alu_counter": 0}
    assert want["inp_load_nbytes"] == N * 16 and want["wgt_load_nbytes"] == N * M * 256
    assert want["gemm_counter"] == N * M and want["out_store_nbytes"] == M * 16
    image = check_run(runs, "gemm", want)
    rows = decode(image)
    a = segment_base(image, 16, rows[2][2].dram_base, N * 16)
    b = segment_base(image, 256, rows[3][2].dram_base, M * N * 256)
    c = image.output("C").addr // 16
    want_rows = [("LD-UOP", "", dict(x_size=1), None),
                 ("GEMM", "U", loops((M, 1, 0, 0), reset=1), [(0, 0, 0)])]           # push(2,1) merges
    for ko in range(N):
        want_rows += [("LD-INP", "p", ld(0, a + ko, 1, 1, 1), None),                # pop(2,1) rides the load
                      ("LD-WGT", "u", ld(0, b + ko, 1, M, N), None)]                # push(1,2) merges
        if ko == 0:                                                                  # first use: load the kernel
            want_rows += [("LD-UOP", "P", dict(x_size=1), None)]
        want_rows += [("GEMM", "U" if ko == 0 else "PU", loops((M, 1, 0, 1), reset=0), [(0, 0, 0)])]
    want_rows[-1] = want_rows[-1][:1] + ("PUu",) + want_rows[-1][2:]                 # push(2,3) merges too
    want_rows += [("ST", "PU", st(0, c, M, 1, M), None),           # pop(2,3); sync push(3,2) merges
                  ("NOP-MEM", "p", {}, None)]                       # the drain pop(2,1), committed by push(1,2)
    check_stream(image, want_rows + CLOSE)


# ---- blocked GEMM with the ALU epilogue (spec 3.4 / 6.3) -----------------------------------------
# 1 x 1024 x 1024 in blocks of 16: 64 ic blocks, 64 oc blocks; tiles of 16 x 16 blocks -> 4 oc_out
# tiles x 4 ic_out steps.  Lowered (spec 6.3), with the final pop(3,2) before the sync (spec 5.4).
IC_B, OC_B, TILE = 64, 64, 16


def test_blocked_gemm(runs):
    # fsim stats printed by TVM (spec 3.4).  By hand: 4 x 4 input tiles of 16 elements x 16 B;
    # 4 x 4 weight tiles of 16 x 16 elements x 256 B; 5 kernels (reset, GEMM, SHR, MAX, MIN) of one
    # uop each, loaded once; 64 output elements; 16 GEMMs x 16 x 16 iterations; 4 tiles x 3 ALU
    # ops x 16 iterations.
    want = {"inp_load_nbytes": 4096, "wgt_load_nbytes": 1048576, "acc_load_nbytes": 0, "uop_load_nbytes": 20,
            "out_store_nbytes": 1024, "gemm_counter": 4096, "alu_counter": 192}
    assert want["inp_load_nbytes"] == 4 * 4 * TILE * 16 and want["wgt_load_nbytes"] == 4 * 4 * TILE * TILE * 256
    assert want["gemm_counter"] == 16 * TILE * TILE and want["alu_counter"] == 4 * 3 * TILE
    assert want["uop_load_nbytes"] == 5 * 4 and want["out_store_nbytes"] == OC_B * 16
    image = check_run(runs, "gemm_opt", want)
    rows = decode(image)
    d = segment_base(image, 16, rows[3][2].dram_base, IC_B * 16)
    w = segment_base(image, 256, rows[4][2].dram_base, OC_B * IC_B * 256)
    r = image.output("res").addr // 16
    epilogue = [(ALU_SHR, requant_shift(IC_B * 16)), (ALU_MAX, 0), (ALU_MIN, 127)]   # the data rule's shift
    want_rows = [("NOP-STORE", "U", {}, None)]                     # prologue push(3,2): empty stream
    for oc in range(OC_B // TILE):
        first = oc == 0
        # CS(2){ pop(3,2); reset kernel; push(2,1) }
        reset = ("GEMM", "U" if first else "pU", loops((TILE, 1, 0, 0), reset=1), [(0, 0, 0)])
        want_rows += [("LD-UOP", "p", dict(x_size=1), None), reset] if first else [reset]
        for ic in range(IC_B // TILE):
            if ic == 0 and not first:       # the previous tile's drain pop(2,1) is still pending
                want_rows += [("NOP-MEM", "p", {}, None)]
            want_rows += [("LD-INP", "p", ld(0, d + ic * TILE, TILE, 1, TILE), None),
                          ("LD-WGT", "u", ld(0, w + oc * TILE * IC_B + ic * TILE, TILE, TILE, IC_B), None)]
            gemm = loops((TILE, 1, 0, TILE), (TILE, 0, 1, 1), reset=0)           # two folded loops
            if first and ic == 0:
                want_rows += [("LD-UOP", "P", dict(x_size=1), None), ("GEMM", "U", gemm, [(0, 0, 0)])]
            else:
                want_rows += [("GEMM", "PU", gemm, [(0, 0, 0)])]
        # pop(2,1) (stays pending); CS(2){ SHR s; MAX 0; MIN 127; push(2,3) }
        for n, (op, imm) in enumerate(epilogue):
            if first:
                want_rows += [("LD-UOP", "", dict(x_size=1), None)]
            want_rows += [("ALU", "u" if n == 2 else "", alu(op, 1, imm, inner=(TILE, 1, 1, 0)), [(0, 0, 0)])]
        # CS(3){ pop(2,3); 16 x ST(i, res, oc*16 + i, 1, 1, 1); push(3,2) }
        for i in range(TILE):
            want_rows += [("ST", "P" if i == 0 else "U" if i == TILE - 1 else "", st(i, r + oc * TILE + i, 1, 1, 1),
                           None)]
    # epilogue pop(3,2) pending; sync push(3,2): the last ST already pushes prev -> a NOP store;
    # sync push(1,2) commits the drain pop(2,1); sync pop(3,2) meets the pending one -> NOP
    want_rows += [("NOP-STORE", "U", {}, None), ("NOP-MEM", "p", {}, None), ("NOP-MEM", "u", {}, None),
                  ("NOP-COMPUTE", "p", {}, None), ("NOP-COMPUTE", "Pp", {}, None), ("FINISH", "", {}, None)]
    check_stream(image, want_rows)


# ---- conv2d C8 with two virtual threads (spec 3.5 / 6.4) -----------------------------------------
# H = W = 14, 3x3, pad 1, stride 1; IC = OC = 256 / R (R = --reduce), i.e. ICB = OCB = 16 / R blocks.
# Schedule: oc_block = 8 / R blocks per tile, h_block 7, w_block 14, ic_block 1; oc_out (2 tiles)
# split by 2 and bound to cthread -> thread t owns oc blocks [t*OPT, (t+1)*OPT) with OPT = 8 / R;
# y_out = 2 row blocks; 16 / R ic steps.  Per thread: inp tile 9 x 16 = 144 elements (7 rows + halo,
# 14 columns + 2 pads), wgt tile OPT x 9, acc tile OPT x 7 x 14.


def conv_counters(R):
    icb = ocb = 16 // R
    opt = 8 // R
    threads, yblocks = 2, 2
    loads = yblocks * threads * icb                # one data + one kernel load per (row block, thread, ic step)
    return {
        # each load moves the 8 real rows (one halo row is padding) x 14 columns of 16 B
        "inp_load_nbytes": loads * 8 * 14 * 16,
        # each kernel load moves OPT oc blocks x 3 x 3 elements of 256 B
        "wgt_load_nbytes": loads * opt * 9 * 256,
        "acc_load_nbytes": 0,
        # kernels, each loaded once (uop SRAM 8192 entries, one sync): per thread a reset kernel of
        # 14 uops (oc and row loops folded, the 14 columns not), a GEMM kernel of 3 x 3 x 14 = 126
        # uops (dy, dx, column stay software loops) and 3 ALU kernels of 1 uop; 4 B per uop
        "uop_load_nbytes": threads * (14 + 126 + 3) * 4,
        "out_store_nbytes": ocb * 14 * 14 * 16,     # the whole output once, 16 B per element
        # every (oc block, output pixel) x (ic block, dy, dx) MAC tile exactly once
        "gemm_counter": ocb * 14 * 14 * icb * 9,
        # 3 ALU ops over each thread's OPT x 7 x 14 accumulator elements, per thread and row block
        "alu_counter": 3 * (opt * 7 * 14) * threads * yblocks,
    }


def test_conv_counters_by_hand():
    # the full C8 layer, as in the issue: gemm 14*14*9*16*16 (spec 6.4's cross-check), alu 3 x 784 x 2 x 2
    assert conv_counters(1) == {"inp_load_nbytes": 114688, "wgt_load_nbytes": 1179648, "acc_load_nbytes": 0,
                                "uop_load_nbytes": 1144, "out_store_nbytes": 50176, "gemm_counter": 451584,
                                "alu_counter": 9408}


def conv_stream(image, R):
    icb = 16 // R
    opt = 8 // R
    acc = opt * 7 * 14                                          # accumulator elements per thread
    rows = decode(image)
    first_ld = next(i for k, _, i, _ in rows if k == "LD-INP")
    first_wl = next(i for k, _, i, _ in rows if k == "LD-WGT")
    data = segment_base(image, 16, first_ld.dram_base, icb * 14 * 14 * 16)
    kern = segment_base(image, 256, first_wl.dram_base, 2 * opt * icb * 9 * 256)
    res = image.output("res").addr // 16
    want = [("NOP-STORE", "U", {}, None), ("NOP-STORE", "U", {}, None)]   # 2 priming push(3,2): a NOP store
    for yb in range(2):                                                    # already pushing prev takes no 2nd
        for t in range(2):
            # CS(2){ pop(3,2); reset UOPK{LOOP(OPT,98,0,0) LOOP(7,14,0,0) 14 x UOP(t*acc + j)}; push(2,1) }
            reset = ("GEMM", "U" if yb == 0 else "pU", loops((opt, 98, 0, 0), (7, 14, 0, 0), reset=1),
                     [(t * acc + j, 0, 0) for j in range(14)])
            want += [("LD-UOP", "p", dict(x_size=14), None), reset] if yb == 0 else [reset]
        for ic in range(icb):
            if yb == 1 and ic == 0:          # the last row block's 2nd drain pop(2,1) is still pending
                want += [("NOP-MEM", "p", {}, None)]
            for t in range(2):
                # pop(2,1); LD(data): rows yb*7-1 .. yb*7+7 of which one is the image border (padded),
                # columns padded by 1 on both sides; LD(kernel): OPT rows of 9 elements; push(1,2)
                pads = (1, 1, 1, 0) if yb == 0 else (1, 0, 1, 1)
                want += [("LD-INP", "p", ld(t * 144, data + ic * 196 + (0 if yb == 0 else 6 * 14), 14, 8, 14, pads),
                          None),
                         ("LD-WGT", "u", ld(t * opt * 9, kern + t * opt * icb * 9 + ic * 9, 9, opt, icb * 9), None)]
            for t in range(2):
                # pop(1,2); UOPK{LOOP(OPT, 98, 0, 9) LOOP(7, 14, 16, 0) dy, dx, j: UOP(...)}; push(2,1)
                gemm = ("GEMM", "U" if yb == 0 and ic == 0 else "PU",
                        loops((opt, 98, 0, 9), (7, 14, 16, 0), reset=0),
                        [(t * acc + j, t * 144 + dy * 16 + dx + j, t * opt * 9 + dy * 3 + dx)
                         for dy in range(3) for dx in range(3) for j in range(14)])
                want += [("LD-UOP", "P", dict(x_size=126), None), gemm] if yb == 0 and ic == 0 else [gemm]
        want += [("NOP-MEM", "p", {}, None)]         # pop(2,1) x 2: the second commits the first as a NOP
        for t in range(2):
            # CS(2){ SHR s, MAX 0, MIN 127, each UOPK{LOOP(acc, 1, 1, 0) UOP(t*acc, t*acc)}; push(2,3) }
            for n, (op, imm) in enumerate([(ALU_SHR, requant_shift(icb * 16 * 9)), (ALU_MAX, 0), (ALU_MIN, 127)]):
                if yb == 0:
                    want += [("LD-UOP", "", dict(x_size=1), None)]
                want += [("ALU", "u" if n == 2 else "", alu(op, 1, imm, inner=(acc, 1, 1, 0)), [(t * acc, t * acc, 0)])]
        for t in range(2):
            # CS(3){ pop(2,3); OPT x 7 x 14 single-element stores; push(3,2) }
            n = 0
            for co in range(opt):
                for i in range(7):
                    for j in range(14):
                        flag = "P" if n == 0 else "U" if n == acc - 1 else ""
                        want += [("ST", flag, st(t * acc + co * 98 + i * 14 + j,
                                                 res + (t * opt + co) * 196 + (yb * 7 + i) * 14 + j, 1, 1, 1), None)]
                        n += 1
    # epilogue pop(3,2) x 2: the second commits the first; then the sync (as for the blocked GEMM)
    want += [("NOP-COMPUTE", "p", {}, None),
             ("NOP-STORE", "U", {}, None), ("NOP-MEM", "p", {}, None), ("NOP-MEM", "u", {}, None),
             ("NOP-COMPUTE", "p", {}, None), ("NOP-COMPUTE", "Pp", {}, None), ("FINISH", "", {}, None)]
    check_stream(image, want)
    return rows


@pytest.mark.parametrize("key,R", [("conv_r4", 4), ("conv", 1)])
def test_conv2d_virtual_threads(runs, key, R):
    image = check_run(runs, key, conv_counters(R))
    rows = conv_stream(image, R)
    # the tallies spec 6.4 implies: 2 threads x 2 row blocks x ICB of data + kernel loads, 10 uop
    # kernels loaded once, one reset + ICB GEMMs per thread and row block, 3 ALU ops per thread and
    # row block, every output element stored once, 11 NOPs (2 prologue, 3 pending-pop commits,
    # 1 epilogue, 5 closing)
    icb, acc = 16 // R, (8 // R) * 7 * 14
    kinds = [k for k, _, _, _ in rows]
    assert kinds.count("LD-INP") == kinds.count("LD-WGT") == 2 * 2 * icb
    assert kinds.count("LD-UOP") == 10
    assert kinds.count("GEMM") == 2 * 2 * (1 + icb) and kinds.count("ALU") == 2 * 2 * 3
    assert kinds.count("ST") == 2 * 2 * acc
    assert sum(kinds.count(k) for k in ("NOP-MEM", "NOP-COMPUTE", "NOP-STORE")) == 11


# ---- the scripts themselves ----------------------------------------------------------------------


def test_mismatch_exits_1(monkeypatch, capsys):
    """A wrong reference makes main return 1 (the scripts' check can fail)."""
    mod = load_example("vta_get_started")
    real = mod.run
    monkeypatch.setattr(mod, "run", lambda built, name, ref, out: real(built, name, ref + 1, out))
    assert mod.main([]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_saved_image_replays_with_vtasim_run(runs, tmp_path):
    from vtasim.sim.cli import main as vtasim
    _, _, image = runs("gemm_opt")
    image.save(tmp_path / "img")
    assert vtasim(["run", str(tmp_path / "img"), "--engine", "cycle", "--check"]) == 0


@pytest.mark.parametrize("preset", ["1x8x8", "1x32x32", "2x16x16"])
def test_examples_on_presets(preset, tmp_path):
    """--config: the same scripts (conv reduced) on the other presets, still bit-exact."""
    cfg = str(Path(__file__).resolve().parents[2] / "config" / "presets" / f"{preset}.json")
    for script, extra in (("vta_get_started", []), ("matrix_multiply", []), ("matrix_multiply_opt", []),
                          ("convolution_opt", ["--reduce", "4"])):
        with contextlib.redirect_stdout(io.StringIO()) as buf:
            rc = load_example(script).main(["--config", cfg, *extra])
        assert rc == 0, f"{script} on {preset}:\n{buf.getvalue()[-2000:]}"
