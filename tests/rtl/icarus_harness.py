"""cocotb-free bring-up harness: compile the RTL with Icarus around a plain-Verilog driver
(``tests/rtl/hdl/tb_drive.v`` -> ``hw/rtl/tb/tb_top.v`` -> ``vta_top``) and run one memory image
through ``vvp``, reading back the same files the cosim flow reads (``trace.txt``, ``dram_out.hex``).

Used by the static RTL tests (Icarus compiles every preset; the worked timelines of
docs/timing.md section 10 run without cocotb) and by hand::

    python tests/rtl/icarus_harness.py            # runs timelines A and B, prints the traces
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vtasim.sim.rtl.results import parse_trace  # noqa: E402
from vtasim.sim.rtl.runner import _write_hex, parse_hex  # noqa: E402
from vtasim.hw.rtl_params import write_header  # noqa: E402

RTL_DIR = ROOT / "hw" / "rtl"
TB_TOP = ROOT / "hw" / "rtl" / "tb" / "tb_top.v"
DRIVER = Path(__file__).resolve().parent / "hdl" / "tb_drive.v"


def sources() -> list:
    return sorted(RTL_DIR.glob("*.v")) + [TB_TOP, DRIVER]


def compile_icarus(cfg, out_dir, tb_dram_bytes: int = 1 << 20) -> Path:
    """Write the header for ``cfg`` and compile; returns the ``.vvp`` file (raises on errors)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_header(cfg, out, tb_dram_bytes=tb_dram_bytes)
    vvp = out / "sim.vvp"
    cmd = ["iverilog", "-g2005", "-I", str(out), "-s", "tb_drive", "-o", str(vvp)] + [str(s) for s in sources()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"iverilog failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return vvp


def run_image(vvp, image, work_dir=None, max_cycles: int = 1_000_000) -> dict:
    """Run one image; returns {status, trace (RtlTrace), dram (np.uint8), log}."""
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="vtasim-harness-"))
    work.mkdir(parents=True, exist_ok=True)
    nwords = _write_hex(work / "dram_in.hex", image.dram(), image.cfg.bus_bytes)
    args = ["vvp", "-n", str(vvp), f"+insn_addr={image.insn_addr}", f"+insn_count={image.insn_count}",
            f"+max_cycles={max_cycles}", f"+dump_last={nwords - 1}"]
    proc = subprocess.run(args, cwd=work, capture_output=True, text=True)
    m = re.search(r"STATUS finish=(\d+) error=(\d+) error_code=(\d+) cycles=(\d+)", proc.stdout)
    if proc.returncode != 0 or m is None:
        raise RuntimeError(f"vvp failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    status = dict(zip(("finish", "error", "error_code", "cycles"), map(int, m.groups())))
    trace = parse_trace((work / "trace.txt").read_text())
    dram = parse_hex((work / "dram_out.hex").read_text(), image.cfg.bus_bytes, image.dram_size)
    return {"status": status, "trace": trace, "dram": dram, "log": proc.stdout}


def timeline_a(cfg):
    """docs/timing.md 10 A: LOAD UOP x_size=1; FINISH (cycles = 42)."""
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.hw.config import MEM_UOP
    b = ProgramBuilder(cfg)
    u = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u.elem(MEM_UOP), x_size=1, y_size=1, x_stride=1)
    b.finish()
    return b.build()


def timeline_b(cfg):
    """docs/timing.md 10 B: NOP-COMPUTE; FINISH (cycles = 25)."""
    from vtasim.sim.builder import ProgramBuilder
    b = ProgramBuilder(cfg)
    b.nop("compute")
    b.finish()
    return b.build()


def main():
    from vtasim.hw.config import load_config
    cfg = load_config()
    with tempfile.TemporaryDirectory() as tmp:
        vvp = compile_icarus(cfg, tmp)
        for name, make in (("A", timeline_a), ("B", timeline_b)):
            out = run_image(vvp, make(cfg), Path(tmp) / name)
            print(f"timeline {name}: {out['status']}")
            for r in out["trace"].records:
                print("  ", r)


if __name__ == "__main__":
    main()
