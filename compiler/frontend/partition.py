"""Partitioning (which composite ops run on VTA) and graph_pack (their packed layouts).

* ``mode="pattern"`` (BYOC's MergeComposite + AnnotateTarget): every ``qconv``/``qdense`` that VTA
  can run goes to VTA - int8 symmetric weights, a representable requantisation - except the first
  convolution when ``skip_first_conv`` (TVM's ``skip_conv_layers=[0]``: three input channels waste
  most of a 16-lane block).
* ``mode="cost"``: as above, but a region is offloaded only when the host's estimated time divided
  by VTA's is at least ``threshold``.  VTA's time is the cycle engine's count for the compiled
  region (its DMA included) at ``vta_mhz``; the host's is the region's MACs at ``host_gmacs``.
* :func:`graph_pack` records each VTA region's packed layout ``NCHW{n}n{c}c`` (channels padded
  to the block) and notes the layout conversions at the host/VTA boundaries.
"""

from __future__ import annotations

import numpy as np

from vtasim.compiler.frontend.graph import Graph
from vtasim.compiler.frontend.region import VtaRegion, region_problem

__all__ = ["partition", "graph_pack", "node_macs", "PARTITION_MODES", "REGION_MODES", "group_chains", "estimate_cycles"]

PARTITION_MODES = ("pattern", "cost", "host")
REGION_MODES = ("multi", "single")


def node_macs(g: Graph, node) -> int:
    a = node.attrs
    if node.op == "qconv":
        out = g.shapes.get(node.outputs[0])
        if out is None:
            return 0
        o, i, kh, kw = a["weight"].shape
        return int(np.prod(out)) * i * kh * kw
    if node.op == "qconv_transpose":
        x = g.shapes.get(node.inputs[0])
        if x is None:
            return 0
        c, mg, kh, kw = a["weight"].shape
        return int(np.prod(x)) * mg * kh * kw          # every input element meets M/group kernel taps
    if node.op == "qdense":
        x = g.shapes.get(node.inputs[0])
        n = x[0] if x else 1
        return int(n * a["weight"].size)
    return 0


def estimate_cycles(region: VtaRegion, shape, dtype) -> int:
    from vtasim.sim.engines import run_engine
    layer = region.compile(shape, dtype)
    image = layer.image(np.zeros(shape, np.int8))
    return int(run_engine("cycle", image).cycles)


