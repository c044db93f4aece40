"""A multi-op VTA region: convolutions and residual adds in one memory image, activations kept in DRAM.

As TVM's graph_pack does for a ResNet body, every member runs on VTA and its activations stay in DRAM
in the packed layout ``NCHW{b}n{c}c``; only the region's inputs are packed (and padded) by the host and
only its outputs are read back.  Each member is compiled as today (``build_qconv``, ``build_qadd``), then
their lowered programs are emitted one after the other on one command queue
(:mod:`vtasim.compiler.runtime.chain`): one launch, one image, every DMA counted.

Padding stays on VTA: a tensor a convolution pads with its zero point (``za != 0``, so the DMA's zero
padding cannot) is kept in DRAM already padded - the border holds the zero point from the start, the
producer stores into the interior, and a consumer that reads it unpadded (the add, a 1x1 shortcut)
loads the interior.  The image's expected outputs are the members' tensor expressions evaluated in
numpy one after the other; :meth:`VtaChainRegion.reference` is the members' numpy execution of the
same integers (``QLayer.reference``, ``QAddPlan.apply``), the oracle of ``engine="reference"``.

The region interface (shared with :class:`vtasim.compiler.frontend.region.VtaRegion`): ``name``,
``layer_name``, ``inputs`` / ``outputs`` (value names at the host edge), ``images(feeds)`` and
``run(feeds, engine)``, ``edge_bytes``, ``export()`` / ``restore()`` (a compiled network's region,
:mod:`vtasim.compiler.frontend.netfile`); a chain also gives ``nodes`` and ``edge_info`` (the buffer, address,
packed shape, padding and fill of each edge value: enough to run its image without the compiler).

A saved chain (kind :data:`CHAIN_KIND`) is its one image, its edge (``edge_info`` per edge value) and one
record per kernel: the nodes it computes, the values it reads and writes, its instructions' index range
(``[start, end)``, what the per-layer shares of the retire trace are cut by) and, for a convolution, its
arithmetic (:func:`vtasim.compiler.ops.qlayer_state.arith_state`: the numpy reference of ``engine="reference"``).
A restored chain runs its image with only the input segments swapped; its images carry no expected output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.compiler.frontend.composite import act_limits
from vtasim.compiler.frontend.errors import FrontendError

__all__ = ["VtaChainRegion", "chain_member_problem", "CHAIN_OPS", "CHAIN_KIND", "EDGE_KEYS"]

CHAIN_OPS = ("qconv", "qadd")
CHAIN_KIND = "chain"            # a multi-op region (one image) in a compiled network
EDGE_KEYS = ("value", "role", "buffer", "addr", "nbytes", "shape", "packed", "pads", "fill")
_KERNEL_KEYS = ("nodes", "ins", "out", "insns", "conv")


def chain_member_problem(node) -> str | None:
    """Why ``node`` cannot be a member of a multi-op region (None when it can)."""
    a = node.attrs
    if node.op not in CHAIN_OPS:
        return f"{node.op} is not a multi-op region member"
    if np.dtype(a["y_dtype"]) != np.int8:
        return "uint8 output (multi-op regions keep int8 activations)"
    if node.op == "qconv":
        if np.dtype(a["x_dtype"]) != np.int8:
            return "uint8 input (multi-op regions keep int8 activations)"
        if a.get("group", 1) != 1 or list(a.get("dilations", [1, 1])) != [1, 1]:
            return "grouped or dilated convolutions have their own layout"
    return None


@dataclass
class _Layout:
    """Where a value lives in DRAM: packed ``(nb, cb, hp, wp, b, c)``, the logical image at ``(dy, dx)``."""

    n: int
    c: int
    h: int
    w: int
    nb: int
    cb: int
    pads: tuple               # (top, left, bottom, right) of the physical buffer
    fill: int

    @property
    def hp(self) -> int:
        return self.h + self.pads[0] + self.pads[2]

    @property
    def wp(self) -> int:
        return self.w + self.pads[1] + self.pads[3]

    def physical_shape(self, cfg) -> tuple:
        return (self.nb, self.cb, self.hp, self.wp, cfg.batch, cfg.block_in)

    def window(self, buf, pads=(0, 0, 0, 0)):
        from vtasim.compiler.runtime.chain import Window
        t, l, b, r = pads
        return Window(buf, self.nb * self.cb, self.h + t + b, self.w + l + r, self.hp, self.wp,
                      self.pads[0] - t, self.pads[1] - l)

    def view(self, phys: np.ndarray, pads=(0, 0, 0, 0)) -> np.ndarray:
        t, l, b, r = pads
        y0, x0 = self.pads[0] - t, self.pads[1] - l
        return np.ascontiguousarray(phys[:, :, y0:y0 + self.h + t + b, x0:x0 + self.w + l + r])

    def place(self, cfg, packed: np.ndarray) -> np.ndarray:
        phys = np.full(self.physical_shape(cfg), self.fill, np.int8)
        phys[:, :, self.pads[0]:self.pads[0] + self.h, self.pads[1]:self.pads[1] + self.w] = packed
        return phys


class _Add:
    """A ``qadd`` member compiled by :func:`vtasim.compiler.ops.residual.build_qadd`."""

    def __init__(self, node, cfg, shape, name):
        self.nodes, self.ins, self.out = [node], list(node.inputs), node.outputs[0]
        from vtasim.compiler.ops.residual import build_qadd
        self.plan = _add_plan(node)
        self.layer = build_qadd(cfg, shape, self.plan, name=name)
        self.data_names = ("A", "B")
        self.host_pad = None

    def pads(self, k: int):
        return (0, 0, 0, 0)

    @classmethod
    def restored(cls, node):
        """The add of a saved chain: its ALU plan (from the node), no program of its own."""
        m = cls.__new__(cls)
        m.nodes, m.ins, m.out, m.plan, m.layer = [node], list(node.inputs), node.outputs[0], _add_plan(node), None
        return m

    def reference(self, args):
        return {self.out: self.plan.apply(*args).astype(np.int8)}

    def packed_eval(self, views):
        return self.layer.packed_reference(*views)


class _Conv:
    """A ``qconv`` member: the single-op region's compiled layer; with ``add`` (a ``qadd`` reading this
    convolution's output and ``other``), the add fused into its epilogue (TVM's ResNet form: the
    shortcut loaded into the accumulator per tile, no store and reload of the convolution's output)."""

    def __init__(self, node, cfg, shape, name, knobs, path, add=None, other=None):
        from vtasim.compiler.frontend.region import VtaRegion
        r = VtaRegion(node, cfg, knobs=knobs, path=path)
        self.nodes, self.ins, self.out = [node], [node.inputs[0]], node.outputs[0]
        self.residual = None
        if add is not None:
            self.residual = _add_plan(add, swap=add.inputs[1] == node.outputs[0])
            self.nodes, self.ins, self.out = [node, add], [node.inputs[0], other], add.outputs[0]
        self.layer = r.compile(shape, np.int8, residual=self.residual, name=name)
        self.plan = r.plan
        self.data_names = ("data", "res")[:len(self.ins)]
        g = self.layer.geom
        self.host_pad = tuple(g.pads) if g.host_pad else None

    @classmethod
    def restored(cls, nodes, ins, layer):
        """The convolution (and fused add) of a saved chain: its restored arithmetic, no program of its own."""
        m = cls.__new__(cls)
        m.nodes, m.ins, m.out, m.layer, m.plan = list(nodes), list(ins), nodes[-1].outputs[0], layer, layer.plan
        m.residual = _add_plan(nodes[1], swap=nodes[1].inputs[1] == nodes[0].outputs[0]) if len(nodes) > 1 else None
        return m

    def pads(self, k: int):
        return (self.host_pad or (0, 0, 0, 0)) if k == 0 else (0, 0, 0, 0)

    def reference(self, args):
        y = self.layer.reference(args[0])
        if self.residual is None:
            return {self.out: y}
        return {self.nodes[0].outputs[0]: y, self.out: self.residual.apply(y, args[1]).astype(np.int8)}

    def packed_eval(self, views):
        from vtasim.compiler.dsl.reference import evaluate
        feed = dict(zip(self.data_names, views))
        return evaluate(self.layer.output, {**self.layer.consts, **feed})


