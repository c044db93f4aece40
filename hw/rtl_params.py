"""Generate ``vta_params.vh``, the one header that parameterises the Verilog RTL.

Every size, width and instruction bit position the RTL uses comes from here, and this file takes
them from :class:`vtasim.hw.config.VTAConfig` and :func:`vtasim.hw.isa.layout` only, so the RTL can never drift
from the Python models::

    >>> from vtasim.hw.config import load_config
    >>> from vtasim.hw.rtl_params import header_text
    >>> "`define VTA_BLOCK_OUT 16" in header_text(load_config())
    True

The header is a build product: :func:`write_header` writes it into a build directory, it is never
committed next to the RTL.
"""

from __future__ import annotations

from pathlib import Path

from vtasim.hw.config import (ConfigError, MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_UOP, MEM_WGT,
                       VTAConfig)
from vtasim.hw.alu import ops_for
from vtasim.hw.isa import OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, layout, store_mem_type
from vtasim.hw.timing import TIMING_KEYS

__all__ = ["HEADER_NAME", "DEFAULT_TB_DRAM_BYTES", "timing_defines", "header_defines", "header_text", "write_header",
           "check_rtl_supported"]

HEADER_NAME = "vta_params.vh"
DEFAULT_TB_DRAM_BYTES = 16 << 20


def _log2(value: int) -> int:
    return value.bit_length() - 1


def check_rtl_supported(cfg: VTAConfig) -> None:
    """Raise ConfigError for configs the RTL datapath does not cover (never silently mis-build)."""
    # The write digest and the store narrowing work on 32-bit words of whole elements.
    for name, nbytes in (("OUT element", cfg.out_elem_bytes), ("ACC_8BIT DRAM element", cfg.acc8_elem_bytes),
                         ("INP element", cfg.inp_elem_bytes)):
        if nbytes % 4:
            raise ConfigError(f"config {cfg.bitstream}: {name} is {nbytes} bytes; the RTL needs a multiple "
                              f"of 4 bytes (LOG_BATCH + LOG_BLOCK >= 2)")
    if cfg.acc_width != 32:
        raise ConfigError(f"config {cfg.bitstream}: LOG_ACC_WIDTH gives {cfg.acc_width}-bit accumulators; "
                          f"the RTL implements 32")


def timing_defines(cfg: VTAConfig) -> dict:
    """The header macros of every timing key (:data:`vtasim.hw.timing.TIMING_KEYS`, in table order)."""
    out = {}
    for key in TIMING_KEYS:
        out.update(key.rtl_defines(getattr(cfg, key.name)))
    return out


