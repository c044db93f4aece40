"""``vtasim waves``: waveforms and plots of a run, model and (optionally) RTL side by side.

    vtasim waves IMAGE_DIR --out waves/            # model.vcd, model.gtkw, timeline.png
    vtasim waves IMAGE_DIR --out waves/ --rtl      # + rtl.fst, rtl.gtkw, timeline_rtl.png
    vtasim waves IMAGE_DIR --out waves/ --waves vcd   # the RTL's as rtl.vcd (--waves implies --rtl)

``--waves [fst|vcd]`` is spelled as in ``run`` and ``diff`` (``--format`` still works, unlisted).
The RTL's file has the same signal names as the model's; GTKWave opens both (and the save files,
which name their waveform by a relative path: the folder can be moved), Surfer opens both waveform
files (not the .gtkw save files).

The model VCD is shifted to the RTL run's launch time when both are written, so a cursor placed in
one file points at the same accelerator cycle in the other.  :func:`write_rtl_view` writes the save
file beside an RTL waveform (``run --waves`` and ``diff --waves`` use it too).
"""

from __future__ import annotations

from pathlib import Path

from vtasim.hw.outfiles import check_out, out_dir
from vtasim.sim.cli.options import add_image_dir, add_sim, add_waves
from vtasim.sim.rtl.runner import DUMP_UNIT_NS, WAVE_FORMATS

__all__ = ["add_commands", "cmd_waves", "write_rtl_view"]


def write_rtl_view(image, rtl, wave_file) -> Path:
    """The GTKWave save file beside the RTL waveform ``wave_file`` of run ``rtl`` (same stem, ``.gtkw``),
    zoomed to the whole run; its path."""
    from vtasim.waveforms.gtkw import write_gtkw
    from vtasim.waveforms.vcd import signal_widths
    wave_file = Path(wave_file)
    end = rtl.launch_ns + rtl.cycles * rtl.clock_ns if rtl.cycles is not None and rtl.launch_ns is not None else None
    return write_gtkw(wave_file.with_suffix(".gtkw"), wave_file, widths=signal_widths(image.cfg), end_ns=end,
                      unit_ns=DUMP_UNIT_NS)


def _plot(result, path) -> str:
    """Draw the timeline PNG; its path, or a note saying why there is none (matplotlib is optional here)."""
    from vtasim.waveforms.plot import plot_timeline
    try:
        return str(plot_timeline(result, path))
    except ImportError as exc:
        from vtasim.sim.install import missing_extra
        known = missing_extra(exc, f"the plot {path.name}")
        return f"no {path.name} ({known or exc})"


def cmd_waves(args) -> int:
    from vtasim.sim.cycle import run_image as cycle_run
    from vtasim.sim.image import MemoryImage
    from vtasim.waveforms.gtkw import write_gtkw
    from vtasim.waveforms.vcd import signal_widths, write_model_vcd
    fmt = args.waves or args.format               # --format: the former spelling
    rtl_wanted = args.rtl or fmt is not None
    fmt = fmt or WAVE_FORMATS[0]
    if rtl_wanted:
        from vtasim.sim.rtl import require
        require(args.sim, "vtasim waves --rtl")
    image = MemoryImage.load(args.image_dir)
    out = out_dir(args.out, "--out directory")
    model = cycle_run(image)
    offset, clock = 0.0, 10
    if rtl_wanted:
        from vtasim.sim.rtl import run_image as rtl_run
        rtl_file = check_out(out / f"rtl.{fmt}", "waveform file").resolve()   # never through a link
        rtl = rtl_run(image, sim=args.sim, waves=fmt, waves_file=rtl_file)
        offset, clock = rtl.launch_ns, rtl.clock_ns    # the RTL's time base
        gtkw = write_rtl_view(image, rtl, rtl_file)
        plot = _plot(rtl, out / "timeline_rtl.png")
        print(f"rtl/{args.sim}: {rtl.cycles} cycles -> {out / rtl_file.name}, {out / gtkw.name}, {plot}")
    write_model_vcd(image, model, out / "model.vcd", offset_ns=offset, clock_ns=clock)
    write_gtkw(out / "model.gtkw", out / "model.vcd", widths=signal_widths(image.cfg),
               end_ns=offset + model.cycles * clock)
    plot = _plot(model, out / "timeline.png")
    print(f"cycle engine: {model.cycles} cycles -> {out / 'model.vcd'}, {out / 'model.gtkw'}, {plot}")
    return 0


def add_commands(sub) -> None:
    """Add ``waves`` to an argparse sub-parser collection."""
    p = sub.add_parser("waves", help="model VCD + GTKWave save file + timeline PNG (and the RTL's with --rtl)")
    add_image_dir(p)
    p.add_argument("--out", type=Path, default=Path("waves"), help="directory for the waveforms, save files and plots")
    p.add_argument("--rtl", action="store_true", help="also run the RTL with waveforms (rtl.<format>, rtl.gtkw)")
    add_sim(p, what="HDL simulator of --rtl")
    add_waves(p, "the RTL's waveform format (implies --rtl)", old_spelling="--format")
    p.set_defaults(func=cmd_waves)
