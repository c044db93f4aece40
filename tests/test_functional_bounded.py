"""The functional model on legal maximal loop nests: memory bounded by the SRAMs (not the nest), results
against independent references (numpy / Python integers on the nest's closed form, a brute-force walk).

Peak memory is measured in a subprocess (``VmHWM``: ``ru_maxrss`` would inherit the pytest worker's
peak across exec) so one test's allocations cannot hide another's."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_INP, MEM_UOP, MEM_WGT, load_config
from vtasim.hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.functional import run_program
from vtasim.sim.program import load_program
from test_functional import i32, ref_alu

CFG = load_config()
LANES = CFG.batch * CFG.block_out
ROOT = Path(__file__).resolve().parent.parent
MAX_ITER = 16383                       # 14-bit iteration fields of the default config
M32 = 0xFFFFFFFF


def gemm_program(cfg, uops, inp, wgt, acc0=None, **loop):
    b = ProgramBuilder(cfg)
    xb = b.data("x", inp)
    wb = b.data("w", wgt)
    ub = b.uops(uops)
    b.load(memory_type=MEM_INP, dram_base=xb, x_size=len(inp), push_next=1)
    b.load(memory_type=MEM_WGT, dram_base=wb, x_size=len(wgt), push_next=1)
    b.load(memory_type=MEM_UOP, dram_base=ub, pop_prev=1)
    b.load(memory_type=MEM_UOP, dram_base=ub, pop_prev=1)
    if acc0 is not None:
        b.load(memory_type=MEM_ACC, dram_base=b.data("a", acc0), x_size=len(acc0))
    b.gemm(uop_end=len(uops), **loop)
    b.finish()
    return b.build()


def alu_program(cfg, uops, acc0, **alu):
    b = ProgramBuilder(cfg)
    ub = b.uops(uops)
    b.load(memory_type=MEM_UOP, dram_base=ub)
    b.load(memory_type=MEM_ACC, dram_base=b.data("a", acc0), x_size=len(acc0))
    b.alu(uop_end=len(uops), **alu)
    b.finish()
    return b.build()


def run_acc(img):
    m = run_program(load_program(img), img.dram())
    return m.acc.astype(np.int64), m.counters


def run_in_subprocess(body: str) -> dict:
    """Run ``body`` (which builds ``img`` and defines ``check(machine)``, returning JSON-able values) in a
    fresh interpreter; return ``check``'s value, the peak RSS before the run (imports, build, compiled
    kernel loaded) and after it."""
    script = "\n".join([
        "import json, resource, sys",
        f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]",
        "from test_functional_bounded import *",
        "from vtasim.sim.functional import _alu_sequential",
        "_alu_sequential(np.zeros((2, 2), np.int32), 2, np.zeros(1, np.int64), np.ones(1, np.int64), 1, 1, 0, 0, 0, 0)",
        textwrap.dedent(body),
        "prog, dram = load_program(img), img.dram()",
        "before = int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1]) * 1024",
        "m = run_program(prog, dram)",
        "peak = int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1]) * 1024",
        "print(json.dumps({'check': check(m), 'peak': peak, 'before': before}))"])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# A bound derived from the sizes: the SRAMs and DRAM are a few MB on the default config; the loop nest
# of 16383 x 16383 x 8 = 2^31 uops would need 16 GiB per index array.  Chunked temporaries and the
# interpreter's own growth stay far below this.
RUN_BOUND = 256 << 20


def test_maximal_gemm_nest_is_bounded_and_exact():
    """GEMM 16383 x 16383 x 8 uops (factors 0: the same 8 uops 2^28 times): the accumulator rows against
    numpy's tile * 16383^2 mod 2^32, in a subprocess whose peak RSS grows by less than RUN_BOUND."""
    r = run_in_subprocess("""
        rng = np.random.default_rng(7)
        inp = rng.integers(-128, 128, (8, CFG.batch * CFG.block_in)).astype(np.int8)
        wgt = rng.integers(-128, 128, (8, CFG.block_out * CFG.block_in)).astype(np.int8)
        uops = [(u % 5, u, (3 * u) % 8) for u in range(8)]
        img = gemm_program(CFG, uops, inp, wgt, iter_out=MAX_ITER, iter_in=MAX_ITER)
        def check(m):
            return [m.acc[:5].tolist(), m.counters["gemm_counter"]]
    """)
    rng = np.random.default_rng(7)
    inp = rng.integers(-128, 128, (8, CFG.batch, CFG.block_in)).astype(np.int64)
    wgt = rng.integers(-128, 128, (8, CFG.block_out, CFG.block_in)).astype(np.int64)
    want = np.zeros((5, LANES), np.int64)
    for u in range(8):
        want[u % 5] += (inp[u] @ wgt[(3 * u) % 8].T).reshape(-1) * MAX_ITER * MAX_ITER
    want = ((want + (1 << 31)) & M32) - (1 << 31)
    acc, count = r["check"]
    assert acc == want.tolist()
    assert count == 8 * MAX_ITER * MAX_ITER
    assert r["peak"] - r["before"] < RUN_BOUND, f"RSS grew by {(r['peak'] - r['before']) >> 20} MiB"


