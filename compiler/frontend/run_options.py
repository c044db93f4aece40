"""Options the network commands (``vtasim onnx``, ``vtasim infer``, ``vtasim torch``) share, spelled and
explained once: ``--limit``, ``--seed``, ``--engine`` and ``--config``; ``--input`` or ``--dataset``."""

from __future__ import annotations

__all__ = ["add_input_source", "add_run_options", "check_limit"]

LIMIT_HELP = "only the first N inputs"
SEED_HELP = "seed of the random input when no --input/--dataset"


def add_run_options(p, limit_help: str = LIMIT_HELP, seed_help: str = SEED_HELP) -> None:
    from vtasim.compiler.frontend.execute import ENGINES
    from vtasim.sim.cli.options import add_config
    p.add_argument("--limit", type=int, default=None, help=limit_help)
    p.add_argument("--seed", type=int, default=0, help=seed_help)
    p.add_argument("--engine", choices=ENGINES, default="cycle",
                   help="where the VTA regions run (reference = their numpy execution)")
    add_config(p)


def add_input_source(p, input_help: str, **dataset) -> None:
    """``--input [NAME=]FILE.npy`` (repeatable) or ``--dataset`` (``dataset``: its add_argument keywords)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", action="append", default=None, metavar="[NAME=]FILE.npy", help=input_help)
    src.add_argument("--dataset", default=None, **dataset)


def check_limit(limit) -> None:
    """Refuse ``--limit`` below 1 (one line)."""
    from vtasim.compiler.frontend.errors import FrontendError
    if limit is not None and limit < 1:
        raise FrontendError(f"--limit {limit} must be at least 1 (rule: run at least one input)")
