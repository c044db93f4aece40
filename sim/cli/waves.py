"""``vtasim waves``: waveforms and plots of a run, model and (optionally) RTL side by side.

    vtasim waves IMAGE_DIR --out waves/            # model.vcd, model.gtkw, timeline.png
    vtasim waves IMAGE_DIR --out waves/ --rtl      # + rtl.fst (--format vcd: rtl.vcd), rtl.gtkw

The RTL's file has the same signal names as the model's; GTKWave opens both (and the save files),
Surfer opens both waveform files (not the .gtkw save files).

The model VCD is shifted to the RTL run's launch time when both are written, so a cursor placed in
one file points at the same accelerator cycle in the other.
"""

from __future__ import annotations

from pathlib import Path

from hw.outfiles import check_out, out_dir
from sim.rtl.runner import DUMP_UNIT_NS, WAVE_FORMATS

__all__ = ["add_commands", "cmd_waves"]


def _plot(result, path) -> None:
    from waveforms.plot import plot_timeline
    try:
        plot_timeline(result, path)
    except ImportError as exc:          # matplotlib is the optional 'plot' extra
        print(f"no {path.name} ({exc}; pip install 'vtasim[plot]')")


def cmd_waves(args) -> int:
    from sim.cycle import run_image as cycle_run
    from sim.image import MemoryImage
    from waveforms.gtkw import write_gtkw
    from waveforms.vcd import signal_widths, write_model_vcd
    image = MemoryImage.load(args.image_dir)
    out = out_dir(args.out, "--out directory")
    model = cycle_run(image)
    offset, clock = 0.0, 10
    if args.rtl:
        from sim.rtl import run_image as rtl_run
        rtl_file = check_out(out / f"rtl.{args.format}", "waveform file").resolve()   # never through a link
        rtl = rtl_run(image, sim=args.sim, waves=args.format, waves_file=rtl_file)
        offset, clock = rtl.launch_ns, rtl.clock_ns    # the RTL's time base
        write_gtkw(out / "rtl.gtkw", rtl_file, widths=signal_widths(image.cfg),
                   end_ns=offset + rtl.cycles * clock, unit_ns=DUMP_UNIT_NS)
        _plot(rtl, out / "timeline_rtl.png")
        print(f"rtl/{args.sim}: {rtl.cycles} cycles -> {out / rtl_file.name}, {out / 'rtl.gtkw'}")
    write_model_vcd(image, model, out / "model.vcd", offset_ns=offset, clock_ns=clock)
    write_gtkw(out / "model.gtkw", out / "model.vcd", widths=signal_widths(image.cfg),
               end_ns=offset + model.cycles * clock)
    _plot(model, out / "timeline.png")
    print(f"cycle engine: {model.cycles} cycles -> {out / 'model.vcd'}, {out / 'model.gtkw'}, "
          f"{out / 'timeline.png'}")
    return 0


def add_commands(sub) -> None:
    """Add ``waves`` to an argparse sub-parser collection."""
    p = sub.add_parser("waves", help="model VCD + GTKWave save file + timeline PNG (and the RTL's with --rtl)")
    p.add_argument("image_dir", type=Path)
    p.add_argument("--out", type=Path, default=Path("waves"))
    p.add_argument("--rtl", action="store_true", help="also run the RTL with waveforms")
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("--format", choices=WAVE_FORMATS, default=WAVE_FORMATS[0], help="the RTL's waveform format")
    p.set_defaults(func=cmd_waves)
