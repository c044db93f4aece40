"""``MemoryImage.relocated``: the same program placed higher in DRAM gives the same outputs.

The reference is the unmoved image on the functional engine (and the cycle engine's cycles): a
relocation that missed a memory type, an output or the instructions would read or write other bytes.
The random programs load every memory type (ACC, ACC_8BIT where the config has it, UOP, INP, WGT) and
store OUT; at least half of them are checked to hold data (not all zero) so a missed move cannot hide.
"""

import numpy as np
import pytest

from vtasim.hw.config import MEM_ACC, MEM_WGT, PRESETS, load_preset
from vtasim.hw.isa import OP_LOAD, OP_STORE, decode_stream
from vtasim.sim import cycle, functional
from vtasim.sim.errors import ImageError
from vtasim.sim.image import PAGE_BYTES
from vtasim.sim.programs.randprog import generate
from vtasim.sim.programs.unit import UNIT_PROGRAMS


def _outputs(result, image):
    return [bytes(result.outputs[o.name]) for o in image.outputs]


@pytest.mark.parametrize("preset", PRESETS)
def test_relocated_random_programs_give_the_same_outputs(preset):
    cfg = load_preset(preset)
    moved_types, with_data = set(), 0
    for seed in range(24):
        image = generate(cfg, seed)
        ref = functional.run_image(image)
        with_data += any(np.frombuffer(b, np.uint8).any() for b in _outputs(ref, image))
        for base in (PAGE_BYTES, 37 * PAGE_BYTES):
            moved = image.relocated(base)
            assert moved.insn_addr == image.insn_addr + base and moved.dram_size == image.dram_size + base
            assert [o.addr for o in moved.outputs] == [o.addr + base for o in image.outputs]
            assert _outputs(functional.run_image(moved), moved) == _outputs(ref, image), (seed, base)
        old, new = (decode_stream(cfg, im.insn_bytes()) for im in (image, moved))
        for a, b in zip(old, new):
            if a.opcode in (OP_LOAD, OP_STORE):
                assert b.dram_base * cfg.dram_elem_bytes(a.memory_type) == \
                    a.dram_base * cfg.dram_elem_bytes(a.memory_type) + 37 * PAGE_BYTES
                moved_types.add(a.memory_type)
            else:
                assert b == a
    assert {MEM_ACC, MEM_WGT} <= moved_types
    assert with_data >= 12        # at least half the programs store data that is not all zero


def test_relocated_unit_programs_keep_bytes_and_cycles(cfg):
    for name, make in UNIT_PROGRAMS.items():
        image = make(cfg)
        moved = image.relocated(PAGE_BYTES)
        ref, got = cycle.run_image(image), cycle.run_image(moved)
        assert _outputs(got, moved) == _outputs(ref, image), name
        assert got.cycles == ref.cycles, name
        assert moved.expected == image.expected


def test_relocation_errors_are_one_line(cfg):
    image = UNIT_PROGRAMS["gemm"](cfg)          # loads 256-byte weight elements
    with pytest.raises(ImageError, match=r"^relocation base 0x10 is not a multiple of the 256-byte WGT "
                                         r"elements instruction \d+ moves$"):
        image.relocated(16)
    with pytest.raises(ImageError, match=r"relocation base = -4096 is out of range"):
        image.relocated(-PAGE_BYTES)
    with pytest.raises(ImageError, match=r"relocation base = 1073741824 is out of range"):
        image.relocated(1 << 30)
