"""Judge a network run against onnxruntime on the CPU: error in output LSBs, relative error, top-k."""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["ORT_LEVELS", "OrtReference", "ort_session", "cpu_has_vnni", "fused_level_note", "output_lsb",
           "agreement", "reference_top1", "input_scale", "noisy_runs"]

# onnxruntime's graph optimisation level of a reference session.  "basic": every node with its ONNX
# semantics (a QDQ group is DequantizeLinear -> the float op -> QuantizeLinear); "all": onnxruntime's
# deployed graph, QDQ groups fused into its integer kernels (QLinearConv, QGemm, ...), whose u8 x s8
# products saturate on x86-64 CPUs without VNNI (docs/quantisation.md, "The onnxruntime reference on
# CPUs without VNNI").
ORT_LEVELS = {"basic": "ORT_ENABLE_BASIC", "all": "ORT_ENABLE_ALL"}


def ort_session(src, level: str = "basic", log_severity: int = 3):
    """An onnxruntime CPU session of ``src`` (a path, serialised bytes or a ModelProto) on one thread
    (reproducible) at graph optimisation ``level`` (a key of ``ORT_LEVELS``)."""
    import onnxruntime as ort
    if level not in ORT_LEVELS:
        raise FrontendError(f"onnxruntime level {level!r} is not one of {', '.join(ORT_LEVELS)}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = log_severity
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[level])
    if hasattr(src, "SerializeToString"):
        src = src.SerializeToString()
    return ort.InferenceSession(src if isinstance(src, bytes) else str(src), opts,
                                providers=["CPUExecutionProvider"])


def cpu_has_vnni(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU has an int8 dot-product instruction (x86 ``avx512_vnni``/``avx_vnni`` in
    ``cpuinfo``'s flags); None when that cannot be told (no such file, not x86)."""
    import platform
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return None
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), None)
    except OSError:
        return None
    return None if flags is None else bool({"avx512_vnni", "avx_vnni"} & set(flags))


def fused_level_note(level: str, vnni: bool | None = None) -> str | None:
    """One line for a fused-kernel reference on an x86 CPU without VNNI; None otherwise."""
    vnni = cpu_has_vnni() if vnni is None else vnni
    if level == "basic" or vnni is not False:
        return None
    return ("note: --ort-level all on a CPU without VNNI: onnxruntime's u8 x s8 kernels saturate int16 pair "
            "sums (VPMADDUBSW), so its outputs may differ from exact int8 arithmetic by several LSBs")


class OrtReference:
    """An onnxruntime CPU session of the same model file (``level``: a key of ``ORT_LEVELS``)."""

    def __init__(self, path, level: str = "basic"):
        from vtasim.sim.install import require
        require(["onnxruntime"], "the onnxruntime reference")
        try:                                # log level fatal only: its errors come back as exceptions
            self.session = ort_session(path, level, log_severity=4)
        except FrontendError:
            raise
        except Exception as e:              # noqa: BLE001 - onnxruntime's pybind errors share no base class
            raise FrontendError(f"{path}: onnxruntime cannot load the model: {_first_line(e)}") from None
        self.input_name = self.session.get_inputs()[0].name
        self.path = path

    def run(self, x) -> np.ndarray:
        """The first output for one input: an array (one-input model) or {input name: array}."""
        try:
            return self.session.run(None, x if isinstance(x, dict) else {self.input_name: x})[0]
        except Exception as e:              # noqa: BLE001 - as above
            raise FrontendError(f"{self.path}: onnxruntime cannot run the model: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
    return text if len(text) <= 200 else text[:200] + "..."


def output_lsb(graph) -> float | None:
    """The scale of the quantised tensor the first output is dequantised from (None: a float output)."""
    prod = graph.producers()
    n = prod.get(graph.outputs[0])
    if n is not None and n.op == "DequantizeLinear":
        s = graph.const(n.inputs[1])
        if s is not None and s.size == 1:
            return float(s.reshape(-1)[0])
    return None


def reference_top1(ours, ref) -> np.ndarray:
    """Per row of ``(N, classes)`` scores, the reference's top-1 class as judged against ours: quantised
    scores tie at the top, and which of the tied classes argmax names is arbitrary, so where some class
    is among our highest and among the reference's highest the two agree and our top-1 (the first of
    our highest) stands for it; else the reference's first highest.  An input agrees on top-1 when
    this is our top-1."""
    a, b = np.asarray(ours), np.asarray(ref)
    meet = ((a == a.max(1, keepdims=True)) & (b == b.max(1, keepdims=True))).any(1)
    return np.where(meet, a.argmax(1), b.argmax(1))


def agreement(ours: np.ndarray, ref: np.ndarray, lsb: float | None) -> dict:
    """Per-batch metrics of ``ours`` against ``ref`` (both (N, classes) or any shape): the largest
    difference, the relative error, the difference in output LSBs, and for (N, classes) the top-1
    agreement and the reference's top-1 among our top 5, the reference's top-1 class as
    :func:`reference_top1` names it."""
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if a.shape != b.shape:
        raise FrontendError(f"output shape {a.shape} differs from onnxruntime's {b.shape}")
    diff = np.abs(a - b)
    out = {"max_abs": float(diff.max()) if diff.size else 0.0,
           "rel_err": float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))}
    out["max_lsb"] = float(np.round(out["max_abs"] / lsb, 3)) if lsb else None
    if a.ndim == 2:
        ref_top = reference_top1(a, b)
        out["top1"] = float(np.mean(a.argmax(1) == ref_top))
        if a.shape[1] >= 5:               # the reference's top-1 class among our top 5
            top5 = np.argsort(-a, 1, kind="stable")[:, :5]
            out["top5"] = float(np.mean([r in t for r, t in zip(ref_top, top5)]))
    return out


def input_scale(graph) -> float:
    """The scale of the graph's first QuantizeLinear (the input's quantisation step)."""
    for n in graph.nodes:
        if n.op == "QuantizeLinear":
            return float(np.asarray(graph.consts[n.inputs[1]]).reshape(-1)[0])
    raise FrontendError("the graph quantises no input (no QuantizeLinear)")


def noisy_runs(ref, xs, scale: float, eps: float = 0.01, seed: int = 0) -> np.ndarray:
    """The reference's outputs (``ref.run``: an :class:`OrtReference` or a PyTorch reference) for each
    input plus N(0, (eps * scale)^2) noise, concatenated along the batch: the network's own noise
    floor.  Noise of 1 % of the input's quantisation step moves only the input codes next to a
    rounding boundary, as a 1-LSB rounding difference moves a few codes of a layer; how far that
    moves the reference's own output says how far any faithful int8 execution can be from it."""
    rng = np.random.default_rng(seed)
    return np.concatenate([ref.run(x + (eps * scale) * rng.standard_normal(np.shape(x)).astype(np.float32))
                           for x in xs])