def header_defines(cfg: VTAConfig, tb_dram_bytes: int = DEFAULT_TB_DRAM_BYTES) -> dict:
    """``{macro name without VTA_ prefix: int}`` in emission order."""
    check_rtl_supported(cfg)
    bus_bytes = cfg.bus_bytes
    if tb_dram_bytes <= 0 or tb_dram_bytes % bus_bytes or tb_dram_bytes & (tb_dram_bytes - 1):
        raise ConfigError(f"tb_dram_bytes = {tb_dram_bytes} must be a power of two and a multiple of "
                          f"BUS_BYTES = {bus_bytes}")
    d = {
        "BATCH": cfg.batch, "LOG_BATCH": cfg.LOG_BATCH,
        "BLOCK_IN": cfg.block_in, "BLOCK_OUT": cfg.block_out, "LOG_BLOCK": cfg.LOG_BLOCK,
        "INP_WIDTH": cfg.inp_width, "WGT_WIDTH": cfg.wgt_width, "ACC_WIDTH": cfg.acc_width,
        "LOG_ACC_WIDTH": cfg.LOG_ACC_WIDTH,
        "OUT_WIDTH": cfg.out_width,
        "UOP_ELEM_BITS": cfg.uop_elem_bits, "INP_ELEM_BITS": cfg.inp_elem_bits,
        "WGT_ELEM_BITS": cfg.wgt_elem_bits, "ACC_ELEM_BITS": cfg.acc_elem_bits,
        "OUT_ELEM_BITS": cfg.out_elem_bits, "ACC8_ELEM_BITS": cfg.acc8_elem_bytes * 8,
        "LOG_UOP_DEPTH": cfg.log_uop_depth, "LOG_INP_DEPTH": cfg.log_inp_depth,
        "LOG_WGT_DEPTH": cfg.log_wgt_depth, "LOG_ACC_DEPTH": cfg.log_acc_depth,
        "UOP_DEPTH": cfg.uop_depth, "INP_DEPTH": cfg.inp_depth, "WGT_DEPTH": cfg.wgt_depth,
        "ACC_DEPTH": cfg.acc_depth,
        **timing_defines(cfg),
        "OP_LOAD": OP_LOAD, "OP_STORE": OP_STORE, "OP_GEMM": OP_GEMM, "OP_FINISH": OP_FINISH,
        "OP_ALU": OP_ALU,
        "MEM_UOP": MEM_UOP, "MEM_WGT": MEM_WGT, "MEM_INP": MEM_INP, "MEM_ACC": MEM_ACC,
        # the code a STORE's memory_type field holds: OUT (4) cut to the field's width (0 in HW_VER 0.0.1)
        "MEM_OUT": store_mem_type(cfg), "MEM_ACC_8BIT": MEM_ACC_8BIT,
        # one define per row of vtasim.hw.alu this HW_VER has, and the set of them as a bit mask (bit c set
        # for opcode c): vta_fetch rejects any other opcode as an undecodable instruction
        **{f"ALU_{op.name}": op.opcode for op in ops_for(cfg.HW_VER)},
        "ALU_LEGAL_MASK": sum(1 << op.opcode for op in ops_for(cfg.HW_VER)),
        "LEGACY_ISA": int(cfg.legacy_isa),
        "INSN_BITS": 128, "LOG_INSN_BYTES": 4,
        "HDR_BITS": sum(w for _, w in layout(cfg).finish.values()),
        "TB_DRAM_BYTES": tb_dram_bytes, "TB_DRAM_WORDS": tb_dram_bytes // bus_bytes,
        "LOG_TB_DRAM_WORDS": _log2(tb_dram_bytes // bus_bytes),
    }
    # log2 of DRAM element bytes (address shifts) and element slots per bus beat, per memory type
    for name, nbytes in (("UOP", cfg.uop_elem_bytes), ("INP", cfg.inp_elem_bytes), ("WGT", cfg.wgt_elem_bytes),
                         ("ACC", cfg.acc_elem_bytes), ("OUT", cfg.out_elem_bytes),
                         ("ACC8", cfg.acc8_elem_bytes), ("INSN", 16)):
        if name != "INSN":
            d[f"LOG_{name}_ELEM_BYTES"] = _log2(nbytes)
        d[f"SLOTS_{name}"] = max(1, bus_bytes // nbytes)
    d["ACC_NW"] = 1 + d["SLOTS_ACC"] + d["SLOTS_ACC8"]   # GEMM/ALU + ACC + ACC_8BIT write slots
    lay = layout(cfg)
    for field in ("reset_reg", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
                  "dst_factor_in"):
        if lay.gemm[field] != lay.alu[field]:   # the RTL decodes the loop fields once for both
            raise ConfigError(f"config {cfg.bitstream}: GEMM and ALU place {field} differently "
                              f"({lay.gemm[field]} vs {lay.alu[field]}); the RTL needs them equal")
    # The common header bits are the FINISH layout; every other kind repeats them.
    for kind, fmt in (("HDR", lay.finish), ("MEM", lay.mem), ("GEMM", lay.gemm), ("ALU", lay.alu),
                      ("UOP", lay.uop)):
        for field, (lsb, width) in fmt.items():
            if kind != "HDR" and field in lay.finish:
                continue
            d[f"{kind}_{field.upper()}_LSB"] = lsb
            d[f"{kind}_{field.upper()}_W"] = width
    return d


def header_text(cfg: VTAConfig, tb_dram_bytes: int = DEFAULT_TB_DRAM_BYTES) -> str:
    lines = [f"// Generated by hw/rtl_params.py for {cfg.model} (timing: L={cfg.DRAM_LATENCY}, "
             f"K={cfg.BURST_BEATS}, BUS={cfg.bus_bits}). Do not edit, do not commit.",
             "`ifndef VTA_PARAMS_VH", "`define VTA_PARAMS_VH"]
    lines += [f"`define VTA_{name} {value}" for name, value in header_defines(cfg, tb_dram_bytes).items()]
    lines += ["`endif", ""]
    return "\n".join(lines)


def write_header(cfg: VTAConfig, path, tb_dram_bytes: int = DEFAULT_TB_DRAM_BYTES) -> Path:
    """Write the header; ``path`` is a directory (gets ``vta_params.vh``) or a file path."""
    path = Path(path)
    if path.is_dir():
        path = path / HEADER_NAME
    text = header_text(cfg, tb_dram_bytes)
    if not (path.exists() and path.read_text() == text):   # keep mtimes stable for build caching
        path.write_text(text)
    return path
