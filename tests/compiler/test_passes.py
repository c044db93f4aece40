"""The VTA lowering passes on hand-built phase-0 IR: the structure of spec 3.2 and 6.2-6.4, each pass's
rules, and the named errors.

The phase-0 IR is built the way docs/compiler.md says ``lower`` builds it (phase0_programs.py); the
final IR is printed in the notation of spec 6.1 (``LD``, ``ST``, ``LOOP``, ``UOP``, ``push``,
``pop``, ``CS(q){}``, ``UOPK{}``) and compared with the worked examples.
"""

from __future__ import annotations

import re

import pytest

from vtasim.compiler.lowering import ir
from vtasim.compiler.errors import CompileError
from vtasim.compiler.ops.data import requant_shift
from vtasim.compiler.lowering.ir import Allocate, Attr, Buffer, Cast, Evaluate, For, Load, Select, Store, Var, seq
from vtasim.compiler.lowering.passes import PIPELINE, Func, run_passes
from vtasim.compiler.lowering.passes.coproc_sync import coproc_sync
from vtasim.compiler.lowering.passes.fold_uop_loop import fold_uop_loop
from vtasim.compiler.lowering.passes.inject_alu import inject_alu
from vtasim.compiler.lowering.passes.inject_dma import inject_dma
from vtasim.compiler.lowering.passes.inject_virtual_thread import inject_virtual_thread
from vtasim.compiler.lowering.passes.lift_alloc import lift_alloc
from vtasim.compiler.lowering.passes.lift_attr_scope import lift_attr_scope
from vtasim.compiler.lowering.passes.storage_rewrite import storage_rewrite
from vtasim.hw.config import load_config
from phase0_programs import ACC, INP, conv2d_vt, gemm_blocked, gemm_simple, nest, vadd

MEM = {0: "UOP", 1: "WGT", 2: "INP", 3: "ACC", 4: "OUT", 5: "ACC_8BIT"}


# ---- spec 6.1 notation ------------------------------------------------------------------------
def _e(x):
    return ir.to_text(x) if isinstance(x, ir.Expr) else str(x)


def notation(s, ind=0) -> list:
    pad = "  " * ind
    out = []
    if isinstance(s, ir.Seq):
        for c in s.stmts:
            out += notation(c, ind)
    elif isinstance(s, ir.For):
        out.append(f"{pad}for {s.var.name} < {s.extent}:")
        out += notation(s.body, ind + 1)
    elif isinstance(s, ir.Attr) and s.key == "coproc_scope":
        out.append(f"{pad}CS({s.value}){{")
        out += notation(s.body, ind + 1)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.Attr) and s.key == "coproc_uop_scope":
        out.append(f"{pad}UOPK{{")
        out += notation(s.body, ind + 1)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.Evaluate):
        c, a = s.call, [_e(x) for x in s.call.args]
        if c.name == "VTALoadBuffer2D":
            out.append(f"{pad}LD({c.args[0].name}, {a[1]}, {a[2]}, {a[3]}, {a[4]}, pads({', '.join(a[5:9])}), "
                       f"sram {a[9]}, {MEM[c.args[10].value]})")
        elif c.name == "VTAStoreBuffer2D":
            out.append(f"{pad}ST({a[0]}, {MEM[c.args[1].value]}, {c.args[2].name}, {a[3]}, {a[4]}, {a[5]}, {a[6]})")
        elif c.name == "VTAUopLoopBegin":
            out.append(f"{pad}LOOP({', '.join(a)})")
        elif c.name == "VTAUopLoopEnd":
            pass
        elif c.name == "VTAUopPush":
            out.append(f"{pad}UOP({', '.join(a)})")
        elif c.name in ("vta.coproc_dep_push", "vta.coproc_dep_pop"):
            out.append(f"{pad}{c.name.split('_')[-1]}({a[0]},{a[1]})")
        elif c.name == "vta.coproc_sync":
            out.append(f"{pad}coproc_sync")
        else:
            out.append(f"{pad}{ir.to_text(s)}")
    else:
        raise AssertionError(f"unexpected statement in the final IR: {ir.to_text(s)}")
    return out


