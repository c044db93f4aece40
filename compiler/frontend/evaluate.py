"""Run a compiled network over many inputs: in this process, or split across Dask workers
(:mod:`vtasim.sim.scale.cluster`, as ``vtasim sweep`` does), with the results appended to a JSON-lines file as
inputs finish, so an interrupted run resumes computing only the inputs the file lacks.

One record per input (:data:`RECORD_KEYS`): its index, label, our top-5 classes, a digest of our output
bytes, the VTA cycles of the input (cycle / RTL engines), and against onnxruntime (the model copy in the
compiled network): its top-1 class, the squared error and squared reference norm, the largest absolute
error.  :func:`aggregate` sums records in index order, so any split of the inputs gives the same figures.

The results file starts with a header line naming the network, engine, data set, preprocessing and input
count; a file whose header differs is refused (one line naming the field), a torn last line (the record
being written when the run died) is cut off, and each record is checked when read back.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from vtasim.compiler.frontend.compare import reference_top1
from vtasim.compiler.frontend.errors import FrontendError
from vtasim.hw.files import brief, iter_json_lines

__all__ = ["RECORD_KEYS", "evaluate_chunk", "aggregate", "run_inputs", "network_id", "MAX_RESULTS_BYTES",
           "read_results"]

RECORD_KEYS = ("index", "label", "top", "digest", "cycles", "ref_top1", "err_sq", "ref_sq", "max_abs")
MAX_RESULTS_BYTES = 1 << 30
MAX_LINE = 1 << 16
_HEADER = "vtasim_infer_results"
_NETS: dict = {}        # per process (a Dask worker keeps its network loaded between chunks)


def network_id(doc: dict) -> str:
    """A short hash of ``network.json`` (without the graph): the results file's network."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_reference(net_dir: Path, doc: dict):
    """onnxruntime on the compiled network's copy of the model (a regular file inside it whose SHA-256 is
    the one recorded), or None when the network has no copy."""
    from vtasim.compiler.frontend.compare import OrtReference
    from vtasim.compiler.frontend.netfile import MAX_MODEL_BYTES, child_file
    from vtasim.hw.files import read_regular
    name = doc["model"].get("file") if isinstance(doc["model"], dict) else None
    if name is None:
        return None
    path = child_file(Path(net_dir), name, f"compiled network {net_dir}: model")
    data = read_regular(path, "network model copy", MAX_MODEL_BYTES, error=FrontendError, follow_symlinks=False)
    if hashlib.sha256(data).hexdigest() != doc["model"].get("sha256"):
        raise FrontendError(f"{path}: its SHA-256 is not the model's recorded in network.json (rule: the copy the "
                            f"network was compiled from)")
    return OrtReference(path)


def loaded(net_dir, reference: bool):
    """``(Network, onnxruntime reference or None, doc)`` of ``net_dir``, loaded once per process."""
    from vtasim.compiler.frontend.netfile import load_network
    key = (str(Path(net_dir).resolve()), reference)
    if key not in _NETS:
        net, doc = load_network(net_dir)
        _NETS[key] = (net, model_reference(Path(net_dir), doc) if reference else None, doc)
    return _NETS[key]


def _record(net, ort, index: int, feed, label, engine: str) -> tuple[dict, list, np.ndarray]:
    y, layers = net.run(feed, engine=engine)
    y = np.asarray(y)
    out = y.astype(np.float64).reshape(-1)
    vta = [r.cycles for r in layers if r.target == "vta"]
    rec = {"index": int(index), "label": None if label is None else int(label),
           "top": [int(v) for v in np.argsort(-out, kind="stable")[:5]],
           "digest": hashlib.sha256(y.tobytes()).hexdigest()[:16],
           "cycles": int(sum(vta)) if vta and all(c is not None for c in vta) else None,
           "ref_top1": None, "err_sq": None, "ref_sq": None, "max_abs": None}
    if ort is not None:
        ref = np.asarray(ort.run(feed), np.float64).reshape(-1)
        if ref.shape != out.shape:
            raise FrontendError(f"output shape {y.shape} differs from onnxruntime's ({ref.size} values)")
        d = out - ref
        rec.update(ref_top1=int(reference_top1(out[None], ref[None])[0]), err_sq=float(d @ d), ref_sq=float(ref @ ref),
                   max_abs=float(np.abs(d).max(initial=0.0)))
    return rec, layers, y


