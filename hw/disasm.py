"""Disassembly in the shape of TVM's ``DUMP_INSN`` (hardware spec 5.8), and an assembler for it.

TVM's dump loses fields: the ALU immediate, ``use_imm`` of SHR/MUL, the memory type of ACC_8BIT
loads and of NOPs, the dependency flags of FINISH.  :func:`dump` prints TVM's lines unchanged and
adds one tab-indented line for each field TVM would lose, only when it carries information:

* every ALU: ``\\timm: <signed>, use_imm: <0|1>`` (and ``\\talu_opcode: <n>`` for an unknown op);
* LOAD of a type TVM does not name: the kind line says ``LOAD ACC_8BIT`` (TVM prints ``LOAD `` and
  continues with the dep line on the same text line; :func:`assemble` accepts both);
* a NOP whose memory type is not its flavour's default, or whose other fields are not 0:
  ``\\tmemory_type: <n>`` and/or TVM's DRAM/y/x lines;
* a STORE whose memory type is not OUT: ``\\tmemory_type: <n>``; FINISH with flags: TVM's dep line.

So ``assemble(dump(insns)) == insns`` for every decodable instruction, and ``dump(assemble(text))
== text`` for every text :func:`dump` produces.  :func:`assemble` also reads TVM's own dumps; with
``tvm=True`` it returns which fields the text lacked, per instruction (see ``vtasim.sim.programs.tvm_import``).
"""

from __future__ import annotations

import re

from vtasim.hw.config import MEM_ACC_8BIT, MEM_INP, MEM_NAMES, MEM_OUT, MEM_UOP
from vtasim.hw.files import brief
from vtasim.hw.isa import (ALU_NAMES, MODULE_LOAD, OP_ALU, OP_FINISH, OP_GEMM,
                    OP_LOAD, OP_STORE, OPCODE_NAMES, TOKEN_POPS, TOKEN_PUSHES, TOKEN_QUEUES, Insn, IsaError,
                    module_of)

__all__ = ["dump", "insn_lines", "one_line", "assemble", "DisasmError"]

_MEM_FIELDS = ("sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")
_NOP_KINDS = {"NOP-STORE-STAGE": (OP_STORE, MEM_UOP), "NOP-COMPUTE-STAGE": (OP_LOAD, MEM_UOP),
              "NOP-MEMORY-STAGE": (OP_LOAD, MEM_INP)}


class DisasmError(IsaError):
    """Text that the assembler cannot read back into instructions."""


def _mem_name(t: int) -> str:
    return MEM_NAMES.get(t, f"MEM{t}")


def _alu_op(insn: Insn) -> str:
    name = ALU_NAMES.get(insn.alu_opcode)
    if name is None:
        return "unknown op"
    if name in ("min", "max", "add") and insn.use_imm:
        return f"{name} imm"
    return name


def _dep(insn: Insn) -> str:
    return (f"\tdep - pop prev: {insn.pop_prev}, pop next: {insn.pop_next}, "
            f"push prev: {insn.push_prev}, push next: {insn.push_next}")


def _mem_lines(insn: Insn) -> list:
    return [f"\tDRAM: 0x{insn.dram_base:08x}, SRAM:0x{insn.sram_base:04x}",
            f"\ty: size={insn.y_size}, pad=[{insn.y_pad_0}, {insn.y_pad_1}]",
            f"\tx: size={insn.x_size}, stride={insn.x_stride}, pad=[{insn.x_pad_0}, {insn.x_pad_1}]"]


def _nop_kind(insn: Insn) -> str:
    if insn.opcode == OP_STORE:
        return "NOP-STORE-STAGE"
    return "NOP-MEMORY-STAGE" if module_of(OP_LOAD, insn.memory_type) == MODULE_LOAD else "NOP-COMPUTE-STAGE"