def lowered(builder, cfg, *args, **kw):
    func, _, _ = builder(cfg, *args, **kw)
    return run_passes(func, cfg)


def text(func) -> str:
    return "\n".join(notation(func.body))


# ---- the worked examples -----------------------------------------------------------------------
def test_vector_add_is_spec_3_2(cfg):
    assert text(lowered(vadd, cfg)) == """\
CS(2){
  LD(A, 0, 64, 1, 64, pads(0, 0, 0, 0), sram 0, ACC)
  LD(B, 0, 64, 1, 64, pads(0, 0, 0, 0), sram 64, ACC)
  UOPK{
    LOOP(64, 1, 1, 0)
    UOP(1, 0, 0, 64, 0, 2, 0, 0)
  }
  push(2,3)
}
CS(3){
  pop(2,3)
  ST(0, OUT, C, 0, 64, 1, 64)
}
coproc_sync"""


def test_simple_gemm_is_spec_6_2(cfg):
    assert text(lowered(gemm_simple, cfg)) == """\
CS(2){
  UOPK{
    LOOP(16, 1, 0, 0)
    UOP(0, 1, 0, 0, 0, 0, 0, 0)
  }
  push(2,1)
}
for ko < 16:
  CS(1){
    pop(2,1)
    LD(A, ko, 1, 1, 1, pads(0, 0, 0, 0), sram 0, INP)
    LD(B, ko, 1, 16, 16, pads(0, 0, 0, 0), sram 0, WGT)
    push(1,2)
  }
  CS(2){
    pop(1,2)
    UOPK{
      LOOP(16, 1, 0, 1)
      UOP(0, 0, 0, 0, 0, 0, 0, 0)
    }
    push(2,1)
  }
push(2,3)
pop(2,1)
CS(3){
  pop(2,3)
  ST(0, OUT, C, 0, 16, 1, 16)
}
coproc_sync"""


def test_blocked_gemm_is_spec_6_3_with_the_drain_before_the_sync(cfg):
    # spec 6.3's SHR 8 is TVM's shift; the program shifts by the data rule's (1024-long reduction)
    assert text(lowered(gemm_blocked, cfg)) == SPEC_6_3.replace("SHIFT", str(requant_shift(1024)))


SPEC_6_3 = """\
push(3,2)
for oc_out < 4:
  CS(2){
    pop(3,2)
    UOPK{
      LOOP(16, 1, 0, 0)
      UOP(0, 1, 0, 0, 0, 0, 0, 0)
    }
    push(2,1)
  }
  for ic_out < 4:
    CS(1){
      pop(2,1)
      LD(data, (ic_out * 16), 16, 1, 16, pads(0, 0, 0, 0), sram 0, INP)
      LD(weight, ((ic_out * 16) + (oc_out * 1024)), 16, 16, 64, pads(0, 0, 0, 0), sram 0, WGT)
      push(1,2)
    }
    CS(2){
      pop(1,2)
      UOPK{
        LOOP(16, 1, 0, 16)
        LOOP(16, 0, 1, 1)
        UOP(0, 0, 0, 0, 0, 0, 0, 0)
      }
      push(2,1)
    }
  pop(2,1)
  CS(2){
    UOPK{
      LOOP(16, 1, 1, 0)
      UOP(1, 0, 0, 0, 0, 3, 1, SHIFT)
    }
    UOPK{
      LOOP(16, 1, 1, 0)
      UOP(1, 0, 0, 0, 0, 1, 1, 0)
    }
    UOPK{
      LOOP(16, 1, 1, 0)
      UOP(1, 0, 0, 0, 0, 0, 1, 127)
    }
    push(2,3)
  }
  CS(3){
    pop(2,3)
    for oc_inn < 16:
      ST(oc_inn, OUT, res, (oc_inn + (oc_out * 16)), 1, 1, 1)
    push(3,2)
  }
pop(3,2)
coproc_sync"""


