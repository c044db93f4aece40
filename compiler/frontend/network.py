"""A quantised network ready to run: import, the pass pipeline, partitioning, and execution."""

from __future__ import annotations

from compiler.frontend import fuse, passes
from compiler.frontend.execute import execute
from compiler.frontend.onnx_import import load_onnx
from compiler.frontend.partition import graph_pack, partition

__all__ = ["Network", "PIPELINE"]

PIPELINE = ("simplify_inference", "fold_constants", "eliminate_common_subexpr", "fuse_ops",
            "dead_code_elimination", "legalize", "partition", "graph_pack")


class Network:
    def __init__(self, graph, cfg, source: str = "model", **partition_opts):
        self.source, self.cfg = source, cfg
        g = passes.simplify_inference(graph)
        g = passes.fold_constants(g)
        g = passes.eliminate_common_subexpr(g)
        g = fuse.fuse_ops(g)
        g = passes.dead_code_elimination(g)
        g = passes.legalize(g)
        self.regions = partition(g, cfg, **partition_opts)
        self.graph = graph_pack(g, cfg)

    @classmethod
    def from_onnx(cls, path, cfg, **partition_opts) -> "Network":
        return cls(load_onnx(path), cfg, source=str(path), **partition_opts)

    @classmethod
    def from_torch(cls, module, input_shape, cfg, source: str = "model", **partition_opts) -> "Network":
        """A quantised ``torch.nn.Module`` (eager ``convert`` or ``convert_fx`` output) for inputs of
        ``input_shape`` (:func:`compiler.frontend.torch_import.from_torch`)."""
        from compiler.frontend.torch_import import from_torch
        return cls(from_torch(module, input_shape, source), cfg, source=source, **partition_opts)

    @property
    def input_name(self) -> str:
        return next(iter(self.graph.inputs))

    @property
    def notes(self) -> list:
        return self.graph.notes

    def run(self, x, engine: str = "cycle", **kw):
        """(first output, records) for one input: an array for a one-input model, or {input name: array}."""
        feeds = x if isinstance(x, dict) else {self.input_name: x}
        outs, records = execute(self.graph, self.regions, feeds, engine=engine, **kw)
        return outs[self.graph.outputs[0]], records
