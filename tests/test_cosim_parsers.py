"""The file formats exchanged with the HDL testbench, without a simulator."""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.sim.rtl.results import parse_trace
from vtasim.sim.rtl.runner import _write_hex, parse_hex
from vtasim.sim.errors import SimError
from vtasim.sim.result import RetireRecord


@pytest.mark.parametrize("bus_bytes", [8, 16, 64])
def test_hex_round_trip(tmp_path, bus_bytes):
    rng = np.random.default_rng(bus_bytes)
    data = rng.integers(0, 256, 1000, dtype=np.uint8)       # not a multiple of the bus width
    n = _write_hex(tmp_path / "d.hex", data, bus_bytes)
    assert n == -(-1000 // bus_bytes)
    lines = (tmp_path / "d.hex").read_text().split()
    # Word 0 first, most significant byte first within a word (little-endian words).
    assert lines[0] == data[:bus_bytes][::-1].tobytes().hex()
    text = "// comment as Icarus writes\n@0\n" + "\n".join(lines) + "\n"
    assert np.array_equal(parse_hex(text, bus_bytes, 1000), data)


def test_hex_with_x_bits_is_an_error():
    with pytest.raises(SimError, match="word 1 = 'xxxxxxxxxxxxxxxx'"):
        parse_hex("0000000000000000\nxxxxxxxxxxxxxxxx\n", 8, 16)


def test_trace_parse():
    t = parse_trace("D 0 20\nD 1 21\nR 1 0 0 0 21 39 0000abcd\nR 1 1 1 3 40 41 00000000\nF 42\n")
    assert t.dispatch == {0: 20, 1: 21}
    assert t.records == [RetireRecord("compute", 0, 0, 0, 21, 39, 0xabcd), RetireRecord("compute", 1, 1, 3, 40, 41, 0)]
    assert t.cycles == 42 and t.error is None
    assert parse_trace("E 2 1000\n").error == (2, 1000)


@pytest.mark.parametrize("line", ["R 1 0 0 0 21 39", "Q 1", "D x 3", "R 7 0 0 0 1 2 00000000"])
def test_trace_bad_line(line):
    with pytest.raises(SimError, match="line 1"):
        parse_trace(line + "\n")


def test_testbench_dram_grows_with_the_image():
    from vtasim.sim.rtl.runner import TB_DRAM_DEFAULT, tb_dram_bytes_for
    assert tb_dram_bytes_for("icarus", 0) == TB_DRAM_DEFAULT["icarus"] == 1 << 20
    assert tb_dram_bytes_for("icarus", (1 << 20) + 1) == 2 << 20
    assert tb_dram_bytes_for("icarus", 2_437_120) == 4 << 20          # full ResNet C11
    assert tb_dram_bytes_for("verilator", 2_437_120) == 16 << 20
    assert tb_dram_bytes_for("verilator", (16 << 20) + 4096) == 32 << 20


def test_build_cache_location(monkeypatch, tmp_path):
    """$VTASIM_BUILD_DIR, else $XDG_CACHE_HOME/vtasim/rtl (XDG base directory spec: absolute paths
    only), else ~/.cache/vtasim/rtl."""
    from vtasim.sim.rtl.runner import cache_root
    monkeypatch.delenv("VTASIM_BUILD_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "vtasim" / "rtl"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    assert cache_root() == tmp_path / "home" / ".cache" / "vtasim" / "rtl"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "vtasim" / "rtl"
    monkeypatch.setenv("VTASIM_BUILD_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
