"""The model VCD carries the RTL's signal names and, cycle by cycle, the RTL's values."""

from __future__ import annotations

import pytest

from vtasim.waveforms.vcd import SCOPE, SIGNALS, write_model_vcd
from vcdread import read_vcd, sample_cycles

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("sim, name", [("icarus", "gemm_smt"), ("icarus", "relu"),
                                       pytest.param("verilator", "gemm_smt", marks=pytest.mark.slow)])
def test_model_vcd_equals_rtl_vcd(sim, name, cfg, tmp_path):
    """Icarus in CI; Verilator (which needs its own --trace build) in the slow set."""
    from vtasim.sim.rtl import run_image
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.programs.unit import UNIT_PROGRAMS
    image = UNIT_PROGRAMS[name](cfg)
    rtl = run_image(image, sim=sim, waves="vcd", waves_file=tmp_path / "rtl.vcd")
    model = cycle_run(image)
    assert rtl.cycles == model.cycles
    t0, p = rtl.launch_ns, rtl.clock_ns
    write_model_vcd(image, model, tmp_path / "model.vcd", offset_ns=t0, clock_ns=p)
    prefix = ".".join(SCOPE) + "."
    names = {prefix + n for n in SIGNALS}
    hw = read_vcd(tmp_path / "rtl.vcd", names=names)
    sw = read_vcd(tmp_path / "model.vcd", names=names)
    assert set(hw) == names, f"RTL lacks {sorted(names - set(hw))}"
    assert set(sw) == names
    for sig in sorted(names):
        a = sample_cycles(hw[sig], t0, p, rtl.cycles)
        b = sample_cycles(sw[sig], t0, p, rtl.cycles)
        bad = next((c for c in range(rtl.cycles) if a[c] != b[c]), None)
        assert bad is None, f"{sig} differs first at cycle {bad}: rtl {a[bad]}, model {b[bad]}"
    # the signals move at all (a program with tokens, queues and work in every module)
    assert any(v for _, v in sw[prefix + "tokens"]) and any(v for _, v in sw[prefix + "compute_busy"])


def test_gtkw_names_every_signal(tmp_path, cfg):
    from vtasim.waveforms.gtkw import write_gtkw
    from vtasim.waveforms.vcd import signal_widths
    text = write_gtkw(tmp_path / "v.gtkw", tmp_path / "x.vcd", window_ns=(100, 500),
                      widths=signal_widths(cfg)).read_text()
    for sig in SIGNALS:
        assert f"{'.'.join(SCOPE)}.{sig}" in text