def insn_lines(insn: Insn) -> list:
    """The kind and field lines of one instruction (without TVM's queue lines)."""
    op = insn.opcode
    if op in (OP_LOAD, OP_STORE):
        if insn.x_size == 0:
            kind = _nop_kind(insn)
            lines = [kind, _dep(insn)]
            if insn.memory_type != _NOP_KINDS[kind][1]:
                lines.append(f"\tmemory_type: {insn.memory_type}")
            if any(getattr(insn, n) for n in _MEM_FIELDS):
                lines += _mem_lines(insn)
            return lines
        if op == OP_LOAD:
            lines = [f"LOAD {_mem_name(insn.memory_type)}", _dep(insn)]
        else:
            lines = ["STORE:", _dep(insn)]
            if insn.memory_type != MEM_OUT:
                lines.append(f"\tmemory_type: {insn.memory_type}")
        return lines + _mem_lines(insn)
    if op == OP_GEMM:
        return ["GEMM", _dep(insn), f"\treset_out: {insn.reset_reg}", f"\trange ({insn.uop_bgn}, {insn.uop_end})",
                f"\touter loop - iter: {insn.iter_out}, wgt: {insn.wgt_factor_out}, inp: {insn.src_factor_out}, "
                f"acc: {insn.dst_factor_out}",
                f"\tinner loop - iter: {insn.iter_in}, wgt: {insn.wgt_factor_in}, inp: {insn.src_factor_in}, "
                f"acc: {insn.dst_factor_in}"]
    if op == OP_ALU:
        lines = [f"ALU - {_alu_op(insn)}", _dep(insn), f"\treset_out: {insn.reset_reg}",
                 f"\trange ({insn.uop_bgn}, {insn.uop_end})",
                 f"\touter loop - iter: {insn.iter_out}, dst: {insn.dst_factor_out}, src: {insn.src_factor_out}",
                 f"\tinner loop - iter: {insn.iter_in}, dst: {insn.dst_factor_in}, src: {insn.src_factor_in}",
                 f"\timm: {insn.imm}, use_imm: {insn.use_imm}"]
        if insn.alu_opcode not in ALU_NAMES:
            lines.append(f"\talu_opcode: {insn.alu_opcode}")
        return lines
    if op == OP_FINISH:
        return ["FINISH"] + ([_dep(insn)] if insn.pop_prev or insn.pop_next or insn.push_prev or insn.push_next
                             else [])
    return [f"UNKNOWN opcode {op}"]


def _count_queues(insn: Insn, q: dict) -> None:
    """TVM's running token counts: informational, negative when a pop is listed before its push."""
    mod = module_of(insn.opcode, insn.memory_type)
    for flag, tok in TOKEN_POPS[mod]:
        q[tok] -= getattr(insn, flag)
    for flag, tok in TOKEN_PUSHES[mod]:
        q[tok] += getattr(insn, flag)


def dump(insns, uops=None) -> str:
    """Full DUMP_INSN-shaped text.  ``uops(insn) -> [(dst, src, wgt)]`` adds uop lines to LOAD UOPs."""
    out = [f"There are {len(insns)} instructions"]
    q = dict.fromkeys(TOKEN_QUEUES, 0)
    for i, insn in enumerate(insns):
        lines = insn_lines(insn)
        out.append(f"INSTRUCTION {i}: {lines[0]}")
        out += lines[1:]
        if uops is not None and insn.opcode == OP_LOAD and insn.memory_type == MEM_UOP and insn.x_size:
            for k, (d, s, w) in enumerate(uops(insn)):
                out.append(f"\t[{k:04d}]\t acc={d}, inp={s}, wgt={w}")
        _count_queues(insn, q)
        out.append(f"\tl2g_queue = {q['l2g']}, g2l_queue = {q['g2l']}")
        out.append(f"\ts2g_queue = {q['s2g']}, g2s_queue = {q['g2s']}")
    return "\n".join(out) + "\n"


def one_line(insn: Insn) -> str:
    """A compact single-line disassembly for error messages and traces."""
    deps = [n for n in ("pop_prev", "pop_next", "push_prev", "push_next") if getattr(insn, n)]
    dep = f" [{' '.join(deps)}]" if deps else ""
    op = insn.opcode
    if op in (OP_LOAD, OP_STORE):
        if insn.x_size == 0:
            return _nop_kind(insn) + dep
        return (f"{OPCODE_NAMES[op]} {_mem_name(insn.memory_type)} sram={insn.sram_base} dram={insn.dram_base} "
                f"y={insn.y_size} x={insn.x_size} stride={insn.x_stride} "
                f"pad=({insn.y_pad_0},{insn.y_pad_1},{insn.x_pad_0},{insn.x_pad_1}){dep}")
    if op in (OP_GEMM, OP_ALU):
        head = "GEMM" + (" reset" if insn.reset_reg else "") if op == OP_GEMM else f"ALU {_alu_op(insn)}"
        if op == OP_ALU and insn.use_imm:
            head += f" {insn.imm}"
        w = lambda s: f", wgt {getattr(insn, 'wgt_factor_' + s)}" if op == OP_GEMM else ""
        return (f"{head} uop=[{insn.uop_bgn},{insn.uop_end}) "
                f"out={insn.iter_out}(dst {insn.dst_factor_out}, src {insn.src_factor_out}{w('out')}) "
                f"in={insn.iter_in}(dst {insn.dst_factor_in}, src {insn.src_factor_in}{w('in')}){dep}")
    if op == OP_FINISH:
        return "FINISH" + dep
    return f"UNKNOWN opcode {op}"