def test_maximal_alu_immediate_nest_is_bounded_and_exact():
    """ALU ADD/imm 16383 x 16383 x 8 uops over 2048 rows (inner dst factor 1 with 2048 iterations would
    not fit: outer factor 0, inner loop over rows via the uops): closed form x + k*imm per row."""
    r = run_in_subprocess("""
        acc0 = (np.arange(16 * LANES).reshape(16, LANES) * 7919 - 50000).astype("<i4")
        uops = [(u % 3, 0, 0) for u in range(8)]
        img = alu_program(CFG, uops, acc0, alu_opcode=ALU_ADD, use_imm=1, imm=-12345, iter_out=MAX_ITER,
                          iter_in=MAX_ITER, dst_factor_in=0)
        def check(m):
            return m.acc[:4].tolist()
    """)
    acc0 = (np.arange(16 * LANES).reshape(16, LANES) * 7919 - 50000)
    visits = [3, 3, 2, 0]                          # uops per row: rows 0, 1 get 3 uops, row 2 gets 2
    want = [[i32(int(x) - 12345 * k * MAX_ITER * MAX_ITER) for x in acc0[row]] for row, k in enumerate(visits)]
    assert r["check"] == want
    assert r["peak"] - r["before"] < RUN_BOUND, f"RSS grew by {(r['peak'] - r['before']) >> 20} MiB"


