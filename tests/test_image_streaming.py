"""Whole-image copies: a loaded image keeps no second copy of its DRAM, outputs are copied out one at a
time, the RTL's DRAM hex file is written in pieces.  Peak memory is measured (``VmHWM`` in a
subprocess - ``ru_maxrss`` would inherit the pytest worker's peak across exec - and ``tracemalloc``
in process) against bounds derived from the sizes; bytes against numpy."""

import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, load_config
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import ImageError
from vtasim.sim.image import MemoryImage, Output, Segment
from vtasim.sim.rtl.runner import _write_hex, parse_hex

CFG = load_config()
ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def big_image(path: Path, dram_mib: int) -> tuple:
    """A runnable image whose DRAM is almost all one data segment, covered by two large outputs."""
    b = ProgramBuilder(CFG)
    x = b.data("x", (np.arange(16 * 16) % 251 - 100).astype("<i4").reshape(16, 16))
    out = b.output("out", 16 * 16)
    b.load(memory_type=MEM_ACC, dram_base=x, x_size=16, push_next=1)
    b.store(dram_base=out, x_size=16, pop_prev=1, push_prev=1)
    b.finish(pop_next=1)
    img = b.build()
    addr, n = MIB, (dram_mib - 2) * MIB
    data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
    segs = list(img.segments) + [Segment(addr, data.tobytes())]
    outs = list(img.outputs) + [Output("lo", addr, n // 2), Output("hi", addr + n // 2, n - n // 2)]
    MemoryImage(CFG, img.insn_addr, img.insn_count, segs, outs, dram_size=dram_mib * MIB).save(path)
    return data, (np.arange(16 * 16) % 251 - 100).astype(np.int8)


@pytest.mark.parametrize("engine", ["functional", "cycle"])
def test_loaded_image_run_holds_one_dram(tmp_path, engine):
    """Load + run + read every output of a 256 MiB image: the process grows by about one DRAM plus one
    output (bound 1.6 x DRAM), where holding segment bytes, DRAM and all outputs at once takes 3 x."""
    dram_mib = 256
    data, small = big_image(tmp_path / "img", dram_mib)
    script = textwrap.dedent(f"""
        import hashlib, json, resource, sys
        sys.path.insert(0, {str(ROOT)!r})
        from vtasim.sim.image import MemoryImage
        from vtasim.sim.{'functional' if engine == 'functional' else 'cycle.engine'} import run_image
        from vtasim.sim.cycle.engine import warm_up
        warm_up()
        before = int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1]) * 1024
        img = MemoryImage.load({str(tmp_path / 'img')!r})
        r = run_image(img)
        sums = {{name: hashlib.sha256(r.outputs[name]).hexdigest() for name in r.outputs}}
        peak = int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1]) * 1024
        print(json.dumps({{"sums": sums, "grew": peak - before}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    import hashlib
    n = len(data)
    assert got["sums"] == {"out": hashlib.sha256(small.tobytes()).hexdigest(),
                           "lo": hashlib.sha256(data[:n // 2].tobytes()).hexdigest(),
                           "hi": hashlib.sha256(data[n // 2:].tobytes()).hexdigest()}
    assert got["grew"] < 1.6 * dram_mib * MIB, f"grew by {got['grew'] >> 20} MiB for a {dram_mib} MiB DRAM"


def test_file_backed_segments_read_into_the_dram(tmp_path):
    """Loading reads no segment; the DRAM is built straight from the files (tracemalloc: one DRAM)."""
    data, _ = big_image(tmp_path / "img", 32)
    tracemalloc.start()
    try:
        img = MemoryImage.load(tmp_path / "img")
        after_load = tracemalloc.get_traced_memory()[0]
        dram = img.dram()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert after_load < 2 * MIB
    assert peak < 32 * MIB + 2 * MIB
    assert np.array_equal(dram[MIB:MIB + len(data)], data)
    # the image still round-trips: saved elsewhere it loads to the same bytes and outputs
    img.save(tmp_path / "copy")
    again = MemoryImage.load(tmp_path / "copy")
    assert np.array_equal(again.dram(), dram)
    assert again.insn_bytes() == img.insn_bytes() and len(img.insn_bytes()) == 16 * img.insn_count
    assert again.segments == img.segments


def test_segment_file_changed_after_load_is_refused(tmp_path):
    big_image(tmp_path / "img", 8)
    img = MemoryImage.load(tmp_path / "img")
    seg = max(img.segments, key=lambda s: s.nbytes)
    with open(seg._path, "ab") as f:
        f.write(b"\0")
    with pytest.raises(ImageError, match=r"seg002_00100000\.bin.* (changed size|has \d+ bytes)"):
        img.dram()


def test_outputs_are_copied_one_at_a_time():
    """``outputs`` of a run reads each region when asked; equality with a dict compares output by output."""
    dram = np.arange(1 << 16, dtype=np.uint32).view(np.uint8)
    from vtasim.sim.image import OutputBytes
    outs = OutputBytes([Output("a", 16, 100), Output("b", 4096, 8)], dram)
    assert list(outs) == ["a", "b"] and len(outs) == 2
    assert outs["a"] == dram[16:116].tobytes() and outs["b"] == dram[4096:4104].tobytes()
    assert outs == {"a": dram[16:116].tobytes(), "b": dram[4096:4104].tobytes()}
    assert {"a": dram[16:116].tobytes(), "b": dram[4096:4104].tobytes()} == outs
    assert outs != {"a": dram[16:116].tobytes(), "b": b"\0" * 8}
    assert outs != {"a": dram[16:116].tobytes()}
    assert outs == OutputBytes([Output("a", 16, 100), Output("b", 4096, 8)], dram.copy())
    assert dict(outs) == {"a": dram[16:116].tobytes(), "b": dram[4096:4104].tobytes()}


def test_dram_hex_is_written_in_pieces(tmp_path):
    """A 16 MiB DRAM as hex (34 MiB of text): tracemalloc peak stays a few MiB, and it parses back."""
    dram = np.random.default_rng(3).integers(0, 256, 16 * MIB, dtype=np.uint8)
    tracemalloc.start()
    try:
        nwords = _write_hex(tmp_path / "d.hex", dram, CFG.bus_bytes)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert nwords == dram.size // CFG.bus_bytes
    assert peak < 8 * MIB, f"peak {peak >> 20} MiB"
    text = (tmp_path / "d.hex").read_text()
    assert text.count("\n") == nwords
    assert np.array_equal(parse_hex(text, CFG.bus_bytes, dram.size), dram)
    first = dram[:CFG.bus_bytes][::-1].tobytes().hex()
    assert text.splitlines()[0] == first
