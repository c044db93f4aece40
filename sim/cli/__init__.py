"""``vtasim`` command line: the parser, built from the ``vtasim.commands`` entry-point group.

Every command module has an ``add_commands(subparsers)`` function, and ``pyproject.toml`` lists it
under ``[project.entry-points."vtasim.commands"]`` (the convention of pytest and Amaranth plugins)::

    [project.entry-points."vtasim.commands"]
    run = "vtasim.sim.cli.run:add_commands"          # config, disasm, run
    diff = "vtasim.sim.cli.diff:add_commands"        # diff, fuzz
    programs = "vtasim.sim.cli.programs:add_commands"   # unit, workload, randprog, import-tvm
    waves = "vtasim.sim.cli.waves:add_commands"      # waves

So ``sim`` never names a higher layer, and another package (the compiler, a third party) adds
commands by declaring an entry point in its own metadata.  An entry point whose module cannot be
imported (an optional extra not installed) becomes a command of its name that prints one line saying
what to install and exits 2; the other commands are unaffected.

Every parser is a :class:`_Parser`: its help lists each option's default (:class:`_Formatter`), and a
sub-command's ``help=`` line is its ``description`` unless it gives one.  ``vtasim --version`` reads
:func:`vtasim.sim.install.version`.

Exit codes: 0 success, 1 ``--check`` mismatch, 2 any error (printed as one line on stderr; ``-v``
adds the multi-line report where there is one).  An argument error is one line as well; a module of
an optional extra that is missing is one line naming the extra and its pip command
(:mod:`vtasim.sim.install`); a closed stdout (``vtasim config | head``) ends quietly with 141, as a process
killed by SIGPIPE; and :func:`main` ends in a last-resort guard: an exception no command turned into a
user error (a bug) is one line naming it and asking for a report, with the traceback under ``-v``.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import entry_points

from vtasim.hw.config import ConfigError
from vtasim.hw.isa import IsaError
from vtasim.sim.errors import SimError
from vtasim.sim.install import missing_extra, pip_command, version

__all__ = ["main", "build_parser", "GROUP", "USER_ERRORS", "EXIT_BROKEN_PIPE"]

GROUP = "vtasim.commands"
USER_ERRORS = (SimError, ConfigError, IsaError, OSError)
EXIT_BROKEN_PIPE = 128 + 13       # what a shell reports for a process ended by SIGPIPE


class CommandUnavailable(SimError):
    """A command group's module could not be imported in this installation."""


def _stub(sub, ep, exc) -> str:
    """Register ``ep.name`` as a command that reports why its module is missing, in one line; that line."""
    known = missing_extra(exc, f"vtasim {ep.name}")
    extra = pip_command(",".join(ep.extras)) if ep.extras else "install the package that provides it"
    message = str(known) if known else f"vtasim {ep.name} is not available ({ep.value}: {exc}): {extra}"

    def unavailable(args) -> int:
        raise CommandUnavailable(message)

    p = sub.add_parser(ep.name, help=f"(not available: {extra})", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=unavailable)
    return message


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vtasim", description="VTA simulator: functional, cycle-accurate, RTL")
    parser.add_argument("-v", "--verbose", action="store_true", help="multi-line reports after an error line")
    parser.add_argument("--version", action="version", version=f"vtasim {version()}")
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


class _Formatter(argparse.HelpFormatter):
    """Help that names every option's default (where it has one worth naming and the text does not
    already say it)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (action.option_strings and text and "default" not in text and "%(default)" not in text
                and not any(default is v for v in (None, False, argparse.SUPPRESS))    # 0 is a default to name
                and not isinstance(default, (list, tuple))):
            text += " (default: %(default)s)"
        return text


class _SubParsers(argparse._SubParsersAction):
    """``add_parser(name, help=...)``: the help line is also the sub-command's description."""

    def add_parser(self, name, **kwargs):
        if kwargs.get("help") and kwargs.get("description") is None:
            kwargs["description"] = kwargs["help"][:1].upper() + kwargs["help"][1:] + "."
        return super().add_parser(name, **kwargs)


class _Parser(argparse.ArgumentParser):
    """An argument error is one line too (argparse prints the usage first; ``-h`` still shows it).
    Every parser made from it (the sub-commands' too) uses :class:`_Formatter` and :class:`_SubParsers`."""

    def __init__(self, *args, formatter_class=_Formatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)
        self.register("action", "parsers", _SubParsers)

    def error(self, message):
        where = f"{self.prog}: " if self.prog != "vtasim" else ""
        print(f"vtasim: error: {where}{message} (see {self.prog} -h)", file=sys.stderr)
        raise SystemExit(2)


def _quiet_stdout() -> None:
    """stdout's reader went away: send what is still buffered to /dev/null, so the interpreter's final
    flush does not report the broken pipe either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):      # no real file behind sys.stdout (pytest's capture)
        pass


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    verbose = any(a in ("-v", "--verbose") for a in argv)
    try:
        status = _main(argv)
        sys.stdout.flush()                       # a closed pipe shows here, inside the guard
        return status
    except BrokenPipeError:                      # vtasim config | head
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
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
    except BrokenPipeError:
        raise
    except USER_ERRORS as exc:
        return _error(exc, args.verbose)
    except ImportError as exc:                   # a module of an optional extra (else a bug: main's guard)
        known = missing_extra(exc, f"vtasim {args.command}")
        if known is None:
            raise
        return _error(known, args.verbose)
