"""ALU conformance: every row of :mod:`vtasim.hw.alu` on every engine, in immediate and vector form.

References, independent of the code under test:

* :data:`SPEC`: hardware spec 3.5 (with the project's rules for shifts beyond +-31) as scalar Python
  integer arithmetic, one entry per row; the table's numpy rules and closed forms are held to it;
* the table's numpy rule (:meth:`vtasim.hw.alu.AluOp.apply`), computed here in the test, is what every
  engine's accumulator must hold after the program (functional, cycle, and the RTL on Verilator);
* the compiler's ALU intrinsic: the DSL step of each row compiles to that row's opcode and computes
  the row's rule on the functional engine.

Each program observes all 32 bits of the accumulator through the 8-bit STORE: it stores, shifts
right by 8 (SHR immediate), stores, ... four times, and the test reassembles the int32 lanes.  The
data are drawn so results are neither saturated nor constant (:func:`test_cases_are_not_degenerate`).
:func:`missing_pieces` names, for a table row, every executor that has no implementation of it.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from vtasim.hw import alu as alu_table
from vtasim.hw.alu import ALU_OPS, ALU_SHR, IMM_MAX, IMM_MIN, AluOp, check_table, ops_for, unknown_opcode_message
from vtasim.hw.config import MEM_ACC, MEM_UOP, load_config
from vtasim.hw.isa import OP_ALU, decode_fields
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.engines import run_engine
from vtasim.sim.errors import ProgramError

CFG = load_config()
# 4 lanes per element: the cycle engine's lane-by-lane loop (kernels.alu_op) instead of its 8/16-lane
# SIMD tiles (sim/cycle/simd.py), which every shipped preset takes
NARROW = CFG.replace(LOG_BLOCK=2, LOG_ACC_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=14)
CONFIGS = {"default": CFG, "4-lane": NARROW, "HW_VER-0.0.1": CFG.replace(HW_VER="0.0.1")}
ROWS = 8                                   # accumulator elements per case
OPS = ops_for(CFG.HW_VER)
# imm: immediate form; vec: vector form, every element once (the functional engine's vectorised
# path); vec2: vector form, every element twice in one instruction, with a second operand block the
# second time (the functional engine's sequential compiled loop)
FORMS = ("imm", "vec", "vec2")
REPEATS = (1, 2, 3)                        # immediate form: row r is visited REPEATS[r % 3] times


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _spec_shr(x: int, y: int) -> int:
    """Arithmetic right shift by y >= 0 (32 or more as 31), left by -y (-32 or less: 0)."""
    return x >> min(y, 31) if y >= 0 else (_s32(x << -y) if y > -32 else 0)


SPEC = {   # row name -> f(x, y) on Python ints, x and y int32 values (hardware spec 3.5)
    "MIN": min,
    "MAX": max,
    "ADD": lambda x, y: _s32(x + y),
    "SHR": _spec_shr,
    "MUL": lambda x, y: _s32(x * y),
}


# ---- the cases --------------------------------------------------------------------------------
def _lanes(rng, n: int) -> np.ndarray:
    """int32 lanes: a quarter each small, 16-bit, full 32-bit, and within 1000 of the int32 limits."""
    small = rng.integers(-300, 301, n)
    mid = rng.integers(IMM_MIN, IMM_MAX + 1, n)
    full = rng.integers(-(1 << 31), 1 << 31, n)
    near = rng.integers(0, 1000, n)
    edge = np.where(rng.random(n) < 0.5, (1 << 31) - 1 - near, -(1 << 31) + near)
    return np.choose(rng.integers(0, 4, n), [small, mid, full, edge]).astype(np.int32)


def _imm(row: AluOp, rng) -> int:
    lo, hi = row.imm_range
    return int(np.clip(row.draw_imm(rng), lo, hi))


def alu_case(row: AluOp, form: str, cfg=CFG, seed: int = 0):
    """``(image, x, y, expected)``: ALU ``row`` over ``ROWS`` accumulator elements, then the four
    byte planes of the result stored to outputs ``b0``..``b3``; ``expected`` from the table's rule."""
    rng = np.random.default_rng([seed, row.opcode, FORMS.index(form)])
    lanes = cfg.batch * cfg.block_out
    x = _lanes(rng, ROWS * lanes).reshape(ROWS, lanes)
    b = ProgramBuilder(cfg)
    if form != "imm":
        # the second operand lane by lane from the row's own immediate draw (shift amounts for SHR);
        # vec2 has two blocks of them
        blocks = 2 if form == "vec2" else 1
        ys = np.array([_imm(row, rng) for _ in range(blocks * ROWS * lanes)], np.int32).reshape(-1, ROWS, lanes)
        y, data = ys[0], np.concatenate([x, *ys])
    else:
        y, data = None, x
    buf = b.data("acc", data.astype("<i4"))
    outs = [b.output(f"b{k}", ROWS * cfg.out_elem_bytes) for k in range(4)]
    ub = b.uops([(r, r, 0) for r in range(ROWS)] + [(0, ROWS, 0)])
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=ROWS + 1)
    b.load(memory_type=MEM_ACC, dram_base=buf, x_size=len(data))
    expected = x.copy()
    if form != "imm":
        b.alu(alu_opcode=row.opcode, uop_bgn=ROWS, uop_end=ROWS + 1, iter_out=len(ys), iter_in=ROWS,
              dst_factor_in=1, src_factor_out=ROWS, src_factor_in=1, push_next=1)
        for operand in ys:
            expected = row.apply(expected, operand)
    else:
        imms = []
        for r in range(ROWS):
            imm, k = _imm(row, rng), REPEATS[r % len(REPEATS)]
            imms.append(imm)
            # k visits of one row (dst_factor_out 0): the functional engine takes the row's closed form
            b.alu(alu_opcode=row.opcode, use_imm=1, imm=imm, uop_bgn=r, uop_end=r + 1, iter_out=k,
                  push_next=int(r == ROWS - 1))
            for _ in range(k):
                expected[r] = row.apply_imm(expected[r], imm)
        y = np.repeat(np.array(imms, np.int32)[:, None], lanes, axis=1)
    b.store(dram_base=outs[0], x_size=ROWS, pop_prev=1, push_prev=1)
    for k in range(1, 4):
        b.alu(alu_opcode=ALU_SHR, use_imm=1, imm=8, uop_end=ROWS, pop_next=1, push_next=1)
        b.store(dram_base=outs[k], x_size=ROWS, pop_prev=1, push_prev=1)
    b.nop("load", push_next=1)
    b.nop("compute", pop_prev=1, pop_next=1)
    b.finish()
    return b.build(), x, y, expected