def test_conv2d_two_virtual_threads_is_spec_6_4(cfg):
    t = text(lowered(conv2d_vt, cfg)).splitlines()
    # prologue: one priming push per thread; epilogue: two drains, then the sync (last line)
    assert t[:2] == ["push(3,2)", "push(3,2)"]
    assert t[-3:] == ["pop(3,2)", "pop(3,2)", "coproc_sync"]
    body = "\n".join(t)
    # reset kernel per thread in a cthread.s loop: LOOP(8,98,0,0) LOOP(7,14,0,0) + 14 uops t*784 + j
    assert re.search(r"for cthread\.s < 2:\n\s+CS\(2\)\{\n\s+pop\(3,2\)\n\s+UOPK\{\n\s+LOOP\(8, 98, 0, 0\)\n"
                     r"\s+LOOP\(7, 14, 0, 0\)\n\s+for x_inn < 14:\n\s+UOP\(0, 1, \(\(cthread\.s \* 784\) \+ x_inn\)", body)
    # thread 0 and thread 1 loads unrolled: data at sram 0 / 144, kernel at 0 / 72 (+1152 elements of DRAM)
    lds = [x.strip() for x in t if x.strip().startswith("LD(")]
    assert [re.search(r"sram (\d+)", x).group(1) for x in lds] == ["0", "0", "144", "72"]
    assert lds[1] == "LD(kernel, (ic_out * 9), 9, 8, 144, pads(0, 0, 0, 0), sram 0, WGT)"
    assert lds[3] == "LD(kernel, ((ic_out * 9) + 1152), 9, 8, 144, pads(0, 0, 0, 0), sram 72, WGT)"
    # data: x = 14, stride 14, x pads 1/1, y pads 1 at the image border only
    assert ", 14, " in lds[0] and "pads(1, max(((y_out * -7) + 1), 0), 1, max(((y_out * 7) - 6), 0))" in lds[0]
    # each thread's loads bracketed by pop(2,1) ... push(1,2)
    assert body.count("pop(2,1)\n      LD(data") == 2
    # compute kernel: two folded loops, dy/dx/j stay software loops -> 3*3*14 = 126 uops per kernel
    assert "LOOP(8, 98, 0, 9)" in body and "LOOP(7, 14, 16, 0)" in body
    assert re.search(r"for dy < 3:\n\s+for dx < 3:\n\s+for x_inn < 14:\n\s+UOP\(0, 0, \(\(cthread\.s \* 784\) \+ x_inn\), "
                     r"\(\(\(\(cthread\.s \* 144\) \+ dx\) \+ \(dy \* 16\)\) \+ x_inn\), "
                     r"\(\(\(cthread\.s \* 72\) \+ dx\) \+ \(dy \* 3\)\)", body)
    # after the channel loop: two drains, then per thread the three ALU kernels over 784 elements
    assert re.search(r"pop\(2,1\)\n  pop\(2,1\)\n  for cthread\.s < 2:\n    CS\(2\)\{", body)
    for op, imm in ((3, requant_shift(256 * 9)), (1, 0), (0, 127)):      # SHR by the data rule's shift
        assert f"UOP(1, 0, (cthread.s * 784), (cthread.s * 784), 0, {op}, 1, {imm})" in body
    assert body.count("LOOP(784, 1, 1, 0)") == 3
    # per thread 8*7*14 single-element stores between pop(2,3) and push(3,2)
    assert re.search(r"CS\(3\)\{\n\s+pop\(2,3\)\n\s+for oc_inn < 8:\n\s+for y_inn < 7:\n\s+for x_inn < 14:\n"
                     r"\s+ST\(.*, OUT, res, .*, 1, 1, 1\)\n\s+push\(3,2\)", body)