def _add_plan(node, swap: bool = False):
    """The ALU plan of ``qadd`` ``node`` (operands swapped: the plan's ``A`` is the node's second input)."""
    from vtasim.compiler.qnn.qadd import plan_qadd
    a = node.attrs
    lo, hi = act_limits(a["act"], a["y_scale"], a["y_zp"], a["y_dtype"])
    first, second = (a["a_scale"], a["a_zp"]), (a["b_scale"], a["b_zp"])
    if swap:
        first, second = second, first
    return plan_qadd(*first, *second, a["y_scale"], a["y_zp"], lo, hi)


def check_problem(node) -> str | None:
    """The problem :func:`plan_qadd` finds with a ``qadd`` (None when its ALU plan exists)."""
    from vtasim.compiler.qnn import QnnError
    from vtasim.compiler.qnn.qadd import plan_qadd
    if node.op != "qadd":
        return None
    a = node.attrs
    lo, hi = act_limits(a["act"], a["y_scale"], a["y_zp"], a["y_dtype"])
    try:
        plan_qadd(a["a_scale"], a["a_zp"], a["b_scale"], a["b_zp"], a["y_scale"], a["y_zp"], lo, hi)
    except QnnError as e:
        return str(e)
    return None


class VtaChainRegion:
    """The members (graph order), compiled on the first run; see the module docstring."""

    def __init__(self, nodes, g, cfg, knobs=None, path: str = "auto", fuse: bool = True):
        self.nodes, self.cfg, self.knobs, self.path, self.fuse = list(nodes), cfg, knobs, path, fuse
        made = {o for n in self.nodes for o in n.outputs}
        self.inputs = []
        for n in self.nodes:
            for v in n.inputs:
                if v not in made and v not in self.inputs:
                    self.inputs.append(v)
        cons = g.consumers()
        members = {id(n) for n in self.nodes}
        self.outputs = [o for n in self.nodes for o in n.outputs
                        if o in g.outputs or any(id(c) not in members for c in cons.get(o, []))]
        self.shapes = {v: g.shapes.get(v) for v in self.inputs + [o for n in self.nodes for o in n.outputs]}
        self._built = None
        self.restored = False           # restored from a compiled network: no tensor expressions

    # ---- names -------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.nodes[0].name

    @property
    def layer_name(self) -> str:
        base = "".join(c if c.isalnum() else "_" for c in self.nodes[0].name)[:32] or "region"
        return f"{base}_x{len(self.nodes)}"

    # ---- compilation -------------------------------------------------------------------------------
    def _fusable(self, k: int, made_before: set):
        """The ``qadd`` member that reads only member ``k``'s (a convolution's) output, with the add's other
        operand, when that operand exists before member ``k`` runs; else (None, None)."""
        n = self.nodes[k]
        users = [m for m in self.nodes if n.outputs[0] in m.inputs]
        if n.op != "qconv" or len(users) != 1 or users[0].op != "qadd" or n.outputs[0] in self.outputs \
                or not self.fuse:
            return None, None
        add = users[0]
        other = [v for v in add.inputs if v != n.outputs[0]]
        if len(other) != 1 or other[0] not in made_before:
            return None, None
        return add, other[0]

    def _members(self, shapes):
        from vtasim.compiler.errors import CompileError
        from vtasim.compiler.qnn import QnnError
        from vtasim.sim.errors import SimError
        out, made, fused = [], set(self.inputs), set()
        for k, n in enumerate(self.nodes):
            if id(n) in fused:
                continue
            name = f"m{len(out)}_" + "".join(c if c.isalnum() else "_" for c in n.name)[:24]
            shape = shapes[n.inputs[0]]
            if n.op == "qconv":
                add, other = self._fusable(k, made)
                m = None
                if add is not None:
                    try:
                        m = _Conv(n, self.cfg, shape, name, self.knobs, self.path, add, other)
                        fused.add(id(add))
                    except (CompileError, QnnError, SimError):   # no fused plan or tiles: kept apart
                        m = None
                m = m or _Conv(n, self.cfg, shape, name, self.knobs, self.path)
            else:
                m = _Add(n, self.cfg, shape, name)
            out.append(m)
            y = tuple(m.layer.out_shape)
            for node in m.nodes:
                shapes[node.outputs[0]] = y
                made.add(node.outputs[0])
        return out

    def _layouts(self, shapes, members):
        cfg, lay = self.cfg, {}
        need: dict = {}
        for m in members:
            if m.host_pad is not None:
                prev = need.setdefault(m.ins[0], (m.host_pad, m.layer.za))
                if prev != (m.host_pad, m.layer.za):
                    raise FrontendError(f"{m.nodes[0].where}: its input is padded {m.host_pad} with {m.layer.za} by this "
                                        f"convolution and {prev[0]} with {prev[1]} by another (rule: one DRAM "
                                        f"layout per tensor in a multi-op region)")
        live = set(self.inputs) | {m.out for m in members} | {v for m in members for v in m.ins}
        for v, shape in shapes.items():
            if v not in live:                   # an output fused away: never in DRAM
                continue
            n, c, h, w = shape
            pads, fill = need.get(v, ((0, 0, 0, 0), 0))
            lay[v] = _Layout(n, c, h, w, -(-n // cfg.batch), -(-c // cfg.block_in), tuple(pads), int(fill))
        return lay

    def compile(self, feeds_shapes: dict):
        from vtasim.compiler.runtime import CommandQueue
        from vtasim.compiler.lowering.codegen import emit
        from vtasim.compiler.runtime.chain import KernelProxy
        key = tuple(tuple(feeds_shapes[v]) for v in self.inputs)
        if self._built is not None and self._built["key"] == key:
            return self._built
        cfg = self.cfg
        if cfg.block_in != cfg.block_out or cfg.inp_width != 8 or cfg.out_width != 8:
            raise FrontendError(f"{self.nodes[0].where}: multi-op regions need BLOCK_IN = BLOCK_OUT and 8-bit "
                                f"activations (config {cfg.block_in}/{cfg.block_out})")
        shapes = {v: tuple(feeds_shapes[v]) for v in self.inputs}
        members = self._members(shapes)
        lay = self._layouts(shapes, members)
        q = CommandQueue(cfg, name=self.layer_name)
        bufs = {}
        for k, v in enumerate(lay):             # the border (zero point) is the initial content
            alloc = q.alloc_inout if v in self.outputs else q.alloc_input
            L = lay[v]
            bufs[v] = alloc(f"t{k}_" + "".join(c if c.isalnum() else "_" for c in v)[:40],
                            L.place(cfg, np.zeros((L.nb, L.cb, L.h, L.w, cfg.batch, cfg.block_in), np.int8)))
        bounds = []
        for k, m in enumerate(members):
            built = m.layer.built
            mapping = {}
            for arg in built.func.args:
                if arg.name in m.data_names:
                    i = m.data_names.index(arg.name)
                    mapping[arg.name] = lay[m.ins[i]].window(bufs[m.ins[i]], m.pads(i))
                elif arg.name == m.layer.output.name:
                    mapping[arg.name] = lay[m.out].window(bufs[m.out])
                else:
                    mapping[arg.name] = q.alloc_input(f"m{k}_{arg.name}", m.layer.consts[arg.name])
            start = q.insn_count
            emit(built.func, KernelProxy(q, k), mapping)
            bounds.append((start, q.insn_count))
            if k + 1 < len(members):
                q.kernel_boundary()
        q.synchronize()
        image = q.build()
        self._built = dict(key=key, members=members, layouts=lay, bufs=bufs, image=image, bounds=bounds,
                           insns=q.insns)
        return self._built

    # ---- data --------------------------------------------------------------------------------------
    def _pack(self, v, x, lay):
        from vtasim.compiler.ops.layout import pack_nchw
        x = np.asarray(x)
        if x.dtype != np.int8:
            raise FrontendError(f"{self.nodes[0].where}: multi-op region input {v!r} is {x.dtype.name} "
                                f"(int8 expected)")
        L = lay[v]
        full = np.zeros((L.nb * self.cfg.batch, L.cb * self.cfg.block_in, L.h, L.w), np.int8)
        full[:L.n, :L.c] = x
        return L.place(self.cfg, pack_nchw(full, self.cfg.batch, self.cfg.block_in))

    def _expected(self, phys: dict, b) -> dict:
        """Every value's physical bytes: the members' tensor expressions in numpy, in order."""
        lay = b["layouts"]
        for m in b["members"]:
            views = [lay[v].view(phys[v], m.pads(i)) for i, v in enumerate(m.ins)]
            phys[m.out] = lay[m.out].place(self.cfg, m.packed_eval(views).astype(np.int8))
        return phys

    def image(self, feeds: dict, expected: bool = True):
        from vtasim.sim.image import MemoryImage, Segment
        b = self.compile({v: np.shape(feeds[v]) for v in self.inputs})
        lay, bufs = b["layouts"], b["bufs"]
        phys = {v: self._pack(v, feeds[v], lay) for v in self.inputs}
        swap = {bufs[v].addr: phys[v].tobytes() for v in self.inputs}
        base = b["image"]
        segments = [Segment(s.addr, swap[s.addr]) if s.addr in swap else s for s in base.segments]
        want = {}
        if expected and not self.restored:
            phys = self._expected(phys, b)
            want = {bufs[v].name: phys[v].tobytes() for v in self.outputs}
        return MemoryImage(base.cfg, base.insn_addr, base.insn_count, segments, base.outputs, want)

    def images(self, feeds: dict) -> list:
        """The region's memory images for ``feeds`` (one: the members share one launch)."""
        return [self.image(feeds)]

    def _unpack(self, v, raw, b):
        from vtasim.compiler.ops.layout import unpack_nchw
        L = b["layouts"][v]
        phys = np.frombuffer(raw, np.int8).reshape(L.physical_shape(self.cfg))
        return unpack_nchw(L.view(phys))[:L.n, :L.c]

    def reference(self, feeds: dict) -> dict:
        """Every member's numpy execution of the same integers, chained: {value: int8 NCHW} of every value
        the members compute (the outputs and the values that stay in DRAM)."""
        b = self.compile({v: np.shape(feeds[v]) for v in self.inputs})
        vals = dict(feeds)
        for m in b["members"]:
            vals.update({k: v.astype(np.int8) for k, v in m.reference([vals[v] for v in m.ins]).items()})
        return {n.outputs[0]: vals[n.outputs[0]] for n in self.nodes}

    def run(self, feeds: dict, engine: str = "cycle"):
        """``({output value: int8 array}, RunResult or None, [per-member (cycles, dram bytes)])``."""
        from vtasim.sim.engines import run_engine
        if engine == "reference":
            return self.reference(feeds), None, [(None, None)] * len(self.nodes)
        img = self.image(feeds, expected=False)
        res = run_engine(engine, img)
        b = self._built
        outs = {v: self._unpack(v, res.outputs[b["bufs"][v].name], b) for v in self.outputs}
        return outs, res, self.shares(res)

    # ---- accounting ----------------------------------------------------------------------------------
    def member_dma_bytes(self) -> list:
        """DRAM bytes each member's instructions move (loads, uop loads and stores), from the program."""
        from vtasim.hw.config import MEM_OUT
        from vtasim.hw.isa import OP_LOAD, OP_STORE
        b, cfg = self._built, self.cfg
        out = []
        for start, end in b["bounds"]:
            tot = 0
            for i in b["insns"][start:end]:
                if i.opcode == OP_LOAD and i.x_size:
                    tot += i.x_size * i.y_size * cfg.dram_elem_bytes(i.memory_type)
                elif i.opcode == OP_STORE and i.x_size:
                    tot += i.x_size * i.y_size * cfg.dram_elem_bytes(MEM_OUT)
            out.append(tot)
        return out

    def shares(self, res) -> list:
        """``[(cycles, dram bytes)]`` per node: for each member, the cycle its last instruction retired minus
        the previous member's (from the retire trace), and its program's DMA bytes; an add fused into a
        convolution's epilogue has (0, 0), its work counted in the convolution's row."""
        from bisect import bisect_right
        dma = self.member_dma_bytes()
        members = self._built["members"]
        if res is None or res.trace is None or res.cycles is None:
            per = [(None, d) for d in dma]
        else:
            ends = [0] * len(members)
            starts = [s for s, _ in self._built["bounds"]]
            for r in res.trace:
                k = bisect_right(starts, r.program_index) - 1
                if k >= 0:
                    ends[k] = max(ends[k], r.end_cycle)
            per, prev = [], 0
            for k, d in enumerate(dma):
                end = res.cycles if k == len(dma) - 1 else max(ends[k], prev)
                per.append((end - prev, d))
                prev = end
        by_node = {}
        for m, share in zip(members, per):
            by_node[m.nodes[0].name] = share
            for n in m.nodes[1:]:
                by_node[n.name] = (0 if share[0] is not None else None, 0)
        return [by_node[n.name] for n in self.nodes]

    def edge_info(self, feeds_shapes: dict | None = None) -> dict:
        """What a runner needs at the host edge, without the compiler: per input and output value its
        image buffer (name, byte address, bytes), the logical NCHW shape, the packed physical shape
        ``(N/b, C/c, H+pads, W+pads, b, c)``, the padding ``(top, left, bottom, right)`` and its fill (the
        zero point in the border).  Inputs are packed, padded and written at ``addr``; outputs are read
        there and unpacked (the interior)."""
        if feeds_shapes is None and self._built is None:
            raise FrontendError(f"{self.nodes[0].where}: edge_info before the region was compiled")
        b = self.compile(feeds_shapes) if feeds_shapes is not None else self._built
        info = {}
        for role, values in (("input", self.inputs), ("output", self.outputs)):
            for v in values:
                L, buf = b["layouts"][v], b["bufs"][v]
                info[v] = dict(role=role, buffer=buf.name, addr=buf.addr, nbytes=buf.nbytes, shape=(L.n, L.c, L.h, L.w),
                               packed=L.physical_shape(self.cfg), pads=L.pads, fill=L.fill)
        return info

    def edge_bytes(self, feeds_shapes: dict | None = None) -> dict:
        """Host<->VTA activation bytes per inference: the packed inputs written and the outputs read back
        (``feeds_shapes`` compiles first; without it the region must have run)."""
        if feeds_shapes is None and self._built is None:
            raise FrontendError(f"{self.nodes[0].where}: edge_bytes before the region was compiled")
        b = self.compile(feeds_shapes) if feeds_shapes is not None else self._built
        return {"in": sum(b["bufs"][v].nbytes for v in self.inputs),
                "out": sum(b["bufs"][v].nbytes for v in self.outputs)}

    # ---- a compiled network's region (vtasim.compiler.frontend.netfile) ---------------------------------------
    def export(self) -> dict:
        """``{"kind", "members", "edge", "images": [{"image", "state"}]}`` of the compiled region (see the
        module docstring); :meth:`restore` takes it back."""
        from vtasim.compiler.ops.qlayer_state import arith_state
        if self._built is None:
            raise FrontendError(f"{self.nodes[0].where}: region {self.layer_name!r} is not compiled yet "
                                f"(run one input first)")
        b = self._built
        kernels = [{"nodes": [n.name for n in m.nodes], "ins": list(m.ins), "out": m.out, "insns": tuple(bounds),
                    "conv": arith_state(m.layer) if isinstance(m, _Conv) else None}
                   for m, bounds in zip(b["members"], b["bounds"])]
        edge = [{"value": v, **e} for v, e in self.edge_info().items()]
        return {"kind": CHAIN_KIND, "members": [n.name for n in self.nodes], "edge": edge,
                "images": [{"image": b["image"], "state": {"kernels": kernels}}]}

    @classmethod
    def restore(cls, nodes, g, cfg, record: dict, where: str, path: str = "auto") -> "VtaChainRegion":
        """The chain of ``nodes`` (graph order) compiled as ``record`` (what :meth:`export` gave), every field
        checked against the graph's nodes and the image (one FrontendError line); it runs without compiling."""
        from vtasim.hw.isa import decode_stream
        region = cls(nodes, g, cfg, path=path)
        bad = [f"{n.name}: {why}" for n in nodes for why in [chain_member_problem(n)] if why]
        images = record.get("images")
        if record.get("kind") != CHAIN_KIND or not isinstance(images, list) or len(images) != 1 or bad:
            raise FrontendError(f"{where}: kind {record.get('kind')!r} with {len(images or ())} image(s) "
                                f"{'; '.join(bad)} (rule: kind {CHAIN_KIND!r}, one image, {'/'.join(CHAIN_OPS)} "
                                f"int8 members)")
        image, state = images[0]["image"], images[0]["state"]
        if image.cfg != cfg:
            raise FrontendError(f"{where}: the image's config differs from the network's (rule: one config per network)")
        lay, bufs = region._restore_edge(record.get("edge"), image, where)
        if not isinstance(state, dict) or set(state) != {"kernels"} or not isinstance(state["kernels"], list):
            raise FrontendError(f"{where}: state = {str(state)[:80]} (rule: an object with the list kernels)")
        members = region._restore_kernels(state["kernels"], image, where)
        bounds = [k["insns"] for k in state["kernels"]]
        region._built = dict(key=tuple((lay[v].n, lay[v].c, lay[v].h, lay[v].w) for v in region.inputs), members=members, layouts=lay,
                             bufs=bufs, image=image, bounds=bounds, insns=decode_stream(cfg, image.insn_bytes()))
        region.restored = True
        return region

    def _restore_edge(self, edge, image, where):
        """``(layouts, buffers)`` of the edge values of a saved chain, each checked against the graph's shapes
        and the image's segments and outputs."""
        from vtasim.compiler.runtime.queue import DramBuffer
        cfg = self.cfg
        want = [(v, "input") for v in self.inputs] + [(v, "output") for v in self.outputs]
        got = [(e.get("value"), e.get("role")) if isinstance(e, dict) else None for e in edge] \
            if isinstance(edge, list) else None
        if got != want:
            raise FrontendError(f"{where}: edge values {str(got)[:100]} (rule: the region's inputs then outputs "
                                f"{str(want)[:100]})")
        lay, bufs = {}, {}
        for e in edge:
            v = e["value"]
            if set(e) != set(EDGE_KEYS):
                raise FrontendError(f"{where}: edge {v!r} has keys {sorted(e)} (rule: exactly {', '.join(EDGE_KEYS)})")
            shape, pads, fill = e["shape"], e["pads"], e["fill"]
            ok = isinstance(shape, tuple) and len(shape) == 4 and all(_posint(x) for x in shape) and \
                isinstance(pads, tuple) and len(pads) == 4 and all(_posint(x, 0) for x in pads) and \
                _posint(fill, -128) and fill < 128 and isinstance(e["buffer"], str)
            known = self.shapes.get(v)
            if not ok or (known is not None and tuple(known) != shape):
                raise FrontendError(f"{where}: edge {v!r}: shape {shape!r} pads {pads!r} fill {fill!r} (rule: the "
                                    f"graph's NCHW shape {known}, four paddings >= 0, an int8 fill)")
            n, c, h, w = shape
            L = _Layout(n, c, h, w, -(-n // cfg.batch), -(-c // cfg.block_in), pads, fill)
            nbytes = int(np.prod(L.physical_shape(cfg)))
            addr = e["addr"]
            if e["role"] == "input":
                found = any(s.addr == addr and s.nbytes == nbytes for s in image.segments)
            else:
                found = any(o.name == e["buffer"] and o.addr == addr and o.nbytes == nbytes for o in image.outputs)
            if e["packed"] != L.physical_shape(cfg) or e["nbytes"] != nbytes or not found:
                raise FrontendError(f"{where}: edge {v!r}: {e['nbytes']!r} bytes packed {e['packed']!r} at "
                                    f"{addr!r} (rule: the {e['role']} {'segment' if e['role'] == 'input' else 'region'}"
                                    f" {e['buffer']!r} of the image, {L.physical_shape(cfg)} = {nbytes} bytes)")
            lay[v], bufs[v] = L, DramBuffer(e["buffer"], addr, nbytes, e["role"] == "output", 0)
        return lay, bufs

    def _restore_kernels(self, kernels, image, where) -> list:
        """The members of a saved chain: each kernel's nodes, operands and instruction range checked against
        the graph's nodes and the image, a convolution's arithmetic against its node."""
        from vtasim.compiler.errors import CompileError
        from vtasim.compiler.frontend.region import VtaRegion
        from vtasim.compiler.ops.qlayer_state import restore_arith
        by_name = {n.name: n for n in self.nodes}
        members, covered, made, prev = [], [], set(self.inputs), 0
        for k, kd in enumerate(kernels):
            at = f"{where} kernel {k}"
            if not isinstance(kd, dict) or set(kd) != set(_KERNEL_KEYS):
                raise FrontendError(f"{at}: {str(kd)[:80]} (rule: exactly the keys {', '.join(_KERNEL_KEYS)})")
            ns = [by_name.get(x) if isinstance(x, str) else None for x in kd["nodes"]] \
                if isinstance(kd["nodes"], list) else [None]
            ops = [n.op if n is not None else None for n in ns]
            if ops == ["qconv", "qadd"] and ns[0].outputs[0] in ns[1].inputs:
                ins = [ns[0].inputs[0]] + [v for v in ns[1].inputs if v != ns[0].outputs[0]]
            elif ops in (["qconv"], ["qadd"]):
                ins = [ns[0].inputs[0]] if ops == ["qconv"] else list(ns[0].inputs)
            else:
                raise FrontendError(f"{at}: nodes {str(kd['nodes'])[:80]} (rule: a member convolution, add, or "
                                    f"convolution with the add of its output)")
            span = kd["insns"]
            ok_span = isinstance(span, tuple) and len(span) == 2 and all(_posint(x, 0) for x in span) and \
                prev <= span[0] < span[1] <= image.insn_count
            if kd["ins"] != ins or kd["out"] != ns[-1].outputs[0] or any(v not in made for v in ins) or not ok_span:
                raise FrontendError(f"{at}: reads {str(kd['ins'])[:60]}, writes {kd['out']!r}, instructions "
                                    f"{span!r} (rule: the nodes' operands {ins}, computed before it, and an "
                                    f"increasing range within the image's {image.insn_count} instructions)")
            prev = span[1]
            if ops[0] == "qconv":
                try:
                    layer = restore_arith(self.cfg, kd["conv"], at)
                except CompileError as e:
                    raise FrontendError(str(e)) from None
                VtaRegion(ns[0], self.cfg, path=self.path).check_layer(layer, np.int8, at)
                shapes = (self.shapes.get(ins[0]), self.shapes.get(ns[0].outputs[0]))
                if (layer.in_shape, layer.out_shape) != shapes:
                    raise FrontendError(f"{at}: the layer maps {layer.in_shape} to {layer.out_shape}, the graph "
                                        f"{shapes[0]} to {shapes[1]} (rule: the graph's shapes)")
                members.append(_Conv.restored(ns, ins, layer))
            elif kd["conv"] is not None:
                raise FrontendError(f"{at}: an add with a convolution state (rule: conv is null for an add)")
            else:
                members.append(_Add.restored(ns[0]))
            covered += [n.name for n in ns]
            made.update(n.outputs[0] for n in ns)
        if covered != [n.name for n in self.nodes]:
            raise FrontendError(f"{where}: kernels compute {str(covered)[:100]} (rule: every member once, in order)")
        return members


def _posint(v, lo: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo
