"""Static view of the Verilog RTL through pyverilog: parse every file, extract ``vta_top``'s
parameters and ports, check them against :class:`vtasim.hw.config.VTAConfig`, and print the module
hierarchy.  Nothing is simulated::

    >>> from vtasim.hw.config import load_config
    >>> from vtasim.hw.rtl_report import RtlParser, check_top
    >>> with RtlParser() as p:                                   # doctest: +SKIP
    ...     design = p.parse_design(load_config())
    ...     check_top(load_config(), design.top())               # [] when consistent
    ...     print(design.hierarchy_text())

pyverilog writes its parser tables into ``outputdir``; :class:`RtlParser` gives it a private temp
directory and builds the (slow) parser once for any number of files and configs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vtasim.hw.config import VTAConfig
from vtasim.hw.isa import layout
from vtasim.hw.rtl_params import write_header
from vtasim.hw.timing import TIMING_KEYS

__all__ = ["RTL_DIR", "TOP", "RtlParser", "Design", "TopInterface", "check_top", "report"]

RTL_DIR = Path(__file__).resolve().parent / "rtl"
TOP = "vta_top"


class RtlParseError(RuntimeError):
    """A Verilog file does not preprocess or parse; the message names the file."""


@dataclass
class TopInterface:
    params: dict = field(default_factory=dict)    # name -> int (parameters and localparams)
    ports: dict = field(default_factory=dict)     # name -> (direction, width)


def _eval(node, env: dict) -> int:
    """Value of a constant expression of the preprocessed RTL (integers, identifiers, + - * / << >>)."""
    from pyverilog.vparser import ast as A
    if isinstance(node, A.Rvalue):
        return _eval(node.var, env)
    if isinstance(node, A.IntConst):
        text = node.value.replace("_", "")
        m = re.fullmatch(r"(?:\d*)'([sS]?)([bodhBODH])([0-9a-fA-F]+)", text)
        if m:
            return int(m.group(3), {"b": 2, "o": 8, "d": 10, "h": 16}[m.group(2).lower()])
        return int(text)
    if isinstance(node, A.Identifier):
        if node.name not in env:
            raise KeyError(f"identifier {node.name} is not a known constant")
        return env[node.name]
    ops = {A.Plus: lambda a, b: a + b, A.Minus: lambda a, b: a - b, A.Times: lambda a, b: a * b,
           A.Divide: lambda a, b: a // b, A.Sll: lambda a, b: a << b, A.Srl: lambda a, b: a >> b,
           A.Mod: lambda a, b: a % b}
    for cls, fn in ops.items():
        if isinstance(node, cls):
            return fn(_eval(node.left, env), _eval(node.right, env))
    raise TypeError(f"unsupported constant expression node {type(node).__name__}")


def _walk(node):
    yield node
    for child in node.children():
        yield from _walk(child)


@dataclass
class Design:
    """The parsed RTL of one config: ``modules`` maps a module name to its pyverilog ModuleDef."""

    cfg: VTAConfig
    files: dict          # path -> pyverilog Source
    modules: dict        # name -> ModuleDef

    def instances(self, name: str) -> list:
        """(instance name, module name) of every instance inside module ``name`` (generates too)."""
        from pyverilog.vparser import ast as A
        out = []
        for node in _walk(self.modules[name]):
            if isinstance(node, A.Instance):
                out.append((node.name, node.module))
        return out

    def hierarchy(self, name: str = TOP) -> dict:
        """``{"module": name, "children": [{"instance": i, **hierarchy(child)}, ...]}``."""
        return {"module": name,
                "children": [dict(instance=inst, **self.hierarchy(mod)) for inst, mod in self.instances(name)
                             if mod in self.modules]}

    def hierarchy_text(self, name: str = TOP) -> str:
        lines = []

        def emit(node, depth, inst):
            label = f"{inst} ({node['module']})" if inst else node["module"]
            lines.append("  " * depth + label)
            for child in node["children"]:
                emit(child, depth + 1, child["instance"])
        emit(self.hierarchy(name), 0, None)
        return "\n".join(lines)

    def top(self) -> TopInterface:
        from pyverilog.vparser import ast as A
        mod = self.modules[TOP]
        env, iface = {}, TopInterface()
        for node in _walk(mod):
            if isinstance(node, (A.Parameter, A.Localparam)) and node.value is not None:
                try:
                    env[node.name] = _eval(node.value, env)
                except (KeyError, TypeError):
                    continue
                iface.params[node.name] = env[node.name]
        for port in mod.portlist.ports:
            decl = port.first if isinstance(port, A.Ioport) else port
            width = 1
            if decl.width is not None:
                width = _eval(decl.width.msb, env) - _eval(decl.width.lsb, env) + 1
            iface.ports[decl.name] = (type(decl).__name__.lower(), width)
        return iface


class RtlParser:
    """One pyverilog parser (tables in a private temp dir) for many files and configs."""

    def __init__(self):
        from pyverilog.vparser.parser import VerilogParser
        self._tmp = Path(tempfile.mkdtemp(prefix="vtasim-pyverilog-"))
        self._parser = VerilogParser(outputdir=str(self._tmp), debug=False)

    def close(self):
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def parse_file(self, path, include_dir):
        """Preprocess ``path`` with ``iverilog -E`` (as pyverilog does) and parse it."""
        out = self._tmp / "pp.v"
        proc = subprocess.run(["iverilog", "-E", "-I", str(include_dir), "-o", str(out), str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RtlParseError(f"{path}: preprocessing failed: {proc.stderr.strip()}")
        try:
            return self._parser.parse(out.read_text())
        except Exception as exc:          # pyverilog raises ParseError and plain exceptions
            raise RtlParseError(f"{path}: pyverilog cannot parse it: {exc}") from None

    def parse_design(self, cfg: VTAConfig, files=None) -> Design:
        """Parse every RTL file (default ``hw/rtl/*.v``) with the header generated for ``cfg``."""
        from pyverilog.vparser import ast as A
        inc = self._tmp / "inc"
        inc.mkdir(exist_ok=True)
        write_header(cfg, inc)
        files = [Path(f) for f in files] if files is not None else sorted(RTL_DIR.glob("*.v"))
        parsed, modules = {}, {}
        for path in files:
            src = self.parse_file(path, inc)
            parsed[path] = src
            for node in _walk(src):
                if isinstance(node, A.ModuleDef):
                    if node.name in modules:
                        raise RtlParseError(f"{path}: module {node.name} is defined twice")
                    modules[node.name] = node
        return Design(cfg=cfg, files=parsed, modules=modules)


def expected_top(cfg: VTAConfig) -> TopInterface:
    """What ``vta_top`` must declare for ``cfg`` (the one source of truth is VTAConfig)."""
    bus = cfg.bus_bits
    params = {"BATCH": cfg.batch, "BLOCK_IN": cfg.block_in, "BLOCK_OUT": cfg.block_out,
              "INP_WIDTH": cfg.inp_width, "WGT_WIDTH": cfg.wgt_width, "ACC_WIDTH": cfg.acc_width,
              "LOG_UOP_DEPTH": cfg.log_uop_depth, "LOG_INP_DEPTH": cfg.log_inp_depth,
              "LOG_WGT_DEPTH": cfg.log_wgt_depth, "LOG_ACC_DEPTH": cfg.log_acc_depth,
              **{key.rtl_param: key.hardware_value(getattr(cfg, key.name)) for key in TIMING_KEYS}}
    ports = {"clk": ("input", 1), "rst": ("input", 1), "launch": ("input", 1),
             "insn_addr": ("input", 32), "insn_count": ("input", 32),
             "mem_addr": ("output", 32), "mem_rdata": ("input", bus), "mem_insn_rdata": ("input", bus),
             "mem_wr": ("output", 1), "mem_wdata": ("output", bus), "mem_wstrb": ("output", bus // 8),
             "running": ("output", 1), "done": ("output", 1), "finish": ("output", 1),
             "error": ("output", 1), "error_code": ("output", 8), "cycles": ("output", 32),
             "cyc": ("output", 32), "ret_valid": ("output", 3), "ret_midx": ("output", 96),
             "ret_pidx": ("output", 96), "ret_op": ("output", 3 * layout(cfg).finish["opcode"][1]),
             "ret_start": ("output", 96),
             "ret_digest": ("output", 96), "disp_valid": ("output", 1), "disp_pidx": ("output", 32),
             "finish_now": ("output", 1), "error_now": ("output", 1), "error_code_now": ("output", 8),
             "tokens": ("output", 64), "quiet": ("output", 1)}
    return TopInterface(params=params, ports=ports)


def check_top(cfg: VTAConfig, iface: TopInterface) -> list:
    """Every disagreement between ``vta_top`` and VTAConfig, one line each ([] when none)."""
    want = expected_top(cfg)
    problems = []
    for name, value in want.params.items():
        got = iface.params.get(name)
        if got != value:
            problems.append(f"vta_top parameter {name} = {got}, VTAConfig says {value}")
    for name, spec in want.ports.items():
        got = iface.ports.get(name)
        if got != spec:
            problems.append(f"vta_top port {name} is {got}, expected {spec}")
    for name in sorted(set(iface.ports) - set(want.ports)):
        problems.append(f"vta_top port {name} {iface.ports[name]} is not part of the interface")
    return problems


def report(cfg: VTAConfig) -> str:
    """Text report: files parsed, vta_top parameters and ports, the check, the hierarchy."""
    with RtlParser() as parser:
        design = parser.parse_design(cfg)
    iface = design.top()
    lines = [f"RTL for {cfg.model}: {len(design.files)} files, {len(design.modules)} modules parsed by pyverilog",
             "vta_top parameters: " + ", ".join(f"{k}={v}" for k, v in iface.params.items()),
             "vta_top ports: " + ", ".join(f"{k}:{d[0][0]}{d[1]}" for k, d in iface.ports.items())]
    problems = check_top(cfg, iface)
    lines.append("check against VTAConfig: " + ("ok" if not problems else "; ".join(problems)))
    lines.append("hierarchy:")
    lines.append(design.hierarchy_text())
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    from vtasim.hw.config import load_config
    print(report(load_config(sys.argv[1] if len(sys.argv) > 1 else None)))