def test_dump_dir_writes_the_ir_after_every_pass(cfg, tmp_path):
    func, _, _ = gemm_simple(cfg)
    run_passes(func, cfg, dump_dir=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00_input.txt"] + [f"{k:02d}_{n}.txt" for k, (n, _) in enumerate(PIPELINE, 1)]
    assert "pragma_dma_copy" in (tmp_path / "00_input.txt").read_text()
    assert "VTALoadBuffer2D" in (tmp_path / "02_inject_dma.txt").read_text()
    assert "vta.coproc_sync()" in (tmp_path / "07_coproc_sync.txt").read_text()
    assert (tmp_path / "12_fold_uop_loop.txt").read_text().strip() == ir.to_text(run_passes(func, cfg).body)


# ---- inject_dma -------------------------------------------------------------------------------
def _copy(dst, src, axes, dst_idx, src_idx, cond=None, cast=None):
    def body(*v):
        val = Load(src, src_idx(*v))
        if cast:
            val = Cast(cast, val)
        if cond is not None:
            val = Select(cond(*v), val, ir.IntImm(0))
        return Store(dst, dst_idx(*v), val)
    return nest(axes, body, "dma_copy")


def _dma_call(stmt, cfg):
    from vtasim.compiler.lowering.passes.simplify import simplify
    out = inject_dma(simplify(stmt), cfg)
    assert isinstance(out, Attr) and out.key == "coproc_scope"
    return out.value, out.body.call


def test_dma_load_folds_chained_loops_into_x(cfg):
    # rows of 4 elements, two rows adjacent in DRAM: (2 x 4) elements fold into x = 8
    g = Buffer("G", (8, 4, 16), "int8")
    s = Buffer("S", (2, 4, 16), "int8", INP)
    st = _copy(s, g, [("r", 2), ("c", 4), ("k", 16)], lambda r, c, k: (r * 4 + c) * 16 + k,
               lambda r, c, k: ((r + 2) * 4 + c) * 16 + k)
    stage, call = _dma_call(st, cfg)
    assert stage == 1
    assert [_e(a) for a in call.args[1:5]] == ["8", "8", "1", "8"]        # offset 8 elements, x 8, y 1


def test_dma_load_2d_strided_rows_and_elem_units(cfg):
    g = Buffer("G", (8, 10, 16), "int8")
    s = Buffer("S", (3, 4, 16), "int8", INP)
    st = _copy(s, g, [("r", 3), ("c", 4), ("k", 16)], lambda r, c, k: (r * 4 + c) * 16 + k,
               lambda r, c, k: ((r + 1) * 10 + c + 2) * 16 + k)
    _, call = _dma_call(st, cfg)
    assert [_e(a) for a in call.args[1:5]] == ["12", "4", "3", "10"]      # offset 1*10+2, x 4, y 3, stride 10


def test_dma_int8_into_the_accumulator_is_acc_8bit_on_the_compute_stage(cfg):
    g = Buffer("G", (4, 16), "int8")
    s = Buffer("S", (4, 16), "int32", ACC)
    st = _copy(s, g, [("r", 4), ("k", 16)], lambda r, k: r * 16 + k, lambda r, k: r * 16 + k, cast="int32")
    stage, call = _dma_call(st, cfg)
    assert stage == 2 and call.args[10].value == 5


def test_dma_padding_from_the_select_clip_bounds(cfg):
    g = Buffer("G", (4, 4, 16), "int8")
    s = Buffer("S", (6, 6, 16), "int8", INP)
    cond = lambda r, c, k: ir.and_(ir.and_(ir.ge(r, 1), ir.lt(r, 5)), ir.and_(ir.ge(c, 1), ir.lt(c, 5)))  # noqa: E731
    st = _copy(s, g, [("r", 6), ("c", 6), ("k", 16)], lambda r, c, k: (r * 6 + c) * 16 + k,
               lambda r, c, k: ((r - 1) * 4 + c - 1) * 16 + k, cond=cond)
    _, call = _dma_call(st, cfg)
    # src offset advanced past the pads to 0; x 4, y 4, stride 4; pads x 1/1, y 1/1
    assert [_e(a) for a in call.args[1:9]] == ["0", "4", "4", "4", "1", "1", "1", "1"]


def test_dma_padded_load_with_batch_rows_is_the_non_flat_pattern():
    from vtasim.hw.config import default_config_path
    cfg2 = load_config(default_config_path().parent / "presets" / "2x16x16.json")       # element = 2 x 16
    g = Buffer("G", (4, 4, 2, 16), "int8")
    s = Buffer("S", (6, 6, 2, 16), "int8", INP)
    y0 = Var("y0")                                  # outer tile loop: the pad depends on it
    cond = lambda r, c, b, k: ir.and_(ir.and_(ir.ge(r + y0, 1), ir.lt(r + y0, 5)),   # noqa: E731
                                      ir.and_(ir.ge(c, 1), ir.lt(c, 5)))
    st = _copy(s, g, [("r", 6), ("c", 6), ("b", 2), ("k", 16)], lambda r, c, b, k: ((r * 6 + c) * 2 + b) * 16 + k,
               lambda r, c, b, k: (((r + y0 - 1) * 4 + c - 1) * 2 + b) * 16 + k, cond=cond)
    _, call = _dma_call(st, cfg2)
    x, ystride = _e(call.args[2]), _e(call.args[4])
    assert (x, ystride) == ("4", "4")
    env = {y0: 0}
    vals = [ir.evaluate(a, env) for a in call.args[1:9]]
    # tile rows r = 0..5 are image rows r + y0 - 1: y0 = 0 reads G rows 0..3 into r = 1..4 (pads 1/1)
    assert vals == [0, 4, 4, 4, 1, 1, 1, 1]
    # y0 = 1 reads G rows 0..3 into r = 0..3 (pads 0 before, 2 after); x pads stay 1/1
    vals = [ir.evaluate(a, {y0: 1}) for a in call.args[1:9]]
    assert vals == [0, 4, 4, 4, 1, 0, 1, 2]


def test_dma_error_inner_stride(cfg):
    g = Buffer("data", (64 * 3,), "int8")
    s = Buffer("data_buf", (64,), "int8", INP)
    st = _copy(s, g, [("r", 4), ("k", 16)], lambda r, k: r * 16 + k, lambda r, k: (r * 16 + k) * 3)
    with pytest.raises(CompileError, match=r"^inject_dma: dma_copy of `data_buf`: stride of the inner loop "
                                           r"is 3 elements, the pattern needs 1$"):
        _dma_call(st, cfg)


def test_dma_error_sram_side_not_compact(cfg):
    g = Buffer("G", (64,), "int8")
    s = Buffer("S", (128,), "int8", INP)
    st = _copy(s, g, [("r", 4), ("k", 16)], lambda r, k: r * 32 + k, lambda r, k: r * 16 + k)
    with pytest.raises(CompileError, match="not compact: loop `r` has stride 32, a dense tile needs 16"):
        _dma_call(st, cfg)


def test_dma_error_padding_on_the_innermost_block(cfg):
    g = Buffer("G", (2, 4, 4, 16), "int8")
    s = Buffer("S", (2, 4, 4, 16), "int8", INP)
    st = _copy(s, g, [("c", 2), ("r", 4), ("w", 4), ("k", 16)],
               lambda c, r, w, k: ((c * 4 + r) * 4 + w) * 16 + k, lambda c, r, w, k: ((c * 4 + r) * 4 + w - 1) * 16 + k,
               cond=lambda c, r, w, k: ir.ge(w, 1))
    with pytest.raises(CompileError, match="padding on loop `w`: only the two image dimensions"):
        _dma_call(st, cfg)


def test_dma_error_store_must_read_the_accumulator(cfg):
    g = Buffer("G", (64,), "int8")
    s = Buffer("S", (64,), "int8", INP)
    st = _copy(g, s, [("r", 4), ("k", 16)], lambda r, k: r * 16 + k, lambda r, k: r * 16 + k)
    with pytest.raises(CompileError, match="a store to DRAM must read local.acc_buffer"):
        _dma_call(st, cfg)


# ---- lifting ---------------------------------------------------------------------------------
def test_lift_attr_scope_merges_runs_of_one_stage_but_never_two_uop_kernels():
    ev = lambda n: Evaluate(ir.Call(n, ()))  # noqa: E731
    body = seq(Attr("coproc_scope", 1, ev("a")), Attr("coproc_scope", 1, ev("b")), Attr("coproc_scope", 2, ev("c")))
    out = lift_attr_scope(body, "coproc_scope")
    assert [(s.key, s.value, len(s.body.stmts) if isinstance(s.body, ir.Seq) else 1) for s in out.stmts] == \
        [("coproc_scope", 1, 2), ("coproc_scope", 2, 1)]
    i = Var("i")
    uops = seq(Attr("coproc_uop_scope", "VTAPushALUOp", ev("x")), Attr("coproc_uop_scope", "VTAPushALUOp", ev("y")))
    out = lift_attr_scope(For(i, 4, uops), "coproc_uop_scope")
    assert isinstance(out, For) and len(out.body.stmts) == 2
    # one kernel nest lifts over its loop
    out = lift_attr_scope(For(i, 4, Attr("coproc_uop_scope", "VTAPushGEMMOp", ev("x"))), "coproc_uop_scope")
    assert isinstance(out, Attr) and isinstance(out.body, For)


def test_lift_alloc_moves_allocations_to_the_loop_head():
    a, b = Buffer("a", (16,), "int32", ACC), Buffer("b", (16,), "int32", ACC)
    i = Var("i")
    ev = Evaluate(ir.Call("x", ()))
    out = lift_alloc(For(i, 2, seq(ev, Allocate(a, seq(ev, Allocate(b, ev))))))
    assert isinstance(out, For) and out.body.buffer is a and out.body.body.buffer is b
    assert out.body.body.body == seq(ev, ev, ev)


# ---- coproc_sync -----------------------------------------------------------------------------
def test_coproc_sync_loop_carried_tokens_priming_and_drain():
    ev = Evaluate(ir.Call("work", ()))
    i = Var("i")
    body = For(i, 3, seq(Attr("coproc_scope", 2, ev), Attr("coproc_scope", 3, ev)))
    t = "\n".join(notation_loose(coproc_sync(body)))
    assert t == """push(3,2)
for i < 3:
  CS(2){
    pop(3,2)
    work()
    push(2,3)
  }
  CS(3){
    pop(2,3)
    work()
    push(3,2)
  }
pop(3,2)
coproc_sync"""


def notation_loose(s):
    return [x if "(" in x or x.endswith("{") or x.strip() in ("}", "coproc_sync") or x.lstrip().startswith("for")
            else x for x in notation(s)]


# ---- storage_rewrite -------------------------------------------------------------------------
def test_storage_rewrite_merges_per_scope_and_runs_alu_in_place(cfg):
    func, _, _ = vadd(cfg)
    body = func.body
    for name, fn in PIPELINE:
        body = fn(body, cfg)
        if name == "storage_rewrite":
            break
    allocs = []
    ir.walk(body, lambda n: allocs.append(n.buffer) if isinstance(n, Allocate) else None)
    assert [(b.name, b.size, b.scope) for b in allocs] == [("acc_buffer", 2 * 64 * 16, ACC)]
    offs = {}
    ir.walk(body, lambda n: offs.setdefault(n.buffer.name, n.buffer.elem_offset) if isinstance(n, (Load, Store)) else None)
    ptrs = {}
    ir.walk(body, lambda n: ptrs.setdefault(n.args[0].name, n.args[0].elem_offset)
            if isinstance(n, ir.Call) and n.name == "tvm_access_ptr" else None)
    offs.update(ptrs)
    assert offs["A_buf"] == 0 and offs["B_buf"] == 64 * 16 and offs["C_buf"] == 0     # C over A


def test_storage_rewrite_error_names_the_buffers(cfg):
    func, _, _ = conv2d_vt(cfg, oc_block=16, h_block=14, nthreads=1)        # 16*14*14 = 3136 > 2048
    with pytest.raises(CompileError, match=r"^storage_rewrite: allocation of 3136 elements exceeds "
                                           r"local.acc_buffer's 2048 elements \(`res_conv/res_shr/res_max/res_min` 3136\)"):
        run_passes(func, cfg)
    func, _, _ = conv2d_vt(cfg, oc_block=16, h_block=7, nthreads=2)         # 2 x 1568
    with pytest.raises(CompileError, match=r"allocation of 3136 elements exceeds .* 1568 x 2 threads"):
        run_passes(func, cfg)


# ---- inject_virtual_thread -------------------------------------------------------------------
def test_virtual_thread_replicates_buffers_and_statements(cfg):
    t = Var("t")
    buf = Buffer("x", (16,), "int8", INP)
    g = Buffer("G", (64,), "int8")
    ld = _copy(buf, g, [("k", 16)], lambda k: k, lambda k: t * 16 + k)
    body = Attr("virtual_thread", t, Allocate(buf, inject_dma(ld, cfg)), extra=2)
    body = lift_alloc(body)
    body = storage_rewrite(body, cfg)
    out = inject_virtual_thread(body, cfg)
    calls = []
    ir.walk(out, lambda n: calls.append(n) if isinstance(n, ir.Call) and n.name == "VTALoadBuffer2D" else None)
    assert len(calls) == 2                                                   # unrolled: no loop inside
    assert [_e(c.args[1]) for c in calls] == ["0", "1"]
    assert [_e(c.args[9].args[1]) for c in calls] == ["0", "16"]             # thread 1 at + 16 scalars
    alloc = []
    ir.walk(out, lambda n: alloc.append(n.buffer.size) if isinstance(n, Allocate) else None)
    assert alloc == [32]


def test_allocation_outside_the_virtual_thread_is_shared(cfg):
    t = Var("t")
    buf = Buffer("x", (16,), "int8", INP)
    g = Buffer("G", (64,), "int8")
    ld = _copy(buf, g, [("k", 16)], lambda k: k, lambda k: t * 16 + k)
    body = storage_rewrite(lift_alloc(Allocate(buf, Attr("virtual_thread", t, inject_dma(ld, cfg), extra=2))), cfg)
    out = inject_virtual_thread(body, cfg)
    calls = []
    ir.walk(out, lambda n: calls.append(n) if isinstance(n, ir.Call) and n.name == "VTALoadBuffer2D" else None)
    assert [_e(c.args[9].args[1]) for c in calls] == ["0", "0"]               # one copy, both threads


# ---- inject_alu ------------------------------------------------------------------------------
def _alu(cfg, value_fn, n=4, src=None):
    d = Buffer("d", (n, 16), "int32", ACC)
    s = src or d
    st = nest([("i", n), ("k", 16)], lambda i, k: Store(d, i * 16 + k, value_fn(Load(d, i * 16 + k), s, i, k)), "alu")
    out = inject_alu(Allocate(d, st) if s is d else Allocate(d, Allocate(s, st)), cfg)
    calls = []
    ir.walk(out, lambda n: calls.append(n) if isinstance(n, ir.Call) and n.name != "tvm_access_ptr" else None)
    return [(c.name, tuple(_e(a) if not (isinstance(a, ir.Call)) else _e(a.args[1]) for a in c.args)) for c in calls]


def test_alu_opcodes_from_the_stored_value(cfg):
    push = lambda calls: calls[1][1]   # noqa: E731  (loop begin, push, loop end)
    assert push(_alu(cfg, lambda x, s, i, k: x - 5))[5:] == ("2", "1", "-5")        # x - c -> ADD -c
    assert push(_alu(cfg, lambda x, s, i, k: x << 2))[5:] == ("3", "1", "-2")       # << c -> SHR -c
    assert push(_alu(cfg, lambda x, s, i, k: Cast("int32", x)))[5:] == ("3", "1", "0")  # copy -> SHR 0
    assert push(_alu(cfg, lambda x, s, i, k: ir.min_(3, x)))[5:] == ("0", "1", "3")
    # loops flattened: (4 rows x 16 lanes) contiguous -> one loop of 4 elements
    assert _alu(cfg, lambda x, s, i, k: x * 3)[0] == ("VTAUopLoopBegin", ("4", "1", "1", "0"))


def test_alu_vector_with_a_broadcast_source(cfg):
    bias = Buffer("bias", (16,), "int32", ACC)
    calls = _alu(cfg, lambda x, s, i, k: x + Load(s, k), src=bias)
    assert calls[0] == ("VTAUopLoopBegin", ("4", "1", "0", "0"))                      # src factor 0
    assert calls[1][1][5:] == ("2", "0", "0")


def test_alu_errors(cfg):
    with pytest.raises(CompileError, match=r"^inject_alu: immediate 70000 out of the 16-bit range"):
        _alu(cfg, lambda x, s, i, k: x + 70000)
    other = Buffer("o", (4, 16), "int32", ACC)
    with pytest.raises(CompileError, match="subtraction of two tensors has no ALU opcode"):
        _alu(cfg, lambda x, s, i, k: x - Load(s, i * 16 + k), src=other)
    with pytest.raises(CompileError, match="not in place"):
        _alu(cfg, lambda x, s, i, k: Load(s, i * 16 + k) + 1, src=other)


def test_more_than_two_loops_to_fold(cfg):
    # an ALU nest whose three outer loops do not chain keeps three loops: refused
    d = Buffer("d", (2, 4, 5, 16), "int32", ACC)
    st = nest([("a", 2), ("b", 3), ("c", 4), ("k", 16)],
              lambda a, b, c, k: Store(d, d.flat_index((a, b, c, k)), Load(d, d.flat_index((a, b, c, k))) + 1), "alu")
    func = Func("alu3", (), Allocate(d, st))
    with pytest.raises(CompileError, match=r"^fold_uop_loop/runtime: more than two loops to fold"):
        run_passes(func, cfg)


# ---- fold_uop_loop ---------------------------------------------------------------------------
def test_fold_uop_loop_keeps_software_loops_it_cannot_fold(cfg):
    i, j = Var("i"), Var("j")
    push = lambda d, s, w: Evaluate(ir.Call("VTAUopPush", tuple(map(ir.const, (0, 0, d, s, w, 0, 0, 0)))))  # noqa: E731
    # the outer loop's coefficients differ between the two pushes: nothing folds
    body = Attr("coproc_uop_scope", "VTAPushGEMMOp", For(i, 4, seq(push(i, 0, 0), push(i * 2 + 1, 0, 0))))
    out = fold_uop_loop(body)
    assert isinstance(out.body, For) and out.extra == 0
    # two loops fold, the third stays
    body = Attr("coproc_uop_scope", "VTAPushGEMMOp", For(i, 4, For(j, 3, For(Var("k"), 2, push(i * 8 + j, j, i)))))
    out = fold_uop_loop(body)
    lines = notation(out)
    assert lines[1:3] == ["  LOOP(4, 8, 0, 1)", "  LOOP(3, 1, 1, 0)"] and lines[3].strip().startswith("for k < 2")
