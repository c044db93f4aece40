"""Reports of merged RTL coverage (:class:`vtasim.sim.rtl.coverage.Coverage`): per module, as text and as HTML.

Per module: line (Verilator's line/block points), branch (if/else and case arms), expression (the
terms of each boolean expression) and toggle (each bit 0->1 and 1->0) points covered out of all, then
the uncovered code points with their source line, and the signals with bits that never toggled.  The
HTML report (``index.html`` + one annotated page per source file) shows every source line with the
fewest hits of any point on it, uncovered lines in red.  The random-program bins
(:func:`vtasim.sim.programs.randprog.bins_report`) close both reports.

    >>> from vtasim.sim.rtl.coverage import Coverage
    >>> from vtasim.sim.rtl.coverage_report import text_report, write_html
    >>> print(text_report(Coverage.load("cov")))       # doctest: +SKIP
    >>> write_html(Coverage.load("cov"), "cov/html")    # doctest: +SKIP
"""

from __future__ import annotations

import html
from pathlib import Path

from vtasim.sim.rtl.coverage import KINDS, Coverage, point

__all__ = ["REPORT_KINDS", "summary", "module_points", "label", "table_lines", "uncovered_lines", "text_report",
           "write_html", "save_report", "headline", "coverage_note", "percent"]

REPORT_KINDS = ("line", "branch", "expr", "toggle")        # the columns; other kinds (user, fsm) are listed if present
CODE_KINDS = ("line", "branch", "expr", "user")           # points that belong to a source line
MAX_SOURCE_BYTES = 4 << 20


def module_points(cov: Coverage) -> dict:
    """``{module: [(Point, count), ...]}``, modules and points in a stable order."""
    mods = {}
    for key in sorted(cov.points):
        p = point(key)
        mods.setdefault(p.module, []).append((p, cov.points[key]))
    for pts in mods.values():
        pts.sort(key=lambda pc: (pc[0].file, pc[0].line, pc[0].column, KINDS.index(pc[0].kind)
                                 if pc[0].kind in KINDS else 99, pc[0].comment))
    return dict(sorted(mods.items()))


def summary(cov: Coverage) -> dict:
    """``{module: {kind: (covered, total)}}`` plus ``"total"``."""
    out, total = {}, {}
    for mod, pts in module_points(cov).items():
        row = {}
        for p, c in pts:
            hit, n = row.get(p.kind, (0, 0))
            row[p.kind] = (hit + (c >= p.thresh), n + 1)
            hit, n = total.get(p.kind, (0, 0))
            total[p.kind] = (hit + (c >= p.thresh), n + 1)
        out[mod] = row
    out["total"] = total
    return out


def percent(hit_n) -> str:
    hit, n = hit_n
    return f"{100.0 * hit / n:5.1f}%" if n else "    - "


def _kinds(summ: dict) -> list:
    present = {k for row in summ.values() for k in row}
    return list(REPORT_KINDS) + [k for k in KINDS if k in present and k not in REPORT_KINDS] + \
        sorted(present - set(KINDS))


def _signal(comment: str) -> str:
    """``"mem_addr[3]:0->1"`` -> ``"mem_addr"``."""
    name = comment.rsplit(":", 1)[0]
    return name.split("[", 1)[0] if "[" in name else name


class _Sources:
    """Source lines of the files the points name (read once, bounded; missing files give no text)."""

    def __init__(self):
        self.cache = {}

    def lines(self, path: str) -> list:
        if path not in self.cache:
            try:
                p = Path(path)
                ok = p.is_file() and p.stat().st_size <= MAX_SOURCE_BYTES
                self.cache[path] = p.read_text(errors="replace").splitlines() if ok else []
            except OSError:
                self.cache[path] = []
        return self.cache[path]

    def line(self, path: str, no: int) -> str:
        lines = self.lines(path)
        return lines[no - 1].strip() if 0 < no <= len(lines) else ""


def _toggle_gaps(pts) -> list:
    """``[(signal, untoggled transitions, transitions)]`` of the signals with a transition never seen
    (named ``signal in instance`` when the points span several instances)."""
    sig = {}
    for p, c in pts:
        if p.kind == "toggle":
            miss, n = sig.get((p.hier, _signal(p.comment)), (0, 0))
            sig[(p.hier, _signal(p.comment))] = (miss + (c < p.thresh), n + 1)
    several = len({h for h, _ in sig}) > 1
    return [(f"{s} in {_instance(h)}" if several else s, m, n) for (h, s), (m, n) in sig.items() if m]