def partition(g: Graph, cfg, mode: str = "pattern", skip_first_conv: bool = True, threshold: float = 1.0,
              vta_mhz: float = 100.0, host_gmacs: float = 1.0, requant: str = "auto", knobs=None,
              strict: bool = False, region_mode: str = "multi", fuse_adds: bool = True) -> dict:
    """Set ``node.target`` and return {node name: region} of the offloaded nodes.

    ``strict``: every ``qconv``/``qdense`` (but a skipped first conv) must go to VTA; one error lists
    each that cannot and why.  ``region_mode="multi"`` (the default) then groups the VTA convolutions and
    the residual adds between them into multi-op regions (:func:`group_chains`); ``"single"`` keeps one
    region per convolution and the adds on the host; ``fuse_adds`` fuses an add into the epilogue of
    the convolution whose output it reads (else every add is a kernel of its own)."""
    from vtasim.compiler.frontend.errors import FrontendError
    refused = []
    from vtasim.compiler.errors import CompileError
    if mode not in PARTITION_MODES:
        raise ValueError(f"partition mode {mode!r} is not one of {', '.join(PARTITION_MODES)}")
    if region_mode not in REGION_MODES:
        raise ValueError(f"region mode {region_mode!r} is not one of {', '.join(REGION_MODES)}")
    regions, first = {}, True
    for n in g.nodes:
        n.target = "host"
        if n.op not in ("qconv", "qdense", "qconv_transpose"):
            continue
        if mode == "host":
            continue
        if n.op == "qconv" and first:
            first = False
            if skip_first_conv:
                g.notes.append(f"partition: {n.where}: first convolution kept on the host (skip_first_conv)")
                continue
        why = region_problem(n)
        if why:
            refused.append(f"{n.where}: {why}")
            g.notes.append(f"partition: {n.where}: on the host: {why}")
            continue
        region = VtaRegion(n, cfg, knobs=knobs, path=requant)
        x_shape = g.shapes.get(n.inputs[0])
        x_dtype = n.attrs["x_dtype"]
        try:
            region.check(x_dtype)
            if n.op == "qconv" and (n.attrs["group"] != 1 or n.attrs["dilations"] != [1, 1]):
                from vtasim.compiler.ops.quantized import check_qconv_packing  # whether the groups pack into blocks
                check_qconv_packing(cfg, n.attrs["weight"], n.attrs["strides"], n.attrs["pads"], n.attrs["group"],
                                    n.attrs["dilations"], n.name, x_shape)
        except CompileError as e:
            if requant != "auto":        # the user asked for this path: its limit is the answer
                raise
            refused.append(f"{n.where}: {e}")
            g.notes.append(f"partition: {n.where}: on the host: {e}")
            continue
        if mode == "cost":
            if x_shape is None:
                g.notes.append(f"partition: {n.where}: on the host: input shape unknown")
                continue
            cycles = estimate_cycles(region, x_shape, x_dtype)
            vta_s = cycles / (vta_mhz * 1e6)
            host_s = node_macs(g, n) / (host_gmacs * 1e9)
            ratio = host_s / vta_s if vta_s else float("inf")
            if ratio < threshold:
                g.notes.append(f"partition: {n.where}: on the host: host/VTA time {ratio:.2f} < threshold "
                               f"{threshold} ({cycles:,} cycles at {vta_mhz} MHz vs {node_macs(g, n):,} MACs at "
                               f"{host_gmacs} GMAC/s)")
                continue
        n.target = "vta"
        regions[n.name] = region
    if strict and refused:
        raise FrontendError(f"--strict: {len(refused)} layer(s) cannot run on VTA: " + "; ".join(refused))
    if region_mode == "multi" and mode != "host":
        regions = group_chains(g, cfg, regions, knobs, requant, fuse_adds)
    g.notes.append(f"partition ({mode}): {len({id(r) for r in regions.values()})} region(s) on VTA, "
                   f"{sum(1 for n in g.nodes if n.target == 'host')} op(s) on the host")
    return regions


def group_chains(g: Graph, cfg, regions: dict, knobs=None, requant: str = "auto", fuse_adds: bool = True) -> dict:
    """Multi-op regions: the residual adds whose ALU plan equals the host's add join VTA, then every
    connected set of VTA convolutions and adds becomes one :class:`VtaChainRegion` (graph_pack's
    ResNet body: from the first block to the last add).  A set is kept whole only when each of its
    inputs from outside is computed before its first member (so it runs as one launch); otherwise
    its convolutions stay single-op regions and its adds on the host."""
    from vtasim.compiler.frontend.region_chain import VtaChainRegion, chain_member_problem, check_problem
    for n in g.nodes:
        if n.op == "qadd" and n.target == "host":
            shape = g.shapes.get(n.inputs[0])
            why = chain_member_problem(n) or (None if shape is not None and len(shape) == 4 else
                                             f"operand shape {shape} (the VTA add takes NCHW tensors)") or \
                check_problem(n)
            if why:
                g.notes.append(f"partition: {n.where}: add on the host: {why}")
            else:
                n.target = "vta"
    member = [n for n in g.nodes if n.target == "vta" and chain_member_problem(n) is None]
    ids = {id(n) for n in member}
    parent = {id(n): id(n) for n in member}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k
    prod = g.producers()
    for n in member:
        for v in n.inputs:
            p = prod.get(v)
            if p is not None and id(p) in ids:
                parent[root(id(p))] = root(id(n))
    groups: dict = {}
    for n in member:
        groups.setdefault(root(id(n)), []).append(n)
    order = {id(n): k for k, n in enumerate(g.nodes)}
    out = {k: v for k, v in regions.items()}
    for nodes in groups.values():
        made = {o for n in nodes for o in n.outputs}
        first = order[id(nodes[0])]
        late = [v for n in nodes for v in n.inputs if v not in made and v in prod and order[id(prod[v])] > first]
        if len(nodes) == 1 and nodes[0].op == "qconv":
            continue                               # a lone convolution: the single-op region it has
        if late:
            g.notes.append(f"partition: {nodes[0].where}: no multi-op region ({late[0]!r} is computed after "
                           f"its first member)")
            for n in nodes:
                if n.op == "qadd":
                    n.target = "host"
            continue
        chain = VtaChainRegion(nodes, g, cfg, knobs=knobs, path=requant, fuse=fuse_adds)
        for n in nodes:
            out[n.name] = chain
        g.notes.append(f"partition: multi-op region {chain.layer_name}: {len(nodes)} op(s) "
                       f"({', '.join(f'{k} {v}' for k, v in sorted(_counts(nodes).items()))}), inputs "
                       f"{chain.inputs}, outputs {chain.outputs}")
    return out