def observed(result) -> np.ndarray:
    """The int32 accumulator lanes reassembled from the four stored byte planes."""
    planes = [np.frombuffer(result.outputs[f"b{k}"], np.uint8).reshape(ROWS, -1) for k in range(4)]
    v = np.zeros(planes[0].shape, np.uint32)
    for k, plane in enumerate(planes):
        v |= plane.astype(np.uint32) << np.uint32(8 * k)
    return v.view(np.int32)


def assert_lanes(got, want, what):
    bad = np.argwhere(got != want)
    if bad.size:
        r, ln = bad[0]
        raise AssertionError(f"{what}: {len(bad)} of {want.size} lanes differ; first: element {r} lane {ln} "
                             f"expected {want[r, ln]}, got {got[r, ln]}")


CASES = [(row, form) for row in OPS for form in FORMS]
IDS = [f"{row.name}-{form}" for row, form in CASES]


# ---- the table against the spec --------------------------------------------------------------
def test_table_is_consistent():
    assert check_table() == []
    assert [op.opcode for op in ALU_OPS] == sorted(op.opcode for op in ALU_OPS)
    dup = AluOp("MAX", 0, ("0.0.1",), (IMM_MIN, IMM_MAX + 1), np.maximum, None, "max", True, lambda rng: 0)
    assert check_table(ALU_OPS + (dup,)) == [
        "ALU name 'MAX' appears in 2 rows", "ALU opcode 0 appears in 2 rows", "ALU symbol 'max' appears in 2 rows",
        "ALU MAX: imm_range (-32768, 32768) is not inside the 16-bit field [-32768, 32767]"]
    wide = AluOp("WIDE", 4, ("0.0.1",), (IMM_MIN, IMM_MAX), np.maximum, None, "w", True, lambda rng: 0)
    assert check_table((wide,)) == ["ALU WIDE: opcode 4 does not fit the 2-bit alu_opcode field of HW_VER 0.0.1"]