# ---- assembler ---------------------------------------------------------------------------------
_RE = {
    "head": re.compile(r"INSTRUCTION (\d+): ?(.*)$"),
    "dep": re.compile(r"dep - pop prev: (\d+), pop next: (\d+), push prev: (\d+), push next: (\d+)$"),
    "dram": re.compile(r"DRAM: 0x([0-9a-fA-F]+), SRAM:0x([0-9a-fA-F]+)$"),
    "y": re.compile(r"y: size=(\d+), pad=\[(\d+), (\d+)\]$"),
    "x": re.compile(r"x: size=(\d+), stride=(\d+), pad=\[(\d+), (\d+)\]$"),
    "reset": re.compile(r"reset_out: (\d+)$"),
    "range": re.compile(r"range \((\d+), (\d+)\)$"),
    "gloop": re.compile(r"(outer|inner) loop - iter: (\d+), wgt: (\d+), inp: (\d+), acc: (\d+)$"),
    "aloop": re.compile(r"(outer|inner) loop - iter: (\d+), dst: (\d+), src: (\d+)$"),
    "imm": re.compile(r"imm: (-?\d+), use_imm: (\d+)$"),
    "memtype": re.compile(r"memory_type: (\d+)$"),
    "aluop": re.compile(r"alu_opcode: (\d+)$"),
    "queue": re.compile(r"(l2g|s2g)_queue = -?\d+, (g2l|g2s)_queue = -?\d+$"),
    "uop": re.compile(r"\[\d+\]"),
}
_ALU_BY_TEXT = {}
for _code, _name in ALU_NAMES.items():
    _ALU_BY_TEXT[_name] = (_code, None if _name in ("shr", "mul") else 0)
    if _name in ("min", "max", "add"):
        _ALU_BY_TEXT[_name + " imm"] = (_code, 1)
_MEM_BY_NAME = {v: k for k, v in MEM_NAMES.items()}


def _n(text: str, where, base: int = 10) -> int:
    """``int(text, base)`` of a field in dump text; a number too long for Python (more than 4300 decimal
    digits) is a DisasmError naming where, not a bare ValueError."""
    try:
        return int(text, base)
    except ValueError:
        where = f"instruction {where}" if isinstance(where, int) else where
        raise DisasmError(f"{where}: a number of {len(text)} digits ({text[:12]}...) is longer than Python reads "
                          f"(rule: at most 4300 digits; no field is wider than 32 bits)") from None


def _kind(text: str, idx: int):
    """Insn fields fixed by a kind line, and the fields the kind leaves to later lines."""
    if text in _NOP_KINDS:
        op, mt = _NOP_KINDS[text]
        return {"opcode": op, "memory_type": mt}, set()
    if text.startswith("LOAD"):
        name = text[4:].strip()
        if not name:
            # TVM prints nothing after "LOAD " only for ACC_8BIT (hardware spec 5.8)
            return {"opcode": OP_LOAD, "memory_type": MEM_ACC_8BIT}, {"memory_type"}
        mt = _MEM_BY_NAME.get(name)
        if mt is None:
            m = re.fullmatch(r"MEM(\d+)", name)
            if not m:
                raise DisasmError(f"instruction {idx}: unknown LOAD memory type {brief(name)}")
            mt = _n(m.group(1), idx)
        return {"opcode": OP_LOAD, "memory_type": mt}, set()
    if text == "STORE:":
        return {"opcode": OP_STORE, "memory_type": MEM_OUT}, set()
    if text == "GEMM":
        return {"opcode": OP_GEMM}, set()
    if text.startswith("ALU - "):
        op = text[6:]
        if op == "unknown op":
            return {"opcode": OP_ALU}, {"alu_opcode", "use_imm", "imm"}
        if op not in _ALU_BY_TEXT:
            raise DisasmError(f"instruction {idx}: unknown ALU operation {brief(op)}")
        code, use_imm = _ALU_BY_TEXT[op]
        need = {"imm"} | ({"use_imm"} if use_imm is None else set())
        return {"opcode": OP_ALU, "alu_opcode": code, "use_imm": use_imm or 0}, need
    if text == "FINISH":
        return {"opcode": OP_FINISH}, set()
    raise DisasmError(f"instruction {idx}: cannot assemble kind line {brief(text)}")


