"""Memory per instruction: the cycle engine and the decoded program stay proportional to the 16 bytes an
instruction is (no wide per-field arrays, no per-instruction Python objects), with the results checked
against independent readings (the per-cycle timing reference, vtasim.hw.isa's decoders, the whole-stream check)."""

import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import MEM_INP, MEM_UOP, load_config
from vtasim.hw.isa import INSN_FIELDS, OP_FINISH, OP_LOAD, Insn, decode, decode_fields, encode
from vtasim.sim import program as program_mod
from vtasim.sim.cycle.engine import LazyRows
from vtasim.sim.errors import ProgramError
from vtasim.sim.image import MemoryImage, Segment
from vtasim.sim.program import check_program, decode_program, load_program
from timing_reference import simulate

CFG = load_config()
ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def nop_image(n: int) -> MemoryImage:
    """n - 1 compute NOPs and a FINISH, built from raw bytes (no per-instruction Python objects)."""
    raw = encode(CFG, Insn(opcode=OP_LOAD, memory_type=MEM_UOP)) * (n - 1) + encode(CFG, Insn(opcode=OP_FINISH))
    return MemoryImage(CFG, 0x1000, n, [Segment(0x1000, raw)])


def test_a_million_nops_take_under_64_bytes_each():
    """1 M NOPs on the cycle engine, load + run + result (tracemalloc in a fresh interpreter, the compiled
    core loaded first): peak under 64 B per instruction + 32 MiB (was about 750 B per instruction).
    Timing against the per-cycle reference: NOP chunks repeat, so cycles are affine in n (multiples of
    FETCH_INSNS) - the reference on 64 and 128 NOPs gives the line, the engine's records of the first
    instructions equal the reference's."""
    n = 1 << 20
    script = textwrap.dedent(f"""
        import json, sys, tracemalloc
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]
        from test_cycle_memory import nop_image
        from vtasim.sim.cycle.engine import run_image, warm_up
        warm_up()
        img = nop_image({n})
        tracemalloc.start()
        r = run_image(img, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        head = [[x.module, x.index_in_module, x.program_index, x.opcode, x.start_cycle, x.end_cycle, x.digest]
                for x in r.trace[:100]]
        ends = [x.end_cycle for x in r.trace]
        print(json.dumps({{"peak": peak, "cycles": r.cycles, "n": len(r.trace), "head": head,
                          "sorted": ends == sorted(ends), "last": list(r.trace[-1].__dict__.values()),
                          "disp": [int(r.dispatch_cycle[0]), int(r.dispatch_cycle[-1]), len(r.dispatch_cycle)],
                          "chunks": len(r.fetch_chunks), "chunk0": list(r.fetch_chunks[0])}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["peak"] < 64 * n + 32 * MIB, f"{got['peak'] / n:.1f} bytes per instruction"

    refs = {}
    for k in (64, 128):
        img = nop_image(k)
        refs[k] = simulate(CFG, load_program(img).fields, img.insn_addr)
    slope = (refs[128]["cycles"] - refs[64]["cycles"]) / 64
    assert got["cycles"] == refs[64]["cycles"] + slope * (n - 64)
    assert got["n"] == n and got["sorted"]
    ref = refs[128]
    want = [["compute", j, j, OP_LOAD, ref["start"][j], ref["end"][j], 0] for j in range(100)]
    assert got["head"] == want
    assert got["last"][:4] == ["compute", n - 1, n - 1, OP_FINISH] and got["last"][5] == got["cycles"] - 1
    assert got["disp"] == [ref["dispatch"][0], got["disp"][1], n] and got["disp"][1] > ref["dispatch"][127]
    assert got["chunks"] == n // CFG.FETCH_INSNS and got["chunk0"][0] == 0


def test_loaded_program_keeps_the_words_not_decoded_fields():
    """load_program of 1 M instructions: the words are the image's own bytes; only one byte of module per
    instruction is added (block temporaries are a constant)."""
    n = 1 << 20
    img = nop_image(n)
    tracemalloc.start()
    try:
        prog = load_program(img)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * n + 40 * MIB, f"{peak / n:.1f} bytes per instruction"
    assert prog.words.base is not None and not prog.words.flags.writeable
    assert prog.module.dtype == np.int8 and prog.count == n


def random_words(rng, n):
    """Random 16-byte instructions with every opcode (unknown ones too) and random field bits."""
    words = rng.integers(0, 1 << 63, (n, 2), dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, (n, 2),
                                                                                             dtype=np.uint64)
    words[:, 0] = (words[:, 0] & ~np.uint64(7)) | rng.integers(0, 8, n).astype(np.uint64)
    return words


@pytest.mark.parametrize("seed", range(3))
def test_lazy_fields_and_rows_equal_hw_isa_decoders(seed):
    """Program.fields (decoded on use) equals vtasim.hw.isa.decode_fields, Program.row(i) equals vtasim.hw.isa.decode."""
    rng = np.random.default_rng(seed)
    words = random_words(rng, 3000)
    words[-1] = np.frombuffer(encode(CFG, Insn(opcode=OP_FINISH)), "<u8")
    raw = words.tobytes()
    want = decode_fields(CFG, raw)
    prog = program_mod.Program(CFG, words, np.zeros(len(words), np.int8))
    assert set(prog.fields) == set(INSN_FIELDS) and len(prog.fields) == len(INSN_FIELDS)
    for name in INSN_FIELDS:
        assert np.array_equal(prog.fields[name], want[name]), name
        assert prog.fields[name].dtype == np.int64
    for i in rng.integers(0, len(words), 200):
        op = int(words[i, 0] & np.uint64(7))
        row = prog.row(int(i))
        if op <= 4:
            assert row == decode(CFG, raw[16 * i:16 * i + 16]).as_dict()
        assert row == {name: int(want[name][i]) for name in INSN_FIELDS}


def corrupt_stream(rng, n):
    """A mostly legal stream (NOPs) with a few random bad instructions and maybe a misplaced FINISH."""
    good = np.frombuffer(encode(CFG, Insn(opcode=OP_LOAD, memory_type=MEM_INP)), "<u8")
    words = np.tile(good, (n, 1))
    words[-1] = np.frombuffer(encode(CFG, Insn(opcode=OP_FINISH)), "<u8")
    bad = random_words(rng, 4)
    for k in range(int(rng.integers(0, 4))):
        words[int(rng.integers(0, n))] = bad[k]
    if rng.random() < 0.3:
        words[int(rng.integers(0, n))] = words[-1]
    if rng.random() < 0.2:
        words[-1] = good
    return words


@pytest.mark.parametrize("seed", range(40))
def test_blockwise_check_reports_what_the_whole_stream_check_reports(seed, monkeypatch):
    """The static check run block by block (blocks of 7 here) names the same first problem, with the same
    message, as check_program on the whole decoded stream."""
    monkeypatch.setattr(program_mod, "_BLOCK", 7)
    rng = np.random.default_rng(seed)
    words = corrupt_stream(rng, int(rng.integers(1, 60)))
    raw = words.tobytes()
    try:
        check_program(CFG, decode_fields(CFG, raw), 1 << 16)
        want = None
    except ProgramError as exc:
        want = (str(exc), exc.index, exc.field)
    try:
        prog = decode_program(CFG, raw, 1 << 16)
        got = None
    except ProgramError as exc:
        got = (str(exc), exc.index, exc.field)
    assert got == want
    if got is None:
        assert np.array_equal(prog.module, program_mod.module_array(decode_fields(CFG, raw)))


def test_lazy_rows_behave_as_a_list():
    rows = LazyRows(5, lambda k: (k, k * k))
    plain = [(k, k * k) for k in range(5)]
    assert len(rows) == 5 and list(rows) == plain and rows == plain and plain == rows
    assert rows[-1] == (4, 16) and rows[1:4] == plain[1:4] and rows[::2] == plain[::2]
    assert rows != plain[:4] and rows != [(0, 1)] * 5 and rows == LazyRows(5, lambda k: (k, k * k))
    with pytest.raises(IndexError, match="index 5 out of range for 5 rows"):
        rows[5]
    assert sorted(rows, key=lambda r: -r[0])[0] == (4, 16)
