"""Compile a network once per content: the compiled network (:mod:`.netfile`) of a model is kept in a
cache directory keyed by what the compilation depends on, so a second ``vtasim onnx`` of the same
model loads it instead of importing, partitioning and compiling again.

The key is the SHA-256 of: the model file's bytes, the VTA config (every key, timing included), the
compile options (partitioning mode, region mode ``multi``/``single``, threshold, requantisation path,
first-conv rule, strict, knobs; a missing region mode is the default ``multi``),
vtasim's version and the hash of the compiler's sources (every file under ``compiler/`` and ``hw/``,
and ``sim/image.py``: a changed compiler never loads a stale network).

The cache directory is ``--cache-dir DIR``, else ``$VTASIM_NETWORK_CACHE``, else
``$XDG_CACHE_HOME/vtasim/networks``, else ``~/.cache/vtasim/networks``; one sub-directory per key.  An
entry is written into a temporary sibling and renamed into place when complete, so a concurrent or
interrupted compilation never leaves a half-written entry; an entry that does not load (an older
format, a damaged file) is compiled again and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["cache_root", "source_hash", "vtasim_version", "compile_key", "compiled_network", "CACHE_ENV"]

CACHE_ENV = "VTASIM_NETWORK_CACHE"
_ROOT = Path(__file__).resolve().parents[2]
_SOURCES = (("compiler", None), ("hw", ".py"), ("sim/image.py", None))
_source_hash: list[str] = []


def cache_root(option=None) -> Path:
    """The cache directory (see the module docstring); not created here."""
    if option is not None:
        return Path(option)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vtasim" / "networks"


def source_hash() -> str:
    """SHA-256 of the compiler's sources (paths and bytes; ``__pycache__`` skipped), once per process."""
    if not _source_hash:
        h = hashlib.sha256()
        for rel, suffix in _SOURCES:
            top = _ROOT / rel
            files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()
                                                       and "__pycache__" not in p.parts
                                                       and (suffix is None or p.suffix == suffix))
            for p in files:
                h.update(str(p.relative_to(_ROOT)).encode() + b"\0")
                h.update(hashlib.sha256(p.read_bytes()).digest())
        _source_hash.append(h.hexdigest())
    return _source_hash[0]


def vtasim_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("vtasim")
    except PackageNotFoundError:
        return "unknown"


def compile_key(model_bytes: bytes, cfg, options: dict) -> tuple[str, dict]:
    """``(key, meta)``: the cache key and the ``vtasim``/``model``/``options`` entries of ``network.json``
    (the options always name their ``region_mode``)."""
    from vtasim.compiler.frontend.partition import REGION_MODES
    meta = {"vtasim": {"version": vtasim_version(), "source": source_hash()},
            "model": {"sha256": hashlib.sha256(model_bytes).hexdigest()},
            "options": {"region_mode": REGION_MODES[0], **options}}
    blob = json.dumps({**meta, "config": cfg.to_dict()}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:32], meta


def compile_network(model_path, model_bytes: bytes, cfg, options: dict, meta: dict, out=None):
    """Import, partition and compile ``model_path`` and (``out`` given) save it there; the Network."""
    from vtasim.compiler.frontend.inputs import load_feeds
    from vtasim.compiler.frontend.netfile import save_network
    from vtasim.compiler.frontend.network import Network
    net = Network.from_onnx(model_path, cfg, **options)
    feeds, _, _ = load_feeds(net.graph, None, None, seed=0)
    net.compile_regions(feeds[0])
    if out is not None:
        meta = {**meta, "model": {**meta["model"], "source": str(model_path), "file": "model.onnx"}}
        save_network(net, out, meta, model_bytes)
    return net


def compiled_network(model_path, cfg, options: dict, cache_dir=None, use_cache: bool = True, log=print):
    """``(Network, where)``: the compiled network of ``model_path``, from the cache when an entry of its key
    loads (``where`` = ``"cache hit DIR"``), else compiled (and stored unless ``use_cache`` is False)."""
    from vtasim.compiler.frontend.netfile import load_network
    from vtasim.compiler.frontend.onnx_import import MAX_MODEL_BYTES
    from vtasim.compiler.frontend.errors import ModelFileError
    from vtasim.hw.files import read_regular
    from vtasim.hw.outfiles import out_dir
    data = read_regular(model_path, "ONNX model", MAX_MODEL_BYTES, error=ModelFileError)
    key, meta = compile_key(data, cfg, options)
    if not use_cache:
        return compile_network(model_path, data, cfg, options, meta), "compiled (cache off)"
    root = out_dir(cache_root(cache_dir), "network cache directory")
    entry = root / key
    if (entry / "network.json").exists():
        try:
            net, _ = load_network(entry, cfg)
            return net, f"cache hit {entry}"
        except FrontendError as e:
            log(f"network cache: entry {entry} does not load ({e}); compiling again")
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        net = compile_network(model_path, data, cfg, options, meta, tmp)
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)     # a damaged entry (it did not load above)
        try:
            os.rename(tmp, entry)
        except OSError:                                  # another process stored the same key first
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return net, f"compiled, stored in {entry}"
