"""``vtasim coverage merge`` and ``vtasim coverage report``: RTL coverage directories (:mod:`vtasim.sim.rtl.coverage`).

::

    vtasim coverage merge A B [C ...] --out D     point-by-point sum of coverage dirs (or .dat files)
    vtasim coverage report D [--html OUT]          per-module table, uncovered lines, program bins

Both need no simulator.  Registered by :mod:`vtasim.sim.cli.diff` (next to ``fuzz --coverage``), so no entry
point of its own.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["add_commands", "cmd_coverage_merge", "cmd_coverage_report"]


def cmd_coverage_merge(args) -> int:
    from vtasim.sim.rtl.coverage import Coverage
    from vtasim.sim.rtl.coverage_report import coverage_note, save_report
    total = Coverage()
    for src in args.inputs:
        total.merge(Coverage.load(src), str(src))
    total.save(args.out)
    save_report(total, args.out)
    print(coverage_note(args.out))
    return 0


def cmd_coverage_report(args) -> int:
    from vtasim.sim.rtl.coverage import Coverage
    from vtasim.sim.rtl.coverage_report import text_report, write_html
    cov = Coverage.load(args.dir)
    print(text_report(cov, max_lines=args.max_lines), end="")
    if not args.no_html:
        out = args.html if args.html is not None else (Path(args.dir) if Path(args.dir).is_dir()
                                                       else Path(args.dir).parent) / "html"
        print(f"HTML report: {write_html(cov, out)}")
    return 0


def add_commands(sub) -> None:
    """Add ``coverage merge`` and ``coverage report``."""
    p = sub.add_parser("coverage", help="merge and report RTL code coverage (run/fuzz --coverage DIR)")
    cmds = p.add_subparsers(dest="coverage_cmd", required=True, help="merge or report coverage directories")
    m = cmds.add_parser("merge", help="add up coverage directories (or coverage.dat files) point by point")
    m.add_argument("inputs", type=Path, nargs="+", help="coverage directories or coverage.dat files")
    m.add_argument("--out", type=Path, required=True, help="the merged coverage directory (written)")
    m.set_defaults(func=cmd_coverage_merge)
    r = cmds.add_parser("report", help="per-module line/branch/expression/toggle coverage and uncovered lines")
    r.add_argument("dir", type=Path, help="a coverage directory (or a coverage.dat)")
    r.add_argument("--html", type=Path, default=None, help="where the HTML report goes (default DIR/html)")
    r.add_argument("--no-html", action="store_true", help="only the text report")
    r.add_argument("--max-lines", type=int, default=40, help="uncovered code points listed per module (default 40)")
    r.set_defaults(func=cmd_coverage_report)
