"""The ISA's bit-field rule and the widths that do not depend on the config (hardware spec 2.1-2.2).

Both :mod:`vtasim.hw.config` (which rejects a config whose fields do not fit the ISA) and :mod:`vtasim.hw.isa`
(which lays the fields out) use this module, so neither imports the other's internals: fields are
packed LSB-first and a field that would straddle bit 64 starts at bit 64 (the C bit-field rule).
``cfg`` below is anything with the ``log_*_depth`` and ``legacy_isa`` properties of a VTAConfig.
"""

from __future__ import annotations

__all__ = ["LOOP_ITER_WIDTH", "MEMOP_SRAM_ADDR_WIDTH", "ALU_IMM_WIDTH", "UOP_BITS", "INSN_BYTES", "HEADER",
           "id_bits", "pack", "field_specs", "check_isa_fit"]

# ISA field widths that do not depend on the config (hardware spec 2.2).
LOOP_ITER_WIDTH = 14
MEMOP_SRAM_ADDR_WIDTH = 16
ALU_IMM_WIDTH = 16
UOP_BITS = 32
INSN_BYTES = 16

HEADER = (("opcode", 3), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1), ("push_next", 1))


def id_bits(legacy: bool) -> int:
    """Width of the memory_type and alu_opcode fields: 2 in HW_VER 0.0.1 (hardware spec 2.9), else 3."""
    return 2 if legacy else 3


def pack(spec, total=128):
    """Allocate fields LSB-first; a field that would straddle bit 64 starts at 64.

    Returns (positions, overflow_word) where overflow_word names the first word that overflowed."""
    pos, out = 0, {}
    for name, width in spec:
        if pos < 64 < pos + width:
            pos = 64
        out[name] = (pos, width)
        pos += width
    word0 = max((lo + w for lo, w in out.values() if lo < 64), default=0)
    return out, pos, word0


def field_specs(cfg):
    """``({kind: ((field, width), ...)}, uop spec)`` in packing order for a config."""
    U, A, I, W = cfg.log_uop_depth, cfg.log_acc_depth, cfg.log_inp_depth, cfg.log_wgt_depth
    ids = id_bits(cfg.legacy_isa)
    mem = HEADER + (("memory_type", ids), ("sram_base", MEMOP_SRAM_ADDR_WIDTH), ("dram_base", 32),
                    ("y_size", 16), ("x_size", 16), ("x_stride", 16),
                    ("y_pad_0", 4), ("y_pad_1", 4), ("x_pad_0", 4), ("x_pad_1", 4))
    loop = (("reset_reg", 1), ("uop_bgn", U), ("uop_end", U + 1),
            ("iter_out", LOOP_ITER_WIDTH), ("iter_in", LOOP_ITER_WIDTH))
    gemm = HEADER + loop + (("dst_factor_out", A), ("dst_factor_in", A), ("src_factor_out", I),
                            ("src_factor_in", I), ("wgt_factor_out", W), ("wgt_factor_in", W))
    alu = HEADER + loop + (("dst_factor_out", A), ("dst_factor_in", A), ("src_factor_out", A),
                           ("src_factor_in", A), ("alu_opcode", ids), ("use_imm", 1),
                           ("imm", ALU_IMM_WIDTH))
    uop = (("dst_idx", A), ("src_idx", max(A, I)), ("wgt_idx", W))
    return {"mem": mem, "gemm": gemm, "alu": alu, "finish": HEADER}, uop


def check_isa_fit(cfg):
    """None when every instruction fits two 64-bit words and a uop fits 32 bits, else the reason."""
    specs, uop = field_specs(cfg)
    for kind, spec in specs.items():
        out, end, word0 = pack(spec)
        if end > 128:
            w1 = [n for n, (lo, _) in out.items() if lo >= 64]
            bits = sum(w for n, w in spec if n in w1)
            raise_text = (f"{kind.upper()} instruction needs {bits} bits in word 1 ({', '.join(w1)}) but a word "
                          f"has 64; fields may not straddle the two 64-bit words (ISA fit, hardware spec 2.8)")
            return raise_text
    uop_bits = sum(w for _, w in uop)
    if uop_bits > UOP_BITS:
        return (f"a micro-op needs {uop_bits} bits (dst {uop[0][1]} + src {uop[1][1]} + wgt {uop[2][1]}) "
                f"but is {UOP_BITS} bits (ISA fit, hardware spec 2.8)")
    return None