def test_rtl_header_follows_the_table():
    from vtasim.hw.rtl_params import header_defines
    for ver in ("0.0.1", "0.0.2"):
        d = header_defines(CFG.replace(HW_VER=ver))
        rows = ops_for(ver)
        assert {k: v for k, v in d.items() if k in {f"ALU_{op.name}" for op in ALU_OPS}} == \
            {f"ALU_{op.name}": op.opcode for op in rows}
        assert d["ALU_LEGAL_MASK"] == sum(1 << op.opcode for op in rows)


@pytest.mark.parametrize("row", ALU_OPS, ids=lambda r: r.name)
def test_rule_and_closed_form_match_the_spec(row):
    assert row.name in SPEC, f"vtasim.hw.alu row {row.name} has no independent reference in SPEC of {__file__}"
    rng = np.random.default_rng(row.opcode)
    x = _lanes(rng, 4000)
    y = np.concatenate([_lanes(rng, 1000), [_imm(row, rng) for _ in range(2000)],
                        rng.integers(-40, 41, 1000)]).astype(np.int32)
    want = np.array([SPEC[row.name](int(a), int(c)) for a, c in zip(x, y)], np.int64)
    assert_lanes(row.apply(x, y).reshape(1, -1), want.reshape(1, -1), f"{row.name} vector rule")
    for imm in sorted({*(_imm(row, rng) for _ in range(12)), 0, 1, -1, 31, -31, 32, -32, IMM_MIN, IMM_MAX}):
        seq = [int(a) for a in x[:300]]
        for k in range(1, 6):
            seq = [SPEC[row.name](a, imm) for a in seq]
            got = row.apply_imm_repeated(x[:300], imm, k)
            assert_lanes(got.reshape(1, -1), np.array(seq).reshape(1, -1), f"{row.name} imm {imm} x{k}")


@pytest.mark.parametrize("row,form", CASES, ids=IDS)
def test_cases_are_not_degenerate(row, form):
    _, x, y, want = alu_case(row, form)
    n = want.size
    assert np.unique(want).size > n // 4, "results nearly constant"
    assert np.count_nonzero(want != x) > n // 10, "results mostly equal the accumulator operand"
    assert np.count_nonzero(want != y) > n // 10, "results mostly equal the second operand"
    for k in range(4):                    # every byte plane the STOREs observe varies
        assert np.unique((want.view(np.uint32) >> (8 * k)) & 0xFF).size > 4, k


# ---- every engine ------------------------------------------------------------------------------
ENGINE_CASES = [(config, row, form) for config, cfg in CONFIGS.items() for row in ops_for(cfg.HW_VER) for form in FORMS]


@pytest.mark.parametrize("engine", ["functional", "cycle"])
@pytest.mark.parametrize("config,row,form", ENGINE_CASES, ids=[f"{r.name}-{f}-{c}" for c, r, f in ENGINE_CASES])
def test_engine_computes_the_table_rule(engine, row, form, config):
    image, _, _, want = alu_case(row, form, CONFIGS[config])
    assert_lanes(observed(run_engine(engine, image)), want, f"{engine} {row.name} {form} ({config})")


@pytest.fixture(scope="module")
def rtl_results(verilator_build):
    from vtasim.sim.rtl import run_images
    return dict(zip(IDS, run_images([alu_case(row, form)[0] for row, form in CASES])))


@pytest.mark.rtl
@pytest.mark.parametrize("row,form", CASES, ids=IDS)
def test_rtl_computes_the_table_rule(rtl_results, row, form):
    want = alu_case(row, form)[3]
    assert_lanes(observed(rtl_results[f"{row.name}-{form}"]), want, f"rtl {row.name} {form}")


# ---- an opcode outside the table ---------------------------------------------------------------
UNKNOWN = [c for c in range(1 << 3) if c not in {op.opcode for op in OPS}]


