"""The timing-key table (``hw/timing.py``) against everything that implements it, no simulator needed.

* every row is a VTAConfig field with the row's default, range and power-of-two rule;
* every row is documented: a line of the table in ``docs/timing.md`` section 1 with the same default,
  range and section, and that section exists;
* every row is implemented: a parameter slot the cycle engine's core reads, a ``vta_top`` localparam
  and a header macro the Verilog uses, a conformance probe (``tests/timing_conformance.py``);
  :func:`gaps` names whatever piece a row lacks, and a made-up row shows it names each one;
* moving a key away from its default changes its probe's timing on the cycle engine, alone and in its
  group (the RTL half is ``tests/rtl/test_timing_conformance.py``).
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from vtasim.hw.config import ConfigError, VTAConfig, load_config
from vtasim.hw.rtl_params import header_defines
from vtasim.hw.rtl_report import expected_top
from vtasim.hw.timing import TIMING_KEYS, TimingKey
from vtasim.sim.cycle.engine import params
from vtasim.sim.cycle.layout import timing_slot
from vtasim.sim.errors import SimError
from timing_conformance import GROUPS, MOVED, PROBES, cycle_run, group_config, moved_config, outcome, probe_image

ROOT = Path(__file__).resolve().parents[1]
TIMING_MD = ROOT / "docs" / "timing.md"
CORE_SOURCES = sorted(p for p in (ROOT / "sim" / "cycle").glob("*.py") if p.name not in ("layout.py", "engine.py"))
RTL_SOURCES = sorted((ROOT / "hw" / "rtl").glob("*.v"))
KEYS = [pytest.param(k, id=k.name) for k in TIMING_KEYS]


def docs_range(key: TimingKey) -> str:
    return f"{key.lo} .. {key.hi}" + (", power of 2" if key.pow2 else "")


def docs_table() -> dict:
    """``{key: (default, range, section)}`` of the table in docs/timing.md section 1."""
    text = TIMING_MD.read_text()
    section = text[text.index("## 1. Parameters"):text.index("## 2.")]
    return {m.group(1): (int(m.group(2)), m.group(3), m.group(4))
            for m in re.finditer(r"^\| `(\w+)` \| (\d+) \| ([^|]+?) \| ([\d.]+) \|", section, re.M)}


def doc_sections() -> set:
    return {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", TIMING_MD.read_text(), re.M)}


def gaps(key: TimingKey) -> list:
    """What row ``key`` still lacks, one line per missing piece naming the file to edit ([] = none)."""
    out = []
    if key.name not in {f.name for f in fields(VTAConfig)}:
        out.append(f"{key.name}: no VTAConfig field (hw/config.py reads hw/timing.py: is the row in TIMING_KEYS?)")
    try:
        timing_slot(key)
    except SimError as exc:
        out.append(str(exc))
    slot = re.compile(rf"\bP_{key.slot}\b")
    if not any(slot.search(p.read_text()) for p in CORE_SOURCES):
        out.append(f"{key.name}: the cycle engine's core never reads P_{key.slot} (sim/cycle/core.py)")
    top = (ROOT / "hw" / "rtl" / "vta_top.v").read_text()
    decl = f"localparam integer {key.rtl_param} = `VTA_{key.rtl_macro};"
    if decl not in top:
        out.append(f"{key.name}: vta_top has no `{decl}` (hw/rtl/vta_top.v)")
    macros = [f"`VTA_{m}" for m in key.rtl_defines(key.default)]
    used = any(m in line and decl not in line for p in RTL_SOURCES for line in p.read_text().splitlines()
               for m in macros if re.search(re.escape(m) + r"\b", line))
    if not used:
        out.append(f"{key.name}: no Verilog in hw/rtl uses {' or '.join(macros)} (the RTL ignores the knob)")
    doc = docs_table()
    if key.name not in doc:
        out.append(f"{key.name}: no row in the table of docs/timing.md section 1")
    elif doc[key.name] != (key.default, docs_range(key), key.section):
        out.append(f"{key.name}: docs/timing.md section 1 says default, range, section {doc[key.name]}; "
                   f"hw/timing.py {(key.default, docs_range(key), key.section)}")
    if key.section not in doc_sections():
        out.append(f"{key.name}: docs/timing.md has no section {key.section}")
    for table, what in ((MOVED, "MOVED (a value away from the default)"), (PROBES, "PROBES (a program it times)")):
        if key.name not in table:
            out.append(f"{key.name}: no entry in tests/timing_conformance.py {what}")
    if sum(key.name in g for g in GROUPS) != 1:
        out.append(f"{key.name}: not in exactly one of tests/timing_conformance.py GROUPS")
    return out


@pytest.mark.parametrize("key", KEYS)
def test_every_row_is_implemented(key):
    assert gaps(key) == []


def test_a_row_without_implementation_is_named():
    """A made-up row lacks everything; :func:`gaps` names each piece (so the test above can fail)."""
    new = TimingKey("NEW_KNOB", 3, 1, 8, False, "a knob nobody implemented", "11", slot="NEW_KNOB",
                    rtl_param="NEW_KNOB", rtl_macro="NEW_KNOB")
    found = "\n".join(gaps(new))
    for piece in ("no VTAConfig field", "no parameter slot P_NEW_KNOB", "never reads P_NEW_KNOB",
                  "vta_top has no", "no Verilog in hw/rtl uses `VTA_NEW_KNOB", "no row in the table of docs/timing.md",
                  "no section 11", "MOVED", "PROBES", "GROUPS"):
        assert piece in found, (piece, found)
    # one piece missing at a time: a real row with a wrong default in the docs, a slot the core never reads
    drift = TimingKey("DRAM_LATENCY", 17, 1, 1024, False, "x", "4.2", slot="EB_UOP", rtl_param="DRAM_LATENCY",
                      rtl_macro="DRAM_LATENCY")
    assert gaps(drift) == ["DRAM_LATENCY: docs/timing.md section 1 says default, range, section "
                           "(16, '1 .. 1024', '4.2'); hw/timing.py (17, '1 .. 1024', '4.2')"]


@pytest.mark.parametrize("key", KEYS)
def test_row_is_a_config_field_with_its_default_and_range(key):
    cfg = load_config()
    tvm_only = cfg.to_dict(timing=False)
    assert getattr(VTAConfig.from_dict(tvm_only), key.name) == key.default
    assert {f.name: f.default for f in fields(VTAConfig)}[key.name] == key.default
    for bad in (key.lo - 1, key.hi + 1):
        with pytest.raises(ConfigError, match=rf"{key.name}.*out of range \[{key.lo}, {key.hi}\]"):
            cfg.replace(**{key.name: bad})
    if key.pow2:
        with pytest.raises(ConfigError, match=rf"{key.name}.*power of two"):
            cfg.replace(**{key.name: 3})


@pytest.mark.parametrize("key", KEYS)
def test_row_feeds_the_engine_slot_the_header_and_vta_top(key):
    moved = moved_config(key.name)
    value = MOVED[key.name]
    assert params(moved, 0, 1)[timing_slot(key)] == key.engine_value(value)
    assert params(load_config(), 0, 1)[timing_slot(key)] == key.engine_value(key.default)
    hdr = header_defines(moved)
    for macro, v in key.rtl_defines(value).items():
        assert hdr[macro] == v
    assert expected_top(moved).params[key.rtl_param] == key.hardware_value(value)


@pytest.mark.parametrize("key", KEYS)
def test_moving_a_key_changes_its_probe_on_the_cycle_engine(key):
    """Alone and in its group: the probe's timing (cycles, or where a push overflows) moves."""
    base = outcome(cycle_run(probe_image(key.name, load_config())))
    alone = outcome(cycle_run(probe_image(key.name, moved_config(key.name))))
    group = next(g for g in GROUPS if key.name in g)
    grouped = outcome(cycle_run(probe_image(key.name, group_config(group))))
    assert base[0] == "cycles"
    assert alone != base, f"{key.name} = {MOVED[key.name]} leaves {PROBES[key.name]} at {base}"
    assert grouped != base, f"group {group} leaves {PROBES[key.name]} at {base}"
