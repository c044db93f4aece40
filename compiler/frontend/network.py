"""A quantised network ready to run: import, the pass pipeline, partitioning, and execution."""

from __future__ import annotations

from vtasim.compiler.frontend import combine, dyn_static, fastmath, fuse, passes
from vtasim.compiler.frontend.execute import execute
from vtasim.compiler.frontend.onnx_import import load_onnx
from vtasim.compiler.frontend.partition import graph_pack, partition

__all__ = ["Network"]


class Network:
    """``combine_parallel``: CombineParallelConv2D/Dense (off, as Relay's opt_level 4; with
    ``mode="pattern"`` only: every combined layer and every branch then runs on VTA);
    ``fast_math``: FastMath (off); the rest goes to :func:`~vtasim.compiler.frontend.partition.partition`."""

    def __init__(self, graph, cfg, source: str = "model", combine_parallel: bool = False, fast_math: bool = False,
                 **partition_opts):
        self.source, self.cfg = source, cfg
        g = dyn_static.dynamic_to_static(graph)
        g = passes.simplify_inference(g)
        g = passes.fold_constants(g)
        g = passes.eliminate_common_subexpr(g)
        g = fuse.fuse_ops(g)
        if combine_parallel and partition_opts.get("mode", "pattern") == "pattern":
            requant = partition_opts.get("requant", "auto")
            g = combine.combine_parallel_conv2d(g, cfg, requant, partition_opts.get("skip_first_conv", True))
            g = combine.combine_parallel_dense(g, cfg, requant)
        g = passes.dead_code_elimination(g)
        g = passes.legalize(g)
        if fast_math:
            g = fastmath.fast_math(g)
        self.regions = partition(g, cfg, **partition_opts)
        self.graph = graph_pack(g, cfg, self.regions)

    @classmethod
    def from_parts(cls, graph, cfg, regions: dict, source: str = "model") -> "Network":
        """A network whose passes and partitioning are done (a compiled network loaded from disk)."""
        net = cls.__new__(cls)
        net.source, net.cfg, net.graph, net.regions = source, cfg, graph, regions
        return net

    @classmethod
    def from_onnx(cls, path, cfg, **opts) -> "Network":
        return cls(load_onnx(path), cfg, source=str(path), **opts)

    def compile_regions(self, feeds: dict) -> None:
        """Compile every VTA region for the shapes ``feeds`` (one input) gives: a run of the numpy
        reference, whose regions compile on their first input."""
        execute(self.graph, self.regions, feeds, engine="reference")

    @classmethod
    def from_torch(cls, module, input_shape, cfg, source: str = "model", **partition_opts) -> "Network":
        """A quantised ``torch.nn.Module`` (eager ``convert`` or ``convert_fx`` output) for inputs of
        ``input_shape`` (:func:`vtasim.compiler.frontend.torch_import.from_torch`)."""
        from vtasim.compiler.frontend.torch_import import from_torch
        return cls(from_torch(module, input_shape, source), cfg, source=source, **partition_opts)

    @property
    def input_name(self) -> str:
        return next(iter(self.graph.inputs))

    @property
    def region_count(self) -> int:
        """How many VTA regions run (a multi-op region is one, however many nodes it holds)."""
        return len({id(r) for r in self.regions.values()})

    @property
    def notes(self) -> list:
        return self.graph.notes

    def run(self, x, engine: str = "cycle", **kw):
        """(first output, records) for one input: an array for a one-input model, or {input name: array}."""
        feeds = x if isinstance(x, dict) else {self.input_name: x}
        outs, records = execute(self.graph, self.regions, feeds, engine=engine, **kw)
        return outs[self.graph.outputs[0]], records
