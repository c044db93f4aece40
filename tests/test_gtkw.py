"""The GTKWave save file opens as a person needs it: groups expanded, every signal, the whole run in view.

Checked against GTKWave's own save-file conventions (analyzer.h trace flags: blank 0x200, collapsed
group 0x400000, group begin 0x800000, group end 0x1000000; ``*z`` zooms to ``2**-z`` time units per
200-pixel frame), independently of pyvcd which writes the file.  It was also looked at in GTKWave
3.3.118 under Xvfb: four open groups, ten traces, the demo's whole run across the wave pane.
"""

from __future__ import annotations

import re

from vtasim.hw.config import load_config
from vtasim.waveforms.gtkw import WAVE_PX, GROUPS, write_gtkw
from vtasim.waveforms.vcd import SCOPE, SIGNALS, signal_widths

TR_BLANK, TR_CLOSED, TR_GRP_BEGIN, TR_GRP_END = 0x200, 0x400000, 0x800000, 0x1000000


def _flags_and_lines(text):
    """(flag in force, line) for every trace or group line of a save file."""
    flag, out = 0, []
    for line in text.splitlines():
        if line.startswith("@"):
            flag = int(line[1:], 16)
        elif line and line[0] not in "[*":
            out.append((flag, line))
    return out


def _zoom(text) -> float:
    (z,) = re.findall(r"^\*(-?[0-9.]+) ", text, re.M)
    return float(z)


def test_groups_open_with_every_signal(tmp_path):
    cfg = load_config()
    text = write_gtkw(tmp_path / "m.gtkw", tmp_path / "m.vcd", widths=signal_widths(cfg), end_ns=1000).read_text()
    assert '[dumpfile] "m.vcd"' in text and '[savefile] "m.gtkw"' in text     # relative: the folder can move
    items = _flags_and_lines(text)
    begins = [line for flag, line in items if flag & TR_GRP_BEGIN]
    assert begins == [f"-{g}" for g, _ in GROUPS]
    assert not [line for flag, line in items if flag & TR_CLOSED], "a group would open collapsed"
    assert [line for flag, line in items if flag & TR_GRP_END] == begins
    traces = [line for flag, line in items if not flag & (TR_BLANK | TR_GRP_BEGIN | TR_GRP_END)]
    widths = signal_widths(cfg)
    want = {f"{'.'.join(SCOPE)}.{s}" + (f"[{widths[s] - 1}:0]" if widths[s] > 1 else "") for s in SIGNALS}
    assert {t.split("} ")[-1] for t in traces} == want       # "+{alias} name" or "name"


def test_zoom_shows_the_whole_run_or_the_window(tmp_path):
    for end in (1_000, 194_030, 50_000_000):
        z = _zoom(write_gtkw(tmp_path / "a.gtkw", tmp_path / "a.vcd", end_ns=end).read_text())
        shown = 2 ** -z / 200 * WAVE_PX          # time units across the wave pane
        assert end <= shown <= 1.1 * end, (end, shown)
    text = write_gtkw(tmp_path / "w.gtkw", tmp_path / "w.vcd", window_ns=(5_000, 5_400)).read_text()
    assert "[timestart] 5000" in text
    assert 400 <= 2 ** -_zoom(text) / 200 * WAVE_PX <= 440
    marker = int(re.findall(r"^\*-?[0-9.]+ (-?\d+)", text, re.M)[0])
    assert marker == 5200                         # the primary marker in the middle of the window


def test_zoom_counts_in_the_dumps_time_unit(tmp_path):
    """The RTL's dumps count picoseconds (its time precision): times given in ns are scaled."""
    text = write_gtkw(tmp_path / "r.gtkw", tmp_path / "r.fst", window_ns=(5_000, 5_400), unit_ns=0.001).read_text()
    assert "[timestart] 5000000" in text
    assert 400_000 <= 2 ** -_zoom(text) / 200 * WAVE_PX <= 440_000


def test_the_save_file_names_its_waveform_relative_to_itself(tmp_path):
    """A folder of waves and save files moved elsewhere still opens: the [dumpfile] path, resolved from
    the moved save file's directory, is the moved waveform (and a waveform in another directory is
    reached with '..')."""
    import shutil
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "rtl.fst").write_bytes(b"fst")
    write_gtkw(tmp_path / "a" / "rtl.gtkw", tmp_path / "a" / "rtl.fst", end_ns=10)
    shutil.move(tmp_path / "a", tmp_path / "moved")
    text = (tmp_path / "moved" / "rtl.gtkw").read_text()
    (dump,) = re.findall(r'^\[dumpfile\] "(.*)"$', text, re.M)
    assert (tmp_path / "moved" / dump).read_bytes() == b"fst"
    (tmp_path / "views").mkdir()
    other = write_gtkw(tmp_path / "views" / "x.gtkw", tmp_path / "moved" / "rtl.fst", end_ns=10)
    (dump,) = re.findall(r'^\[dumpfile\] "(.*)"$', other.read_text(), re.M)
    assert dump == "../moved/rtl.fst"