def evaluate_chunk(net_dir: str, engine: str, reference: bool, indices, xs, labels) -> list[dict]:
    """The records of inputs ``indices`` (``xs[k]`` the k-th one's stack entry): the Dask task."""
    net, ort, _ = loaded(net_dir, reference)
    name = net.input_name
    return [_record(net, ort, i, {name: x}, None if labels is None else labels[k], engine)[0]
            for k, (i, x) in enumerate(zip(indices, xs))]


def aggregate(records: list) -> dict:
    """Figures over ``records`` summed in index order (the same for any split of the inputs)."""
    rs = sorted(records, key=lambda r: r["index"])
    n = len(rs)
    out = {"inputs": n}
    lab = [r for r in rs if r["label"] is not None]
    if lab:
        out["top1_accuracy"] = sum(r["top"][0] == r["label"] for r in lab) / len(lab)
        out["top5_accuracy"] = sum(r["label"] in r["top"] for r in lab) / len(lab)
        out["labelled"] = len(lab)
    ref = [r for r in rs if r["ref_top1"] is not None]
    if ref:
        out["top1_agreement"] = sum(r["top"][0] == r["ref_top1"] for r in ref) / len(ref)
        out["top5_agreement"] = sum(r["ref_top1"] in r["top"] for r in ref) / len(ref)
        err, norm = math.fsum(r["err_sq"] for r in ref), math.fsum(r["ref_sq"] for r in ref)
        out["rel_err"] = math.sqrt(err) / max(math.sqrt(norm), 1e-30)
        out["max_abs"] = max(r["max_abs"] for r in ref)
    cyc = [r["cycles"] for r in rs if r["cycles"] is not None]
    if cyc:
        out.update(cycles_total=sum(cyc), cycles_mean=sum(cyc) / len(cyc), cycles_min=min(cyc), cycles_max=max(cyc))
    return out


# ---- the results file -----------------------------------------------------------------------------
def _check_record(rec, path, line: int, n: int) -> dict:
    def bad(field, rule):
        return FrontendError(f"results file {path}: line {line}: {field} = {brief(rec.get(field))} ({rule})")

    if not isinstance(rec, dict) or set(rec) != set(RECORD_KEYS):
        raise FrontendError(f"results file {path}: line {line}: keys {brief(sorted(rec) if isinstance(rec, dict) else rec)} "
                            f"(rule: exactly {', '.join(RECORD_KEYS)})")
    for k in ("index", "label", "cycles", "ref_top1"):
        v = rec[k]
        if not (v is None and k != "index") and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise bad(k, "rule: a non-negative integer" + ("" if k == "index" else " or null"))
    if rec["index"] >= n:
        raise bad("index", f"rule: below the {n} inputs of the header")
    if not isinstance(rec["top"], list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in rec["top"]) \
            or not rec["top"]:
        raise bad("top", "rule: a list of class indices")
    if not isinstance(rec["digest"], str) or len(rec["digest"]) != 16:
        raise bad("digest", "rule: 16 hex digits")
    for k in ("err_sq", "ref_sq", "max_abs"):
        v = rec[k]
        if (v is None) != (rec["ref_top1"] is None) or (v is not None and (isinstance(v, bool) or
                                                                             not isinstance(v, (int, float)) or v < 0)):
            raise bad(k, "rule: a number >= 0 when ref_top1 is given, else null")
    return rec


def read_results(path, header: dict) -> dict:
    """``{index: record}`` of a results file whose header is ``header`` (an empty file: none)."""
    path = Path(path)
    if not os.path.lexists(path) or path.stat().st_size == 0:
        return {}
    done: dict = {}
    for line, doc in iter_json_lines(path, "results file", MAX_RESULTS_BYTES, max_line=MAX_LINE,
                                     limit="MAX_RESULTS_BYTES", error=FrontendError):
        if line == 1:
            if not isinstance(doc, dict) or doc.get(_HEADER) != 1:
                raise FrontendError(f"results file {path}: line 1 is not a vtasim infer header")
            for k, v in header.items():
                if doc.get(k) != v:
                    raise FrontendError(f"results file {path}: {k} = {brief(doc.get(k))}, this run has {brief(v)} "
                                        f"(rule: resume with the same network, engine, data and preprocessing; "
                                        f"or give another --results file)")
            continue
        rec = _check_record(doc, path, line, header["inputs"])
        done[rec["index"]] = rec
    return done


