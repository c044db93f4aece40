"""The quantised network front end: ONNX int8 models (QDQ or QOperator) -> graph IR -> passes ->
partition (VTA regions + host ops) -> execution on an engine, judged against onnxruntime.

::

    from vtasim.compiler.frontend import Network
    net = Network.from_onnx("model.onnx", cfg)          # import, passes, partition
    y, records = net.run(x, engine="cycle")             # VTA regions on the engine, the rest in numpy
    y_ref, _ = net.run(x, engine="reference")           # the same quantised graph, all in numpy

Modules: :mod:`.onnx_import` (checked loading), :mod:`.graph` (IR), :mod:`.qop` and :mod:`.fuse`
(the two quantisation formats to composite ops), :mod:`.passes` (DCE, constant folding, batch-norm
folding, CSE, legalisation), :mod:`.partition` (pattern/cost partitioning, graph_pack),
:mod:`.region` (one VTA region), :mod:`.execute`, :mod:`.network`, :mod:`.compare` (onnxruntime),
:mod:`.report`, :mod:`.cli` (``vtasim onnx``), :mod:`.models` (the digits CNN and ResNet-18 shapes),
:mod:`.netfile` (a compiled network on disk), :mod:`.netcache` (compiled once per content),
:mod:`.dataset` and :mod:`.evaluate` (data sets, on Dask, resumable), :mod:`.infer_cli` (``vtasim infer``);
PyTorch: :mod:`.torch_import` (eager/FX-quantised modules -> the same graph, ``Network.from_torch``),
:mod:`.torch_reference` (PyTorch's quantised CPU run as the reference), :mod:`.torch_cli` (``vtasim torch``).
"""

from __future__ import annotations

__all__ = ["Network"]


def __getattr__(name):
    if name == "Network":
        from vtasim.compiler.frontend.network import Network
        return Network
    raise AttributeError(name)
