"""``vtasim`` command line: the parser, built from the ``vtasim.commands`` entry-point group.

Every command module has an ``add_commands(subparsers)`` function, and ``pyproject.toml`` lists it
under ``[project.entry-points."vtasim.commands"]`` (the convention of pytest and Amaranth plugins)::

    [project.entry-points."vtasim.commands"]
    run = "sim.cli.run:add_commands"          # config, disasm, run
    diff = "sim.cli.diff:add_commands"        # diff, fuzz
    programs = "sim.cli.programs:add_commands"   # unit, workload, randprog, import-tvm
    waves = "sim.cli.waves:add_commands"      # waves

So ``sim`` never names a higher layer, and another package (the compiler, a third party) adds
commands by declaring an entry point in its own metadata.  An entry point whose module cannot be
imported (an optional extra not installed) becomes a command of its name that prints one line saying
what to install and exits 2; the other commands are unaffected.

Exit codes: 0 success, 1 ``--check`` mismatch, 2 any error (printed as one line on stderr; ``-v``
adds the multi-line report where there is one).  An argument error is one line as well, and
:func:`main` ends in a last-resort guard: an exception no command turned into a user error (a bug)
is one line naming it and asking for a report, with the traceback under ``-v``.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from hw.config import ConfigError
from hw.isa import IsaError
from sim.errors import SimError

__all__ = ["main", "build_parser", "GROUP", "USER_ERRORS"]

GROUP = "vtasim.commands"
USER_ERRORS = (SimError, ConfigError, IsaError, OSError)


class CommandUnavailable(SimError):
    """A command group's module could not be imported in this installation."""


def _stub(sub, ep, exc) -> str:
    """Register ``ep.name`` as a command that reports why its module is missing, in one line; that line."""
    extra = f"pip install 'vtasim[{','.join(ep.extras)}]'" if ep.extras else "install the package that provides it"
    message = f"vtasim {ep.name} is not available ({ep.value}: {exc}): {extra}"

    def unavailable(args) -> int:
        raise CommandUnavailable(message)

    p = sub.add_parser(ep.name, help=f"(not available: {extra})", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=unavailable)
    return message


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vtasim", description="VTA simulator: functional, cycle-accurate, RTL")
    parser.add_argument("-v", "--verbose", action="store_true", help="multi-line reports after an error line")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = sub.choices             # command name -> its sub-parser
    parser.unavailable = {}                   # command group -> the line saying why it could not be loaded
    eps = sorted(entry_points(group=GROUP), key=lambda ep: ep.name)
    if not eps:
        raise SimError(f"no commands registered in the {GROUP!r} entry-point group: install vtasim "
                       f"(pip install -e . in a checkout)")
    for ep in eps:
        try:
            add_commands = ep.load()
        except ImportError as exc:
            parser.unavailable[ep.name] = _stub(sub, ep, exc)
            continue
        add_commands(sub)
    return parser


def _error(exc: BaseException, verbose: bool) -> int:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    print(f"vtasim: error: {msg}", file=sys.stderr)
    report = getattr(exc, "report", "")
    if report and verbose:
        print(report, file=sys.stderr)
    return 2


def _unexpected(exc: BaseException, verbose: bool) -> int:
    """The last resort: an exception no command turned into a user error is still one line (exit 2);
    ``-v`` prints the traceback.  Each such hole is a bug to fix at its cause."""
    try:
        text = str(exc).splitlines()[0] if str(exc) else ""
    except Exception:                            # noqa: BLE001 - a str() that fails must not hide the error
        text = ""
    text = text if len(text) <= 200 else text[:200] + "..."
    name = type(exc).__name__
    if isinstance(exc, MemoryError):
        line = (f"out of memory (MemoryError{': ' + text if text else ''}): the run needs more memory than this "
                f"process may use; vtasim is meant to run in bounded memory, so please report it with the command")
    else:
        line = (f"internal error {name}{': ' + text if text else ''} - this is a bug in vtasim, please report it "
                f"with the command and its input (-v shows the traceback)")
    print(f"vtasim: error: {line}", file=sys.stderr)
    if verbose:
        import traceback
        traceback.print_exception(exc, file=sys.stderr)
    return 2


class _Parser(argparse.ArgumentParser):
    """An argument error is one line too (argparse prints the usage first; ``-h`` still shows it)."""

    def error(self, message):
        where = f"{self.prog}: " if self.prog != "vtasim" else ""
        print(f"vtasim: error: {where}{message} (see {self.prog} -h)", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    verbose = any(a in ("-v", "--verbose") for a in argv)
    try:
        return _main(argv)
    except USER_ERRORS as exc:
        return _error(exc, verbose)
    except Exception as exc:                     # noqa: BLE001 - the last-resort guard
        return _unexpected(exc, verbose)


def _main(argv) -> int:
    try:
        parser = build_parser()
    except SimError as exc:
        return _error(exc, False)
    command = next((a for a in argv if not a.startswith("-")), None)
    if parser.unavailable and command is not None and command not in parser.commands:
        # Perhaps a command of a group that could not be loaded (its names are unknown then): say which.
        why = "; ".join(parser.unavailable.values())
        return _error(CommandUnavailable(f"no command {command!r} here; not loaded: {why}"), False)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        return _error(exc, args.verbose)