def test_long_dependent_alu_nest_is_bounded_and_exact():
    """A non-immediate ALU nest whose every uop reads the row the previous one wrote (16383 x 512 x 8
    uops, 67 M): sequential result against the closed form, RSS growth bounded."""
    r = run_in_subprocess("""
        acc0 = np.zeros((4, LANES), "<i4")
        acc0[1] = np.arange(LANES) - 7
        acc0[0] = 3
        uops = [(0, 1, 0)] * 7 + [(2, 0, 0)]         # row0 += row1 seven times, then row2 += row0
        img = alu_program(CFG, uops, acc0, alu_opcode=ALU_ADD, iter_out=MAX_ITER, iter_in=512)
        def check(m):
            return m.acc[:3].tolist()
    """)
    row1 = np.arange(LANES) - 7
    k = MAX_ITER * 512
    # after repetition t (1-based) row0 = 3 + 7 t row1; row2 = sum_t row0(t) = 3k + 7 row1 k(k+1)/2
    want0 = [i32(3 + 7 * k * int(v)) for v in row1]
    want2 = [i32(3 * k + 7 * int(v) * (k * (k + 1) // 2)) for v in row1]
    assert r["check"] == [want0, row1.tolist(), want2]
    assert r["peak"] - r["before"] < RUN_BOUND, f"RSS grew by {(r['peak'] - r['before']) >> 20} MiB"


# ---- chunked walks against a brute-force walk (nests larger than one chunk, all loop shapes) -------
def brute_gemm(cfg, img, uops, loop, acc):
    inp = np.frombuffer(img.segments[0].data, np.int8).reshape(-1, cfg.batch, cfg.block_in).astype(np.int64)
    wgt = np.frombuffer(img.segments[1].data, np.int8).reshape(-1, cfg.block_out, cfg.block_in).astype(np.int64)
    io = np.arange(loop["iter_out"])[:, None, None]
    ii = np.arange(loop["iter_in"])[None, :, None]
    idx = {}
    for k, name in enumerate(("dst", "src", "wgt")):
        base = np.array([u[k] for u in uops])[None, None, :]
        idx[name] = (base + io * loop.get(f"{name}_factor_out", 0) + ii * loop.get(f"{name}_factor_in", 0)).reshape(-1)
    if loop.get("reset_reg"):
        acc[idx["dst"]] = 0
        return acc
    prod = np.einsum("kbi,koi->kbo", inp[idx["src"]], wgt[idx["wgt"]]).reshape(len(idx["dst"]), -1)
    np.add.at(acc, idx["dst"], prod)
    return ((acc + (1 << 31)) & M32) - (1 << 31)


@pytest.mark.parametrize("loop", [
    dict(iter_out=40, iter_in=700, dst_factor_out=1, src_factor_in=1, wgt_factor_out=1),
    dict(iter_out=300, iter_in=100, dst_factor_in=3, src_factor_out=2, wgt_factor_out=0, wgt_factor_in=1),
    dict(iter_out=1000, iter_in=90, dst_factor_out=1, src_factor_out=1),             # inner loop counted
    dict(iter_out=90, iter_in=1000, wgt_factor_in=0),                                # both loops counted
    dict(iter_out=50, iter_in=60, dst_factor_out=7, dst_factor_in=1, reset_reg=1),
])
def test_chunked_gemm_matches_brute_force(loop):
    rng = np.random.default_rng(len(str(loop)))
    inp = rng.integers(-128, 128, (2048, CFG.batch * CFG.block_in)).astype(np.int8)
    wgt = rng.integers(-128, 128, (1024, CFG.block_out * CFG.block_in)).astype(np.int8)
    acc0 = rng.integers(-(1 << 31), 1 << 31, (1024, LANES)).astype("<i4")
    uops = [(int(rng.integers(0, 300)), int(rng.integers(0, 300)), int(rng.integers(0, 100))) for _ in range(5)]
    img = gemm_program(CFG, uops, inp, wgt, acc0, **loop)
    got, cnt = run_acc(img)
    want = np.zeros((CFG.acc_depth, LANES), np.int64)
    want[:1024] = acc0
    want = brute_gemm(CFG, img, uops, loop, want)
    assert np.array_equal(got, want)
    n = loop["iter_out"] * loop["iter_in"] * 5
    assert cnt["gemm_counter"] == (0 if loop.get("reset_reg") else n)


@pytest.mark.parametrize("op", [ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL])
def test_immediate_row_counts_match_brute_force(op):
    """Rows visited through both loops and several uops: each row gets its visit count of applications."""
    rng = np.random.default_rng(op)
    acc0 = rng.integers(-(1 << 31), 1 << 31, (2048, LANES)).astype("<i4")
    uops = [(0, 0, 0), (5, 0, 0), (5, 0, 0), (200, 0, 0)]
    loop = dict(iter_out=37, iter_in=250, dst_factor_out=13, dst_factor_in=5)
    imm = {ALU_SHR: 3, ALU_MUL: -3}.get(op, 977)
    got, cnt = run_acc(alu_program(CFG, uops, acc0, alu_opcode=op, use_imm=1, imm=imm, **loop))
    visits = np.zeros(2048, np.int64)
    for io in range(37):
        for ii in range(250):
            for d, _, _ in uops:
                visits[d + 13 * io + 5 * ii] += 1
    for row in range(2048):
        want = [int(v) for v in acc0[row]]
        for _ in range(int(visits[row])):
            nxt = [ref_alu(op, v, imm) for v in want]
            if nxt == want:                         # a fixed point (MIN, MAX, SHR): the rest change nothing
                break
            want = nxt
        if op == ALU_ADD:
            want = [i32(int(v) + imm * int(visits[row])) for v in acc0[row]]
        elif op == ALU_MUL:
            want = [i32(int(v) * pow(imm, int(visits[row]), 1 << 32)) for v in acc0[row]]
        assert got[row].tolist() == want, row
    assert cnt["alu_counter"] == 37 * 250 * 4


@pytest.mark.parametrize("op", [ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL])
def test_sequential_alu_matches_python_walk(op):
    """Overlapping reads and writes in one nest (the compiled sequential path) against a uop-by-uop,
    lane-by-lane walk on Python integers, edge values included."""
    rng = np.random.default_rng(10 + op)
    edge = np.array([-(1 << 31), (1 << 31) - 1, -1, 0, 1, 31, 32, -32, -33, 40, 7, -7])
    acc0 = np.where(rng.random((12, LANES)) < 0.4, rng.choice(edge, (12, LANES)),
                    rng.integers(-60, 60, (12, LANES))).astype("<i4")
    uops = [(int(rng.integers(0, 4)), int(rng.integers(0, 6)), 0) for _ in range(4)]
    loop = dict(iter_out=3, iter_in=4, dst_factor_out=2, dst_factor_in=1, src_factor_out=1, src_factor_in=1)
    got, cnt = run_acc(alu_program(CFG, uops, acc0, alu_opcode=op, **loop))
    want = [[int(v) for v in row] for row in acc0]
    for io in range(3):
        for ii in range(4):
            for d, s, _ in uops:
                d, s = d + 2 * io + ii, s + io + ii
                want[d] = [ref_alu(op, x, y) for x, y in zip(want[d], want[s])]
    assert got[:12].tolist() == want
    assert cnt["alu_counter"] == 48