def _unknown_image(code: int):
    """A program that runs on every engine but for its ALU opcode ``code`` (the builder only checks
    that a field fits its width); returns the image and the ALU's instruction index."""
    b = ProgramBuilder(CFG)
    ub = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=ub, x_size=1)
    j = b.alu(alu_opcode=code, use_imm=1, imm=1, uop_end=1)
    b.finish()
    return b.build(), j


def _same_decode_error(exc, code, j):
    want = f"instruction {j}: {unknown_opcode_message(code, CFG.HW_VER)}"
    assert want in str(exc), (str(exc), want)


@pytest.mark.parametrize("engine", ["functional", "cycle"])
@pytest.mark.parametrize("code", UNKNOWN)
def test_unknown_opcode_is_one_decode_error(engine, code):
    image, j = _unknown_image(code)
    with pytest.raises(ProgramError) as exc:
        run_engine(engine, image)
    _same_decode_error(exc.value, code, j)


@pytest.mark.rtl
@pytest.mark.parametrize("code", UNKNOWN)
def test_rtl_refuses_an_unknown_opcode_itself(verilator_build, code):
    """Through the engine the static decode check answers first (the same message); the RTL on its
    own (the job given to the simulator unchecked) stops with an undecodable instruction and the
    Python side names it in the same words."""
    from vtasim.sim.errors import RtlIllegalInstruction
    from vtasim.sim.rtl import run_images, runner
    from vtasim.sim.rtl.results import to_run_result
    image, j = _unknown_image(code)
    with pytest.raises(ProgramError) as exc:
        run_images([image])
    _same_decode_error(exc.value, code, j)
    job = runner.Job(image.dram(), image.insn_addr, image.insn_count, 100_000)
    outcome = runner.run_jobs(verilator_build, [job])[0]
    with pytest.raises(RtlIllegalInstruction) as exc:
        to_run_result(image, outcome, 100_000)
    assert "undecodable instruction" in str(exc.value)
    _same_decode_error(exc.value, code, j)


# ---- the compiler's ALU intrinsic --------------------------------------------------------------
@pytest.mark.parametrize("row,form", [c for c in CASES if c[1] != "vec2"], ids=[i for i in IDS if "vec2" not in i])
def test_compiler_intrinsic_emits_the_row(row, form):
    from vtasim.compiler.lowering.build import build
    from vtasim.compiler.dsl.environment import Environment
    from vtasim.compiler.ops.alu import alu_chain, schedule_alu
    m = 4
    rng = np.random.default_rng([7, row.opcode, FORMS.index(form)])
    a = _lanes(rng, m * CFG.batch * CFG.block_out).reshape(1, m, CFG.batch, CFG.block_out)
    bvec = np.array([_imm(row, rng) for _ in range(a.size)], np.int32).reshape(a.shape)
    imm = _imm(row, rng)
    with Environment(CFG) as env:
        step = (row.mnemonic, "B" if form == "vec" else imm)
        phs, out, copies, stages = alu_chain(env, m, [step])
        inputs = {"A": a, "B": bvec} if form == "vec" else {"A": a}
        built = build(schedule_alu(env, m, out, copies, stages), [*phs, out], inputs, expected=False)
    f = decode_fields(CFG, built.image.insn_bytes())
    alu = f["opcode"] == OP_ALU
    assert set(f["alu_opcode"][alu].tolist()) == {row.opcode}
    assert set(f["use_imm"][alu].tolist()) == {int(form == "imm")}
    want = row.apply(a, bvec if form == "vec" else imm).astype(np.int8)
    got = np.frombuffer(run_engine("functional", built.image).outputs["C"], np.int8).reshape(want.shape)
    assert np.count_nonzero(want != a.astype(np.int8)) > want.size // 10
    assert_lanes(got.reshape(m, -1), want.reshape(m, -1), f"compiled {row.name} {form}")


# ---- every executor implements every row ------------------------------------------------------
def _compares(func, name: str) -> bool:
    """Whether the source of ``func`` compares the opcode with the table constant ``ALU_<name>``."""
    src = inspect.getsource(getattr(func, "py_func", func))
    return re.search(rf"\bop\s*==\s*ALU_{name}\b", src) is not None