def _apply(line: str, f: dict, given: set, idx: int) -> None:
    body = line.strip()
    for key, rx in _RE.items():
        m = rx.match(body)
        if not m:
            continue
        g = m.groups()
        if key == "dep":
            f.update(pop_prev=_n(g[0], idx), pop_next=_n(g[1], idx), push_prev=_n(g[2], idx), push_next=_n(g[3], idx))
        elif key == "dram":
            f.update(dram_base=_n(g[0], idx, 16), sram_base=_n(g[1], idx, 16))
        elif key == "y":
            f.update(y_size=_n(g[0], idx), y_pad_0=_n(g[1], idx), y_pad_1=_n(g[2], idx))
        elif key == "x":
            f.update(x_size=_n(g[0], idx), x_stride=_n(g[1], idx), x_pad_0=_n(g[2], idx), x_pad_1=_n(g[3], idx))
        elif key == "reset":
            f["reset_reg"] = _n(g[0], idx)
        elif key == "range":
            f.update(uop_bgn=_n(g[0], idx), uop_end=_n(g[1], idx))
        elif key == "gloop":
            s = "out" if g[0] == "outer" else "in"
            f.update({f"iter_{s}": _n(g[1], idx), f"wgt_factor_{s}": _n(g[2], idx), f"src_factor_{s}": _n(g[3], idx),
                      f"dst_factor_{s}": _n(g[4], idx)})
        elif key == "aloop":
            s = "out" if g[0] == "outer" else "in"
            f.update({f"iter_{s}": _n(g[1], idx), f"dst_factor_{s}": _n(g[2], idx), f"src_factor_{s}": _n(g[3], idx)})
        elif key == "imm":
            f.update(imm=_n(g[0], idx), use_imm=_n(g[1], idx))
            given.update({"imm", "use_imm"})
        elif key == "memtype":
            f["memory_type"] = _n(g[0], idx)
            given.add("memory_type")
        elif key == "aluop":
            f["alu_opcode"] = _n(g[0], idx)
            given.add("alu_opcode")
        return
    raise DisasmError(f"instruction {idx}: cannot read line {brief(body)}")


def assemble(text: str, tvm: bool = False):
    """Instructions from dump text.  ``tvm=False``: every field must be present (our dumps).
    ``tvm=True``: return ``(insns, missing)`` where ``missing[i]`` lists fields the text lacked
    (filled with 0, or ACC_8BIT for a nameless LOAD)."""
    insns, missing = [], {}
    cur = None

    def close():
        if cur is None:
            return
        idx, f, need, given = cur
        lacked = sorted(need - given)
        if lacked:
            if not tvm:
                raise DisasmError(f"instruction {idx}: text lacks field(s) {', '.join(lacked)}")
            missing[idx] = lacked
        try:
            insns.append(Insn(**f))
        except TypeError as exc:
            raise DisasmError(f"instruction {idx}: {exc}") from None

    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _RE["head"].match(line)
        if m:
            close()
            idx = _n(m.group(1), f"line {lineno}")
            if idx != len(insns):
                raise DisasmError(f"line {lineno}: INSTRUCTION {idx} out of order (expected {len(insns)})")
            rest, _, tail = m.group(2).partition("\t")   # TVM's "LOAD \tdep - ..." for ACC_8BIT
            f, need = _kind(rest.strip(), idx)
            cur = (idx, f, need, set())
            if tail:
                _apply(tail, f, cur[3], idx)
            continue
        if line.startswith("There are "):
            continue
        if cur is None or not line.startswith("\t"):
            if tvm:
                continue                          # other program output around TVM's dump
            raise DisasmError(f"line {lineno}: unexpected text {brief(line.strip())}")
        body = line.strip()
        if _RE["queue"].match(body) or _RE["uop"].match(body):
            continue
        _apply(line, cur[1], cur[3], cur[0])
    close()
    return (insns, missing) if tvm else insns
