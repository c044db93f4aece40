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

from compiler.frontend.graph import Graph
from compiler.frontend.region import VtaRegion, region_problem

__all__ = ["partition", "graph_pack", "node_macs", "PARTITION_MODES"]

PARTITION_MODES = ("pattern", "cost", "host")


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


def _estimate_cycles(region: VtaRegion, shape, dtype) -> int:
    from sim.engines import run_engine
    layer = region.compile(shape, dtype)
    image = layer.image(np.zeros(shape, np.int8))
    return int(run_engine("cycle", image).cycles)


def partition(g: Graph, cfg, mode: str = "pattern", skip_first_conv: bool = True, threshold: float = 1.0,
              vta_mhz: float = 100.0, host_gmacs: float = 1.0, requant: str = "auto", knobs=None,
              strict: bool = False) -> dict:
    """Set ``node.target`` and return {node name: VtaRegion} of the offloaded nodes.

    ``strict``: every ``qconv``/``qdense`` (but a skipped first conv) must go to VTA; one error lists
    each that cannot and why."""
    from compiler.frontend.errors import FrontendError
    refused = []
    from compiler.errors import CompileError
    if mode not in PARTITION_MODES:
        raise ValueError(f"partition mode {mode!r} is not one of {', '.join(PARTITION_MODES)}")
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
                from compiler.ops.quantized import check_qconv_packing    # whether the groups pack into blocks
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
            cycles = _estimate_cycles(region, x_shape, x_dtype)
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
    g.notes.append(f"partition ({mode}): {len(regions)} region(s) on VTA, "
                   f"{sum(1 for n in g.nodes if n.target == 'host')} op(s) on the host")
    return regions


def graph_pack(g: Graph, cfg) -> Graph:
    """Record the packed layout of every VTA region and count the layout conversions at the edges."""
    prod, conv_in, conv_out = g.producers(), 0, 0
    for n in g.nodes:
        if n.target != "vta":
            continue
        x = g.shapes.get(n.inputs[0])
        o = n.attrs["weight"].shape[0]
        if n.op == "qconv" and x is not None:
            nb, c, h, w = x
            pad_c = -c % cfg.block_in
            n.attrs["layout"] = dict(data=f"NCHW{cfg.batch}n{cfg.block_in}c", in_channels=c + pad_c,
                                     out_channels=o + (-o % cfg.block_out), batch=nb + (-nb % cfg.batch))
        elif n.op == "qdense" and x is not None:
            nb, k = x
            n.attrs["layout"] = dict(data=f"NC{cfg.batch}n{cfg.block_in}c", in_channels=k + (-k % cfg.block_in),
                                     out_channels=o + (-o % cfg.block_out), batch=nb + (-nb % cfg.batch))
        p = prod.get(n.inputs[0])
        if p is None or p.target != "vta":
            conv_in += 1
        if not all(c.target == "vta" for c in g.consumers().get(n.outputs[0], [])) or n.outputs[0] in g.outputs:
            conv_out += 1
    g.notes.append(f"graph_pack: {conv_in} pack(s) to NCHW{cfg.batch}n{cfg.block_in}c and {conv_out} unpack(s) "
                   f"at host/VTA edges")
    return g