def missing_pieces(rows) -> list:
    """``"<row>: <what is missing>"`` for every executor lacking an implementation of a row."""
    from vtasim.compiler.lowering import ir
    from vtasim.compiler.lowering.passes.inject_alu import _OPS as lowered
    from vtasim.hw.config import KNOWN_HW_VERS
    from vtasim.hw.rtl_params import header_defines
    from vtasim.sim import functional
    from vtasim.sim.cycle import kernels, simd
    from vtasim.sim.programs.randprog import ALL_BINS
    from vtasim.sim.rtl.runner import default_rtl_dir
    core = (default_rtl_dir() / "vta_alu_core.v").read_text()
    headers = {v: header_defines(load_config().replace(HW_VER=v)) for v in KNOWN_HW_VERS}
    out = []
    for row in rows:
        def miss(what, row=row):
            out.append(f"{row.name}: {what}")
        if not callable(row.rule):
            miss("no numpy rule (hw/alu.py)")
        if row.name not in SPEC:
            miss(f"no independent reference (SPEC in {__file__})")
        if getattr(alu_table, f"ALU_{row.name}", None) != row.opcode:
            miss(f"no constant vtasim.hw.alu.ALU_{row.name}")
        if not _compares(functional._alu_sequential, row.name):
            miss("no branch in sim/functional.py _alu_sequential")
        if not _compares(kernels.alu_op, row.name):
            miss("no branch in sim/cycle/kernels.py alu_op")
        if row.opcode not in simd._ALU_RULES:
            miss("no vector rule in sim/cycle/simd.py _ALU_RULES")
        for ver in row.hw_versions:
            if headers[ver].get(f"ALU_{row.name}") != row.opcode:
                miss(f"no `define VTA_ALU_{row.name} in the RTL header of HW_VER {ver} (hw/rtl_params.py)")
        if f"`VTA_ALU_{row.name}:" not in core:
            miss(f"no case arm `VTA_ALU_{row.name} in hw/rtl/vta_alu_core.v")
        try:
            ir.BinOp(row.symbol, ir.const(1), ir.const(2))
        except ir.IRError:
            miss(f"symbol {row.symbol!r} is not an operator of compiler/lowering/ir.py")
        if lowered.get(row.symbol) != row.opcode:
            miss(f"symbol {row.symbol!r} does not lower to it in compiler/lowering/passes/inject_alu.py")
        if f"alu:{row.mnemonic}:imm" not in ALL_BINS:
            miss("no coverage bin in sim/programs/randprog.py")
    return out


def test_every_row_has_every_piece():
    assert missing_pieces(ALU_OPS) == []


def test_a_row_without_implementations_is_named():
    """A row added to the table alone (and one without a numpy rule): every missing piece is named."""
    fake = AluOp("FAKE", 7, ("0.0.2",), (IMM_MIN, IMM_MAX), np.bitwise_xor, None, "^^", True, lambda rng: 0)
    got = missing_pieces([fake])
    for piece in ("SPEC", "vtasim.hw.alu.ALU_FAKE", "sim/functional.py", "sim/cycle/kernels.py", "sim/cycle/simd.py",
                  "`define VTA_ALU_FAKE", "vta_alu_core.v", "compiler/lowering/ir.py", "inject_alu.py", "randprog.py"):
        assert any(piece in line for line in got), (piece, got)
    assert all(line.startswith("FAKE: ") for line in got)
    norule = AluOp("MIN", 0, ("0.0.2",), (IMM_MIN, IMM_MAX), None, None, "min", True, lambda rng: 0)
    assert missing_pieces([norule]) == ["MIN: no numpy rule (hw/alu.py)"]


def test_numba_caches_are_keyed_on_the_table():
    """The opcodes are compiled into the cycle kernels and the functional engine's sequential loop: an
    edit of hw/alu.py must invalidate both caches (sim/cycle/jitcache.py)."""
    from vtasim.sim import functional
    from vtasim.sim.cycle import jitcache, kernels
    assert inspect.getsourcefile(alu_table) in {str(p) for p in jitcache._DEPS}
    for func in (kernels.alu_op, kernels.alu_kernel, functional._alu_sequential):
        assert isinstance(func._cache._impl.locator, jitcache._Stamped), func
