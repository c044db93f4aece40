"""Run a partitioned graph: VTA regions on an engine (or their numpy reference), host ops in numpy.

``execute(graph, regions, feeds, engine)`` returns the graph outputs and one :class:`LayerRecord`
per node.  ``engine="reference"`` runs every VTA region through its numpy execution of the same
integer arithmetic, so comparing it with an engine run checks each region bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.host_ops import run_host

__all__ = ["execute", "LayerRecord", "ENGINES"]

ENGINES = ("functional", "cycle", "rtl", "reference")


@dataclass
class LayerRecord:
    name: str
    op: str
    target: str                # "vta" | "host"
    out_shape: tuple
    macs: int = 0
    cycles: int | None = None
    gemm_ops: int | None = None
    dram_bytes: int | None = None
    wall_s: float = 0.0

    @property
    def gemm_util(self) -> float | None:
        if self.cycles and self.gemm_ops is not None:
            return self.gemm_ops / self.cycles
        return None


def _dram_bytes(counters: dict) -> int:
    return int(sum(v for k, v in counters.items() if k.endswith("_nbytes")))


def image_dir_name(k: int, region) -> str:
    """The ``--save-images`` sub-directory of the region run as node ``k``."""
    return f"{k:03d}_{region.layer_name}"


def region_starts(g, regions: dict) -> list:
    """(index, region) of the node that runs each region: a multi-op region runs at its first member."""
    seen, out = set(), []
    for k, n in enumerate(g.nodes):
        if n.target == "vta" and id(regions[n.name]) not in seen:
            seen.add(id(regions[n.name]))
            out.append((k, regions[n.name]))
    return out


def image_dirs(g, regions: dict) -> list[str]:
    """Every ``--save-images`` sub-directory :func:`execute` writes, in order."""
    return [image_dir_name(k, r) for k, r in region_starts(g, regions)]


def _run_chain(g, region, k, values, engine, save_images, records_by_node):
    """Run multi-op ``region`` once; its outputs into ``values``, each member's record into ``records_by_node``."""
    from vtasim.compiler.frontend.partition import node_macs
    t0 = time.perf_counter()
    feeds = {v: values[v] for v in region.inputs}
    outs, res, shares = region.run(feeds, engine=engine)
    if save_images is not None:
        from vtasim.hw.outfiles import sub_dir
        region.image(feeds).save(sub_dir(save_images, image_dir_name(k, region), "--save-images directory"))
    values.update(outs)
    macs = [node_macs(g, n) for n in region.nodes]
    gemm = int(res.counters.get("gemm_counter", 0)) if res is not None else None
    wall = (time.perf_counter() - t0) / len(region.nodes)
    for n, m, (cyc, dma) in zip(region.nodes, macs, shares):
        rec = LayerRecord(n.name, n.op, "vta", tuple(region.shapes.get(n.outputs[0]) or ()), m)
        if res is not None:       # GEMM operations apportioned by MACs (the counter is the launch's total)
            rec.cycles, rec.dram_bytes = cyc, dma
            rec.gemm_ops = gemm * m // sum(macs) if sum(macs) else 0
        rec.wall_s = wall
        records_by_node[n.name] = rec


def execute(g, regions: dict, feeds: dict, engine: str = "cycle", on_node=None, save_images=None,
            values_out: dict | None = None):
    """(outputs {name: array}, [LayerRecord]); ``on_node(k, total, node)`` reports progress;
    ``values_out`` (a dict) receives every value computed, by name."""
    from vtasim.compiler.frontend.partition import node_macs
    if engine not in ENGINES:
        raise FrontendError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    values = dict(g.consts)
    for name, (shape, dtype) in g.inputs.items():
        if name not in feeds:
            raise FrontendError(f"no value for the model input {name!r} (shape {shape})")
        x = np.asarray(feeds[name])
        if tuple(x.shape) != tuple(shape):
            raise FrontendError(f"input {name!r} has shape {x.shape}, the model declares {tuple(shape)}")
        values[name] = x.astype(dtype) if dtype is not None else x
    records, chained = [], {}
    for k, n in enumerate(g.nodes):
        if on_node is not None:
            on_node(k, len(g.nodes), n)
        region = regions.get(n.name) if n.target == "vta" else None
        if hasattr(region, "nodes"):                  # a member of a multi-op region
            if n.name not in chained:
                _run_chain(g, region, k, values, engine, save_images, chained)
            rec = chained[n.name]
            if n.outputs[0] in values:
                rec.out_shape = tuple(np.shape(values[n.outputs[0]]))
            records.append(rec)
            continue
        args = [values[i] if i else None for i in n.inputs]
        t0 = time.perf_counter()
        rec = LayerRecord(n.name, n.op, n.target, (), node_macs(g, n))
        if n.target == "vta":
            region = regions[n.name]
            y, res = region.run(args[0], engine=engine)
            outs = [y]
            if save_images is not None:
                from vtasim.hw.outfiles import sub_dir
                region.image(args[0]).save(sub_dir(save_images, image_dir_name(k, region),
                                                   "--save-images directory"))
            if res is not None:
                rec.cycles = res.cycles
                rec.gemm_ops = int(res.counters.get("gemm_counter", 0))
                rec.dram_bytes = _dram_bytes(res.counters)
        else:
            outs = run_host(n, args)
        rec.wall_s = time.perf_counter() - t0
        for name, v in zip(n.outputs, outs):
            values[name] = v
        rec.out_shape = tuple(np.shape(outs[0]))
        records.append(rec)
    if on_node is not None:
        on_node(len(g.nodes), len(g.nodes), None)
    if values_out is not None:
        values_out.update(values)
    return {o: values[o] for o in g.outputs}, records