def label(module: str, pts) -> tuple:
    """``(source module, instance)`` of a module row: ``vta_loader__E20_EB20`` at ``tb_top.u_vta.u_compute.u_uop``
    is ``("vta_loader", "u_compute.u_uop")`` (Verilator names each parameterised copy of a module)."""
    return module.split("__", 1)[0], _instance(pts[0][0].hier if pts else "")


def _instance(hier: str) -> str:
    for top in ("tb_top.u_vta.", "tb_top."):
        if hier.startswith(top):
            return hier[len(top):] or "-"
    return hier or "-"


def table_lines(cov: Coverage) -> list:
    """The headline and the per-module table of :func:`text_report`."""
    summ = summary(cov)
    kinds = _kinds(summ)
    mods = module_points(cov)
    out = [f"RTL coverage: {len(cov.points)} points from {cov.runs} simulator runs of {cov.programs} programs "
           f"({len(cov.covered())} covered)",
           f"{'module':<14} {'instance':<30}" + "".join(f"{k:>20}" for k in kinds)]
    for mod, row in summ.items():
        cells = []
        for k in kinds:
            hit, n = row.get(k, (0, 0))
            cells.append(f"{f'{hit}/{n}':>13} {percent((hit, n))}" if n else f"{'-':>20}")
        base, inst = label(mod, mods[mod]) if mod in mods else ("total", "")
        out.append(f"{base:<14} {inst[:30]:<30}" + "".join(cells))
    return out


def uncovered_lines(cov: Coverage, max_lines: int = 40, max_signals: int = 12) -> list:
    """Per module: its uncovered code points (at most ``max_lines``) with their source line, and the
    signals with untoggled bits (at most ``max_signals``)."""
    out = []
    src = _Sources()
    for mod, pts in module_points(cov).items():
        miss = [(p, c) for p, c in pts if p.kind in CODE_KINDS and c < p.thresh]
        gaps = _toggle_gaps(pts)
        if not miss and not gaps:
            continue
        base, inst = label(mod, pts)
        out.append(f"{base} at {inst}: {len(miss)} uncovered code points, {len(gaps)} signals with untoggled bits")
        for p, _ in miss[:max_lines]:
            where = f"{Path(p.file).name}:{p.line}"
            out.append(f"  {where:<20} {p.kind:<6} {p.comment[:40]:<40} | {src.line(p.file, p.line)[:70]}")
        if len(miss) > max_lines:
            out.append(f"  ... {len(miss) - max_lines} more (the HTML report lists all)")
        if gaps:
            shown = ", ".join(f"{s} ({m}/{n})" for s, m, n in gaps[:max_signals])
            more = f", ... {len(gaps) - max_signals} more" if len(gaps) > max_signals else ""
            out.append(f"  untoggled (signal: transitions never seen/all): {shown}{more}")
    return out


def text_report(cov: Coverage, max_lines: int = 40, max_signals: int = 12) -> str:
    """:func:`table_lines`, :func:`uncovered_lines`, then the random-program bins."""
    from vtasim.sim.programs.randprog import bins_report
    return "\n".join(table_lines(cov) + uncovered_lines(cov, max_lines, max_signals)
                     + ["random-program " + "\n".join(bins_report(cov.bins, cov.programs))]) + "\n"


_CSS = """body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
pre{margin:0}.src td{border:none;padding:0 6px;text-align:left;font-family:monospace;white-space:pre}
.miss{background:#fcc}.hit{background:#dfd}.cnt{color:#555;text-align:right!important}
.bar{display:inline-block;height:.7em;background:#6a6}.low{background:#c66}"""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def _cell(hit_n) -> str:
    hit, n = hit_n
    if not n:
        return "<td>-</td>"
    pc = 100.0 * hit / n
    return (f"<td>{hit}/{n} {pc:.1f}% <span class='bar{' low' if pc < 80 else ''}' "
            f"style='width:{pc * 0.6:.0f}px'></span></td>")


