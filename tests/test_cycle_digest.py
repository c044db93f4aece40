"""The write digests of the cycle engine's retire records against docs/timing.md section 9, computed
here from the functional model's state with plain Python integers (not the engine's kernels)."""

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_ACC_8BIT, load_preset
from vtasim.hw.isa import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, OP_ALU, OP_GEMM, OP_LOAD, OP_STORE, decode_uops
from vtasim.sim.cycle import run_image
from vtasim.sim.functional import FunctionalMachine, run_program
from vtasim.sim.program import load_program
from vtasim.sim.programs.randprog import generate

M32 = 0xFFFFFFFF


def mix(x: int, v: int) -> int:
    return ((v ^ ((x * 0x9E3779B1) & M32)) * 0x85EBCA77) & M32


def element_digest(row: np.ndarray, element: int) -> int:
    """Digest of one element write: its bytes as zero-extended little-endian 32-bit words."""
    raw = bytes(row.view(np.uint8).reshape(-1))
    words = -(-len(raw) // 4)
    raw += b"\0" * (4 * words - len(raw))
    return sum(mix(element * words + i, int.from_bytes(raw[4 * i:4 * i + 4], "little")) for i in range(words))


def alu(op: int, x: int, y: int) -> int:
    if op == ALU_MIN:
        r = min(x, y)
    elif op == ALU_MAX:
        r = max(x, y)
    elif op == ALU_ADD:
        r = x + y
    elif op == ALU_MUL:
        r = x * y
    else:                                   # SHR, the documented rule for |y| >= 32
        r = x >> min(y, 31) if y >= 0 else (x << -y if y > -32 else 0)
    r &= M32
    return r - (1 << 32) if r >> 31 else r


def loop_digest(m: FunctionalMachine, f: dict):
    """Replay a GEMM/ALU uop by uop on a copy of the accumulator, summing every element write."""
    acc = m.acc.astype(np.int64)
    d, s, w = decode_uops(m.cfg, m.uop[f["uop_bgn"]:f["uop_end"]])
    total = 0
    for io in range(f["iter_out"]):
        for ii in range(f["iter_in"]):
            for u in range(len(d)):
                a = int(d[u]) + io * f["dst_factor_out"] + ii * f["dst_factor_in"]
                src = int(s[u]) + io * f["src_factor_out"] + ii * f["src_factor_in"]
                if f["opcode"] == OP_GEMM and f["reset_reg"]:
                    acc[a] = 0
                elif f["opcode"] == OP_GEMM:
                    wgt = int(w[u]) + io * f["wgt_factor_out"] + ii * f["wgt_factor_in"]
                    dot = m.inp[src].astype(np.int64) @ m.wgt[wgt].astype(np.int64).T
                    acc[a] = ((acc[a] + dot.reshape(-1) + (1 << 31)) & M32) - (1 << 31)
                else:
                    ys = [f["imm"]] * acc.shape[1] if f["use_imm"] else acc[src].tolist()
                    acc[a] = [alu(f["alu_opcode"], int(x), int(y)) for x, y in zip(acc[a], ys)]
                total += element_digest(acc[a].astype("<i4"), a)
    return total & M32, acc


def store_digest(m: FunctionalMachine, f: dict) -> int:
    eb = m.cfg.out_elem_bytes
    total = 0
    for r in range(f["y_size"]):
        rows = m.acc[f["sram_base"] + r * f["x_size"]:f["sram_base"] + (r + 1) * f["x_size"]]
        data = (rows.astype(np.int64) & 0xFF).astype(np.uint8).tobytes()     # the bytes this row wrote
        a0 = (f["dram_base"] + r * f["x_stride"]) * eb
        for word in range(a0 // 4, (a0 + len(data) + 3) // 4):
            v = sum(data[4 * word + k - a0] << (8 * k) for k in range(4) if 0 <= 4 * word + k - a0 < len(data))
            total += mix(word, v)
    return total & M32


def reference_digests(image) -> dict:
    prog = load_program(image)
    order = run_program(prog, image.dram()).order
    m = FunctionalMachine(prog, image.dram())
    out = {}
    for j in order:
        f = {name: int(v[j]) for name, v in prog.fields.items()}
        op, active = f["opcode"], f["x_size"] > 0
        replay = None
        if op in (OP_GEMM, OP_ALU):
            out[j], replay = loop_digest(m, f)
        elif op == OP_STORE and active:
            out[j] = store_digest(m, f)
        m.execute(j)
        if replay is not None:
            assert np.array_equal(replay, m.acc), f"replay of instruction {j} disagrees with the functional model"
        if op == OP_LOAD and active:
            mt = MEM_ACC if f["memory_type"] == MEM_ACC_8BIT else f["memory_type"]
            n = (f["x_pad_0"] + f["x_size"] + f["x_pad_1"]) * (f["y_pad_0"] + f["y_size"] + f["y_pad_1"])
            sram = m.sram[mt]
            out[j] = sum(element_digest(sram[e], e) for e in range(f["sram_base"], f["sram_base"] + n)) & M32
        out.setdefault(j, 0)
    return out


@pytest.mark.parametrize("preset", ["1x16x16", "1x8x8"])
@pytest.mark.parametrize("seed", range(6))
def test_digests_follow_the_contract(preset, seed):
    cfg = load_preset(preset)
    img = generate(cfg, seed, blocks=(2, 3), max_iter=2, max_uops=3)
    got = {r.program_index: r.digest for r in run_image(img).trace}
    want = reference_digests(img)
    assert set(got) == set(want) == set(range(img.insn_count))
    bad = [j for j in sorted(want) if got[j] != want[j]]
    assert not bad, f"instruction {bad[0]}: engine digest {got[bad[0]]:08x}, contract {want[bad[0]]:08x}"
    assert any(want.values())                       # the programs write something
