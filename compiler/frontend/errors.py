"""Errors of the network front end: one line each, naming the value and the rule (exit 2 in the CLI)."""

from __future__ import annotations

from vtasim.compiler.errors import CompileError

__all__ = ["FrontendError", "ModelFileError", "UnsupportedModel"]


class FrontendError(CompileError):
    """A model, input or option the front end cannot take."""


class ModelFileError(FrontendError):
    """The model file is not a readable, bounded ONNX model."""


class UnsupportedModel(FrontendError):
    """Ops or attributes the front end cannot run, every one listed with where it is."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(f"unsupported model: {len(problems)} problem(s): " + "; ".join(problems))