def _file_page(path: str, pts, src: _Sources) -> str:
    """One source file, each line with the fewest hits of the code points on it; toggle gaps below."""
    on_line = {}
    for p, c in pts:
        if p.kind in CODE_KINDS:
            for ln in (p.lines if p.kind == "line" else (p.line,)):
                on_line.setdefault(ln, []).append((p, c))
    rows = []
    for no, text in enumerate(src.lines(path), 1):
        here = on_line.get(no, [])
        if here:
            low = min(c for _, c in here)
            missed = [f"{p.kind} {p.comment} in {_instance(p.hier)}" for p, c in here if c < p.thresh]
            cls = "miss" if missed else "hit"
            tip = html.escape("; ".join(missed) if missed else f"{len(here)} points")
            rows.append(f"<tr class='{cls}' title='{tip}'><td class='cnt'>{low}</td><td class='cnt'>{no}</td>"
                        f"<td>{html.escape(text)}</td></tr>")
        else:
            rows.append(f"<tr><td></td><td class='cnt'>{no}</td><td>{html.escape(text)}</td></tr>")
    miss = [(p, c) for p, c in pts if p.kind in CODE_KINDS and c < p.thresh]
    body = [f"<p><a href='index.html'>index</a> &middot; {html.escape(path)}: {len(miss)} uncovered code points "
            "(red lines; hover for the points)</p>"]
    if miss:
        body.append("<table><tr><th>line</th><th>kind</th><th>point</th><th>instance</th></tr>" + "".join(
            f"<tr><td><a href='#L{p.line}'>{p.line}</a></td><td>{p.kind}</td><td>{html.escape(p.comment)}</td>"
            f"<td>{html.escape(_instance(p.hier))}</td></tr>" for p, _ in miss) + "</table>")
    gaps = _toggle_gaps(pts)
    if gaps:
        body.append("<h2>Signals with untoggled bits</h2><table><tr><th>signal</th><th>never seen</th>"
                    "<th>transitions</th></tr>" + "".join(f"<tr><td>{html.escape(s)}</td><td>{m}</td><td>{n}</td></tr>"
                                                          for s, m, n in gaps) + "</table>")
    body.append("<h2>Source (hits: the fewest of any point on the line)</h2><table class='src'>"
                + "".join(r.replace("<tr", f"<tr id='L{k + 1}'", 1) for k, r in enumerate(rows)) + "</table>")
    return _page(Path(path).name, "\n".join(body))


def write_html(cov: Coverage, out_dir) -> Path:
    """``out_dir/index.html`` (per-module table, program bins) and one annotated page per source file."""
    from vtasim.sim.programs.randprog import bins_report
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summ = summary(cov)
    kinds = _kinds(summ)
    by_file = {}
    for pts in module_points(cov).values():
        for p, c in pts:
            by_file.setdefault(p.file, []).append((p, c))
    src = _Sources()
    names = {}
    for path, pts in sorted(by_file.items()):
        name = Path(path).name + ".html"
        while name in names.values():
            name = "_" + name
        names[path] = name
        (out / name).write_text(_file_page(path, pts, src))
    mod_file = {mod: names[pts[0][0].file] for mod, pts in module_points(cov).items()}
    rows = []
    mods = module_points(cov)
    for mod, row in summ.items():
        if mod in mods:
            base, inst = label(mod, mods[mod])
            name = f"<td><a href='{mod_file[mod]}'>{html.escape(base)}</a></td><td>{html.escape(inst)}</td>"
        else:
            name = "<td><b>total</b></td><td></td>"
        rows.append(f"<tr>{name}" + "".join(_cell(row.get(k, (0, 0))) for k in kinds) + "</tr>")
    body = (f"<p>{len(cov.points)} coverage points from {cov.runs} simulator runs of {cov.programs} programs.</p>"
            "<table><tr><th>module</th><th>instance</th>" + "".join(f"<th>{k}</th>" for k in kinds) + "</tr>" + "".join(rows)
            + "</table><h2>Random-program bins</h2><pre>"
            + html.escape("\n".join(bins_report(cov.bins, cov.programs))) + "</pre>")
    index = out / "index.html"
    index.write_text(_page("RTL coverage", body))
    return index


def save_report(cov: Coverage, directory) -> tuple:
    """``directory/report.txt`` and ``directory/html/index.html`` of ``cov``; both paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    txt = d / "report.txt"
    txt.write_text(text_report(cov, max_lines=10_000, max_signals=10_000))
    return txt, write_html(cov, d / "html")


def headline(cov: Coverage) -> str:
    """``line 91.3%, branch 91.6%, expr 88.8%, toggle 48.5%`` of the whole design."""
    total = summary(cov)["total"]
    return ", ".join(f"{k} {percent(total[k]).strip()}" for k in REPORT_KINDS if k in total)


def coverage_note(directory) -> str:
    """One line on what the coverage directory now holds and where its reports are."""
    d = Path(directory)
    cov = Coverage.load(d)
    return (f"RTL coverage in {d} ({cov.runs} simulator runs, {cov.programs} programs): {headline(cov)}; "
            f"report {d / 'report.txt'}, {d / 'html' / 'index.html'}")