def _counts(nodes) -> dict:
    c: dict = {}
    for n in nodes:
        c[n.op] = c.get(n.op, 0) + 1
    return c


def graph_pack(g: Graph, cfg, regions: dict | None = None) -> Graph:
    """Record the packed layout of every VTA node and count the layout conversions at the region edges.

    A value passed between two members of one multi-op region stays packed in DRAM (no conversion);
    every other edge between the host and VTA, or between two regions, is one pack or one unpack.  For
    each multi-op region the note names where packing starts and stops, as graph_pack's
    ``start_name``/``stop_name`` do."""
    regions = regions or {}
    prod, cons = g.producers(), g.consumers()
    conv_in, conv_out = 0, 0

    def same(a, b) -> bool:
        ra, rb = regions.get(a.name), regions.get(b.name)
        return ra is not None and ra is rb and hasattr(ra, "nodes")
    for n in g.nodes:
        if n.target != "vta":
            continue
        x = g.shapes.get(n.inputs[0])
        if n.op == "qadd" and x is not None:
            nb, c, h, w = x
            n.attrs["layout"] = dict(data=f"NCHW{cfg.batch}n{cfg.block_out}c", in_channels=c + (-c % cfg.block_out),
                                     out_channels=c + (-c % cfg.block_out), batch=nb + (-nb % cfg.batch))
        elif n.op == "qconv" and x is not None:
            o = n.attrs["weight"].shape[0]
            nb, c, h, w = x
            pad_c = -c % cfg.block_in
            n.attrs["layout"] = dict(data=f"NCHW{cfg.batch}n{cfg.block_in}c", in_channels=c + pad_c,
                                     out_channels=o + (-o % cfg.block_out), batch=nb + (-nb % cfg.batch))
        elif n.op == "qdense" and x is not None:
            o = n.attrs["weight"].shape[0]
            nb, k = x
            n.attrs["layout"] = dict(data=f"NC{cfg.batch}n{cfg.block_in}c", in_channels=k + (-k % cfg.block_in),
                                     out_channels=o + (-o % cfg.block_out), batch=nb + (-nb % cfg.batch))
        for v in dict.fromkeys(n.inputs):
            p = prod.get(v)
            if p is None or not same(p, n):
                conv_in += 1
        users = cons.get(n.outputs[0], [])
        if any(not same(n, c) for c in users) or n.outputs[0] in g.outputs:
            conv_out += 1
    for r in {id(r): r for r in regions.values() if hasattr(r, "nodes")}.values():
        start = [f"{v} (from {prod[v].op} {prod[v].name})" if v in prod else v for v in r.inputs]
        stop = [f"{v} (to {', '.join(c.op + ' ' + c.name for c in cons.get(v, [])) or 'the graph output'})"
                for v in r.outputs]
        g.notes.append(f"graph_pack: region {r.layer_name}: packed from {', '.join(start)}; unpacked at "
                       f"{', '.join(stop)}; {len(r.nodes)} op(s) in between stay in DRAM")
    g.notes.append(f"graph_pack: {conv_in} pack(s) to NCHW{cfg.batch}n{cfg.block_in}c and {conv_out} unpack(s) "
                   f"at host/VTA edges")
    return g
