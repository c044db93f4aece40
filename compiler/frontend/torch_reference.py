"""PyTorch's own quantised CPU execution (fbgemm / qnnpack) as the reference of an imported model.

* :class:`TorchReference` runs the module on a float input and returns its float output, as
  :class:`~vtasim.compiler.frontend.compare.OrtReference` does for an ONNX file, so
  :func:`~vtasim.compiler.frontend.compare.agreement` judges both the same way.
* :func:`noisy_runs` is the network's own noise floor: PyTorch's outputs for the same inputs plus
  Gaussian noise of ``eps`` (1 %) of the input's quantisation step.  Such noise moves only the few input
  codes next to a rounding boundary, as a 1-LSB requantisation difference moves a few codes of a layer;
  how far that moves PyTorch's own output says how far any faithful int8 execution can be from it.
* :func:`layer_lsb` runs the FX graph once, keeps every quantised tensor PyTorch computed, feeds each
  imported op *PyTorch's* input integers and returns the op's worst difference from PyTorch's output
  integers: one step of each layer, without the compounding of a whole network.  PyTorch requantises
  in float32 with its float bias added before rounding (fbgemm), the front end exactly from an int32
  bias (TVM's UPWARD rounding), so a step differs by at most 1 LSB where the two roundings part.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.compare import input_scale, noisy_runs
from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["TorchReference", "layer_lsb", "input_scale", "noisy_runs", "ENGINES"]


def _torch():
    from vtasim.sim.install import require
    require(["torch"], "the PyTorch reference")
    import torch
    return torch


def engines() -> tuple:
    """The quantised CPU engines this PyTorch build has (``fbgemm``, ``qnnpack``, ``x86`` ...)."""
    return tuple(e for e in _torch().backends.quantized.supported_engines if e != "none")


ENGINES = ("fbgemm", "qnnpack", "x86", "onednn")


class TorchReference:
    """The quantised module on PyTorch's CPU kernels (``engine``: the ``torch.backends.quantized.engine``
    it was quantised for; None keeps the current one)."""

    def __init__(self, module, engine: str | None = None):
        torch = _torch()
        if engine is not None and engine not in engines():
            raise FrontendError(f"quantised engine {engine!r} is not one of this PyTorch's "
                                f"{', '.join(engines())}")
        self.torch, self.module, self.engine = torch, module, engine

    def run(self, x) -> np.ndarray:
        torch = self.torch
        if self.engine is not None:
            torch.backends.quantized.engine = self.engine
        with torch.no_grad():
            y = self.module(torch.from_numpy(np.ascontiguousarray(x, np.float32)))
        if isinstance(y, (tuple, list)):
            y = y[0]
        return (y.dequantize() if y.is_quantized else y).numpy()


def _torch_values(module, x) -> dict:
    """Every FX value of ``module`` on input ``x``, by node name."""
    torch = _torch()
    from torch.fx.interpreter import Interpreter
    from vtasim.compiler.frontend.torch_import import graph_module
    gm = graph_module(torch, module, "model")
    out: dict = {}

    class _Keep(Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            out[n.name] = r
            return r
    with torch.no_grad():
        _Keep(gm).run(torch.from_numpy(np.ascontiguousarray(x, np.float32)))
    return out


def layer_lsb(net, module, x, engine: str = "reference") -> dict:
    """{node name: worst |ours - PyTorch| in output LSBs} of every imported op whose output PyTorch holds as a
    quantised tensor, each op fed PyTorch's own input integers (VTA regions run on ``engine``)."""
    from vtasim.compiler.frontend.host_ops import run_host
    tv = _torch_values(module, x)

    def ints(name, floats=False):
        t = tv.get(name)
        if t is None or not hasattr(t, "is_quantized"):
            return None
        return t.int_repr().numpy() if t.is_quantized else (t.numpy() if floats else None)
    out, own = {}, {}          # own: values PyTorch has no tensor for (a concat's requantised inputs), ours
    g = net.graph
    for n in g.nodes:
        args = [g.consts[i] if i in g.consts else (ints(i, floats=True) if ints(i, floats=True) is not None
                                                   else own.get(i)) for i in n.inputs]
        if any(a is None for a in args):
            continue
        got_out = ints(n.outputs[0])
        if got_out is None and n.outputs[0] in tv:
            continue                                      # a float output (DequantizeLinear)
        if n.target == "vta":
            y = net.regions[n.name].run(args[0], engine=engine)[0]
        else:
            y = run_host(n, args)[0]
        if got_out is None:
            own[n.outputs[0]] = y
        else:
            out[n.name] = int(np.abs(y.astype(np.int64) - got_out.astype(np.int64)).max())
    return out


