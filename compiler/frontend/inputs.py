"""The inputs of a ``vtasim onnx`` run: ``.npy`` files per model input, a bundled data set, or random.

``--input FILE.npy`` feeds a one-input model; ``--input NAME=FILE.npy`` (repeatable) names the model
input each file feeds.  Each file holds one input of the declared shape or a stack ``(N,) +
shape[1:]`` of batch-1 inputs; every named file must give the same N.  Files are read through the
bounded reader (a regular file, at most ``MAX_INPUT_BYTES``), never with pickle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["load_feeds", "parse_input_spec", "read_npy", "as_stack", "MAX_INPUT_BYTES", "DATASETS"]

MAX_INPUT_BYTES = 1 << 30
DATASETS = ("digits",)


def parse_input_spec(text: str) -> tuple[str | None, Path]:
    """``FILE`` or ``NAME=FILE`` -> (name or None, path)."""
    name, sep, path = text.partition("=")
    if sep and name and not Path(text).exists():
        return name, Path(path)
    return None, Path(text)


def read_npy(path: Path) -> np.ndarray:
    from vtasim.hw.files import regular_size
    regular_size(path, "--input array", MAX_INPUT_BYTES, error=FrontendError)
    try:
        x = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise FrontendError(f"--input {path}: not a readable .npy array ({e})") from None
    if not isinstance(x, np.ndarray):
        raise FrontendError(f"--input {path}: an .npz archive; give one .npy array")
    return x


def as_stack(x: np.ndarray, shape, what: str) -> np.ndarray:
    """(N,) + shape: one input of the declared shape, or a stack of batch-1 inputs."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x[None]
    if shape and shape[0] == 1 and tuple(x.shape[1:]) == shape[1:]:
        return x[:, None]
    raise FrontendError(f"{what}: shape {x.shape}; the model wants {shape} (or a stack (N,) + {shape[1:]})")


def load_feeds(graph, specs, dataset: str | None = None, seed: int = 0):
    """([{input name: array}, ...], labels or None, a description of the source)."""
    inputs = graph.inputs
    names = list(inputs)
    if specs:
        given: dict[str, Path] = {}
        for text in specs:
            name, path = parse_input_spec(str(text))
            if name is None:
                if len(names) != 1:
                    raise FrontendError(f"--input {text}: the model has {len(names)} inputs ({', '.join(names)}); "
                                        f"name each one: --input NAME=FILE.npy")
                name = names[0]
            if name not in inputs:
                raise FrontendError(f"--input {text}: the model has no input {name!r} (its inputs: "
                                    f"{', '.join(names)})")
            if name in given:
                raise FrontendError(f"--input {text}: input {name!r} is given twice")
            given[name] = path
        missing = [n for n in names if n not in given]
        if missing:
            raise FrontendError(f"--input: no file for the model input(s) {', '.join(missing)} "
                                f"(give --input NAME=FILE.npy for each)")
        stacks = {n: as_stack(read_npy(p), inputs[n][0], f"--input {n}={p}") for n, p in given.items()}
        counts = {len(v) for v in stacks.values()}
        if len(counts) != 1:
            raise FrontendError(f"--input: the files hold different numbers of inputs "
                                f"({', '.join(f'{n}: {len(v)}' for n, v in stacks.items())})")
        cast = {n: stacks[n].astype(inputs[n][1]) if inputs[n][1] is not None else stacks[n] for n in names}
        feeds = [{n: cast[n][k] for n in names} for k in range(counts.pop())]
        return feeds, None, ", ".join(str(p) for p in given.values())
    if dataset == "digits":
        if len(names) != 1:
            raise FrontendError(f"--dataset digits feeds one input; the model has {len(names)}")
        from vtasim.compiler.frontend.models.digits import load_split
        _, _, xt, yt = load_split()
        shape, dtype = inputs[names[0]]
        xs = as_stack(xt, shape, "--dataset digits (images of the test split)")
        return [{names[0]: x.astype(dtype)} for x in xs], yt, "digits test split"
    rng = np.random.default_rng(seed)
    feed = {}
    for n in names:
        shape, dtype = inputs[n]
        if dtype is None or np.dtype(dtype).kind == "f":
            feed[n] = rng.random(tuple(shape), np.float32)
        elif np.dtype(dtype).kind in "iu":
            info = np.iinfo(dtype)
            feed[n] = rng.integers(max(info.min, -128), min(info.max, 127) + 1, tuple(shape)).astype(dtype)
        else:
            raise FrontendError(f"model input {n!r} is of type {np.dtype(dtype).name}: give it with --input")
    return [feed], None, f"random input (seed {seed})"