class _Results:
    """Append records (one JSON line each, flushed and fsynced per batch) after the header."""

    def __init__(self, path, header: dict):
        from vtasim.compiler.scale.results import cut_torn_tail
        from vtasim.hw.files import regular_size
        from vtasim.hw.outfiles import check_out, open_out
        self.path = check_out(path, "--results file")
        if os.path.lexists(self.path):
            regular_size(self.path, "--results file", MAX_RESULTS_BYTES, limit="MAX_RESULTS_BYTES",
                         error=FrontendError, follow_symlinks=False)
            cut_torn_tail(self.path)
        self.done = read_results(self.path, header)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._f = open_out(self.path, "a", "--results file")
        if new:
            self._f.write(json.dumps({_HEADER: 1, **header}) + "\n")
            self._sync()

    def _sync(self):
        self._f.flush()
        os.fsync(self._f.fileno())

    def append(self, records) -> None:
        for r in records:
            self._f.write(json.dumps(r, allow_nan=False) + "\n")
        self._sync()

    def close(self):
        self._f.close()


class _NoResults:
    done: dict = {}

    def append(self, records) -> None:
        pass

    def close(self):
        pass


def run_inputs(net_dir, xs: np.ndarray, labels, engine: str, header: dict, reference: bool = True,
               results=None, cluster_args=None, log=print, first_layers: list | None = None,
               outputs: dict | None = None) -> dict:
    """Records of every input (``{index: record}``): the ones in ``results`` read back, the others computed
    here or (``cluster_args``: the parsed cluster options) on Dask workers, appended as they finish.
    ``first_layers`` (a list) receives the per-layer records of input 0 and ``outputs`` (a dict) every
    output by index, of the inputs computed in this process."""
    from vtasim.sim.scale.cluster import Progress
    out = _Results(results, header) if results is not None else _NoResults()
    done = dict(out.done)
    todo = [i for i in range(len(xs)) if i not in done]
    log(f"inputs: {len(xs)}, {len(done)} already in {results}, {len(todo)} to run" if results is not None
        else f"inputs: {len(xs)} to run")
    bar = Progress(len(todo), "inputs")
    t0 = time.perf_counter()

    def finished(recs):
        out.append(recs)
        done.update((r["index"], r) for r in recs)
        bar.step(len(recs), f"{bar.done / max(time.perf_counter() - t0, 1e-9):.1f} inputs/s")

    try:
        if todo and cluster_args is None:
            net, ort, _ = loaded(net_dir, reference)
            for i in todo:
                rec, layers, y = _record(net, ort, i, {net.input_name: xs[i]},
                                         None if labels is None else labels[i], engine)
                if i == 0 and first_layers is not None:
                    first_layers.extend(layers)
                if outputs is not None:
                    outputs[i] = y
                finished([rec])
        elif todo:
            _on_dask(net_dir, xs, labels, engine, reference, todo, cluster_args, finished, log)
    finally:
        bar.close()
        out.close()
    el = time.perf_counter() - t0
    if todo:
        log(f"inputs: {len(todo)} computed in {el:.1f} s ({len(todo) / max(el, 1e-9):.1f} inputs/s)")
    return done


def _on_dask(net_dir, xs, labels, engine, reference, todo, args, finished, log) -> None:
    from vtasim.sim.scale import cluster
    distributed = cluster.import_distributed("vtasim infer")
    with cluster.client_from_args(args, log=log, what="infer") as client:
        workers = max(1, len(client.scheduler_info()["workers"]))
        size = max(1, math.ceil(len(todo) / (4 * workers)))
        chunks = [todo[k:k + size] for k in range(0, len(todo), size)]
        net_dir = str(Path(net_dir).resolve())
        futures = [client.submit(evaluate_chunk, net_dir, engine, reference, c, xs[c],
                                 None if labels is None else labels[c], key=f"vtasim-infer-{c[0]}-{len(c)}",
                                 pure=False, retries=2) for c in chunks]
        for fut in distributed.as_completed(futures):
            finished(fut.result())
            fut.release()
