"""Memory image format: round trip, and every hostile-image rule of the image loader."""

import json
import os

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_UOP
from vtasim.hw.isa import ALU_SHR, decode_stream
from vtasim.sim.builder import ProgramBuilder
from vtasim.sim.errors import ImageError
from vtasim.sim.image import MAX_DRAM_BYTES, MemoryImage, Segment


def small_image(cfg):
    b = ProgramBuilder(cfg)
    x = b.data("x", np.arange(4 * 16, dtype=np.int32))
    y = b.output("y", 4 * 16)
    u = b.uops([(0, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.load(memory_type=MEM_ACC, dram_base=x, x_size=4)
    b.alu(alu_opcode=ALU_SHR, use_imm=1, imm=0, uop_end=1, iter_in=4, dst_factor_in=1, src_factor_in=1)
    b.store(dram_base=y, x_size=4)
    b.finish()
    b.expect("y", np.arange(64, dtype=np.int32).astype(np.int8))
    return b.build()


def test_round_trip(cfg, tmp_path):
    img = small_image(cfg)
    img.save(tmp_path / "img")
    back = MemoryImage.load(tmp_path / "img")
    assert back.cfg == cfg
    assert (back.insn_addr, back.insn_count) == (img.insn_addr, img.insn_count)
    assert back.insn_bytes() == img.insn_bytes()
    assert np.array_equal(back.dram(), img.dram())
    assert back.expected == img.expected
    assert [(o.name, o.addr, o.nbytes) for o in back.outputs] == [(o.name, o.addr, o.nbytes) for o in img.outputs]
    insns = decode_stream(cfg, back.insn_bytes())
    assert [i.opcode for i in insns] == [0, 0, 4, 1, 3]
    # dram_base of the ACC load is the byte address of x in 64-byte elements
    assert insns[1].dram_base * cfg.acc_elem_bytes == img.outputs[0].addr - 4096
    assert back.dram_size % 4096 == 0 and back.dram_size >= img.outputs[0].end


def _doc(path):
    return json.loads((path / "image.json").read_text())


def _write(path, doc):
    (path / "image.json").write_text(json.dumps(doc))


@pytest.fixture()
def saved(cfg, tmp_path):
    d = tmp_path / "img"
    small_image(cfg).save(d)
    return d


@pytest.mark.parametrize("bad", ["../outside.bin", "/etc/passwd", "sub/../../x.bin"])
def test_segment_file_escaping(saved, bad, tmp_path):
    (tmp_path / "outside.bin").write_bytes(b"\0" * 16)
    doc = _doc(saved)
    doc["segments"][0]["file"] = bad
    _write(saved, doc)
    with pytest.raises(ImageError, match="absolute|escapes"):
        MemoryImage.load(saved)


def test_segment_symlink(saved, tmp_path):
    (tmp_path / "secret.bin").write_bytes(b"\1" * 64)
    os.symlink(tmp_path / "secret.bin", saved / "link.bin")
    doc = _doc(saved)
    doc["segments"][0]["file"] = "link.bin"
    _write(saved, doc)
    with pytest.raises(ImageError, match="symlink"):
        MemoryImage.load(saved)


def test_symlinked_subdir(saved, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.bin").write_bytes(b"\1" * 64)
    os.symlink(tmp_path / "elsewhere", saved / "sub")
    doc = _doc(saved)
    doc["segments"][0]["file"] = "sub/a.bin"
    _write(saved, doc)
    with pytest.raises(ImageError, match="symlink"):
        MemoryImage.load(saved)


@pytest.mark.parametrize("name", ["../evil", "a/b", ".", "..", "", "x y", "/abs"])
def test_output_name_escaping(saved, name):
    doc = _doc(saved)
    doc["outputs"][0]["name"] = name
    doc.pop("expected", None)
    _write(saved, doc)
    with pytest.raises(ImageError, match="plain name"):
        MemoryImage.load(saved)


def _set(*path_and_value, drop_expected=False):
    """A mutation of image.json: set doc[path...] = value (optionally dropping 'expected')."""
    *path, value = path_and_value

    def mutate(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
        if drop_expected:
            doc.pop("expected", None)
    return mutate


JSON_CASES = {
    "overlapping segments": (_set("segments", 1, "addr", lambda a: 0x1010), "overlap"),
    "segment far beyond DRAM": (_set("segments", 0, "addr", MAX_DRAM_BYTES - 8), "MAX_DRAM_BYTES"),
    # 2**62 must be refused by a range check, never by trying to allocate it
    "forged output address": (_set("outputs", 0, "addr", 1 << 62), "out of range"),
    "dram_size above limit": (_set("dram_size", MAX_DRAM_BYTES + 4096), "dram_size"),
    "dram_size 2**40": (_set("dram_size", 1 << 40), "dram_size"),
    "output beyond explicit DRAM": (_set("dram_size", 4096), "beyond dram_size"),
    "output far beyond": (_set("outputs", 0, "nbytes", MAX_DRAM_BYTES, drop_expected=True), "MAX_DRAM_BYTES"),
    "count larger than segment": (_set("insn", "count", lambda c: c + 1), "larger than the segment"),
    "insn address misaligned": (_set("insn", "addr", lambda a: a + 8), "multiple of 16"),
    "insn address not a segment": (_set("insn", "addr", lambda a: a + 16), "no segment starts"),
    "missing segment file": (_set("segments", 0, "file", "nope.bin"), "cannot stat"),
}


@pytest.mark.parametrize("case", list(JSON_CASES))
def test_hostile_json(saved, case):
    mutate, msg = JSON_CASES[case]
    doc = _doc(saved)
    mutate(doc)
    _write(saved, doc)
    with pytest.raises(ImageError, match=msg):
        MemoryImage.load(saved)


def test_expected_size_mismatch(saved):
    doc = _doc(saved)
    (saved / doc["expected"][0]["file"]).write_bytes(b"\0" * 3)
    with pytest.raises(ImageError, match="has 3 bytes"):
        MemoryImage.load(saved)


def test_missing_segment_file(saved):
    doc = _doc(saved)
    doc["segments"][0]["file"] = "nope.bin"
    _write(saved, doc)
    with pytest.raises(ImageError, match="cannot stat"):
        MemoryImage.load(saved)


@pytest.mark.parametrize("key,value,msg", [("format", "x", "format"), ("version", 2, "version"),
                                           ("insn", {"addr": -16, "count": 1}, "out of range"),
                                           ("insn", {"addr": True, "count": 1}, "integer"),
                                           ("segments", {}, "list"), ("bogus", 1, "unknown key")])
def test_malformed_json(saved, key, value, msg):
    doc = _doc(saved)
    doc[key] = value
    _write(saved, doc)
    with pytest.raises(ImageError, match=msg):
        MemoryImage.load(saved)


def test_bad_config_in_image(saved):
    doc = _doc(saved)
    doc["config"]["LOG_BLOCK"] = 9
    _write(saved, doc)
    with pytest.raises(ImageError, match="LOG_BLOCK"):
        MemoryImage.load(saved)


def test_not_json(saved):
    (saved / "image.json").write_text("{nope")
    with pytest.raises(ImageError, match="not valid JSON"):
        MemoryImage.load(saved)


def test_constructor_checks(cfg):
    with pytest.raises(ImageError, match="overlap"):
        MemoryImage(cfg, 0, 0, [Segment(0, b"\0" * 32), Segment(16, b"\0" * 32)])


def test_huge_sparse_segment_file_refused_before_reading(saved):
    doc = _doc(saved)
    big = saved / "big.bin"
    with open(big, "wb") as f:
        f.truncate(MAX_DRAM_BYTES + 1)          # sparse: no disk space, but a forged size
    doc["segments"][0]["file"] = "big.bin"
    _write(saved, doc)
    with pytest.raises(ImageError, match="more than MAX_DRAM_BYTES"):
        MemoryImage.load(saved)


def test_expected_file_escaping(saved, tmp_path):
    doc = _doc(saved)
    doc["expected"][0]["file"] = "../outside.bin"
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    _write(saved, doc)
    with pytest.raises(ImageError, match="escapes"):
        MemoryImage.load(saved)


def test_expected_for_unknown_output(saved):
    doc = _doc(saved)
    doc["expected"][0]["name"] = "zzz"
    _write(saved, doc)
    with pytest.raises(ImageError, match="not an output"):
        MemoryImage.load(saved)


def test_expected_counters_validated(saved):
    doc = _doc(saved)
    doc["expected_counters"] = {"gemm_counter": -1}
    _write(saved, doc)
    with pytest.raises(ImageError, match="expected_counters.gemm_counter = -1"):
        MemoryImage.load(saved)
    doc["expected_counters"] = {"cycles": 3}
    _write(saved, doc)
    with pytest.raises(ImageError, match="not one of"):
        MemoryImage.load(saved)


def test_builder_rejects_bad_names_and_misalignment(cfg):
    b = ProgramBuilder(cfg)
    with pytest.raises(ImageError, match="plain name"):
        b.output("../x", 16)
    x = b.data("x", np.zeros(16, np.int8))
    with pytest.raises(ImageError, match="used twice"):
        b.data("x", np.zeros(16, np.int8))
    from vtasim.sim.builder import Buffer
    odd = Buffer(cfg, "odd", x.addr + 16, 16)
    with pytest.raises(ImageError, match="not aligned to the 64-byte ACC element"):
        odd.elem(MEM_ACC)


def test_constructor_rejects_negative_and_forged(cfg):
    from vtasim.sim.image import Output
    with pytest.raises(ImageError, match="segment addr = -16"):
        MemoryImage(cfg, 0, 0, [Segment(-16, b"\0")])
    with pytest.raises(ImageError, match="output 'y' nbytes = 1099511627776 is out of range"):
        MemoryImage(cfg, 0, 0, [], [Output("y", 0, 1 << 40)])


def test_nul_byte_in_file_name(saved):
    doc = _doc(saved)
    doc["segments"][0]["file"] = "seg\u0000.bin"
    _write(saved, doc)
    with pytest.raises(ImageError, match="NUL byte"):
        MemoryImage.load(saved)


@pytest.mark.parametrize("name", [["y"], {"y": 1}, 3])
def test_expected_name_not_a_string(saved, name):
    doc = _doc(saved)
    doc["expected"][0]["name"] = name
    _write(saved, doc)
    with pytest.raises(ImageError, match="plain name"):
        MemoryImage.load(saved)


def test_expected_declared_twice(saved):
    doc = _doc(saved)
    doc["expected"] = doc["expected"] * 2
    _write(saved, doc)
    with pytest.raises(ImageError, match="second time"):
        MemoryImage.load(saved)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_image_json_fifo_refused_not_read(saved):
    # reading a FIFO with no writer would block forever
    (saved / "image.json").unlink()
    os.mkfifo(saved / "image.json")
    with pytest.raises(ImageError, match="not a regular file"):
        MemoryImage.load(saved)


def test_image_json_symlink_refused(saved, tmp_path):
    (saved / "image.json").rename(tmp_path / "real.json")
    os.symlink(tmp_path / "real.json", saved / "image.json")
    with pytest.raises(ImageError, match="not a regular file"):
        MemoryImage.load(saved)


def test_overlapping_outputs_cannot_multiply_what_is_read(saved):
    # 40 outputs of 512 MiB over the same DRAM, each with a (sparse) expected file: 20 GiB to read
    doc = _doc(saved)
    n = MAX_DRAM_BYTES // 2
    doc["outputs"] = [{"name": f"o{i}", "addr": 0, "nbytes": n} for i in range(40)]
    doc["expected"] = [{"name": f"o{i}", "file": f"e{i}.bin"} for i in range(40)]
    for i in range(40):
        with open(saved / f"e{i}.bin", "wb") as f:
            f.truncate(n)
    doc["dram_size"] = MAX_DRAM_BYTES
    _write(saved, doc)
    with pytest.raises(ImageError, match=r"outputs total \d+ bytes, more than MAX_DRAM_BYTES"):
        MemoryImage.load(saved)
