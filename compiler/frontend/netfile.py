"""A compiled network on disk: compiled once by ``vtasim onnx MODEL --compile-only --out NET``, run many
times by ``vtasim infer NET``.

::

    NET/network.json                   format, vtasim version and source hash, model hash, config, options,
                                       the graph (nodes, inputs, outputs, constants, shapes, notes) and
                                       one entry per VTA region: its kind (``qlayer``: one convolution or
                                       dense layer; ``chain``: a multi-op region), its member nodes, its
                                       host-side edge and its images
    NET/params.npz                     every array of the graph and the regions (numpy.savez, no pickle)
    NET/model.onnx                     a copy of the model (onnxruntime's reference in ``vtasim infer``)
    NET/regions/NNN_NAME/K/image.json  the K-th memory image of a region (vtasim.sim.image format), input all zeros

In ``network.json`` an array is ``{"$array": KEY, "dtype": D, "shape": [...]}`` (KEY in params.npz), a
tuple ``{"$tuple": [...]}``, a numpy type ``{"$dtype": NAME}`` and a non-finite float ``{"$float":
"nan"|"inf"|"-inf"}``; everything else is plain JSON.

Loading is a security boundary like a memory image: every file is a regular file inside ``NET`` with no
symbolic link on the way, read through the bounded reader (:mod:`vtasim.hw.files`: ``network.json`` at most
:data:`MAX_JSON_BYTES`, ``params.npz`` at most :data:`MAX_PARAMS_BYTES`, images as
:meth:`vtasim.sim.image.MemoryImage.load`), the JSON is strict and its schema checked, every array's dtype and
shape equal what ``network.json`` declares, no array is missing or extra, the graph is topologically
ordered, each VTA node is a member of exactly one region of a known kind (a ``chain`` only in
``region_mode`` multi), each checked against its nodes.  A refusal is one
:class:`~vtasim.compiler.frontend.errors.FrontendError` line naming the file, the value and the rule.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from vtasim.compiler.frontend.errors import FrontendError
from vtasim.compiler.frontend.graph import Graph, Node
from vtasim.hw.files import brief, load_json, load_npz
from vtasim.hw.outfiles import open_out, out_dir, sub_dir, write_bytes, write_text

__all__ = ["save_network", "load_network", "child_file", "NETWORK_FORMAT", "NETWORK_VERSION", "MAX_JSON_BYTES",
           "MAX_PARAMS_BYTES", "MAX_MODEL_BYTES", "NETWORK_FILES"]

NETWORK_FORMAT = "vtasim-network"
NETWORK_VERSION = 2                # 2: region entries name their members; multi-op (chain) regions
MAX_JSON_BYTES = 64 << 20          # a ResNet-18's graph and region states are a few MB
MAX_PARAMS_BYTES = 1 << 30         # as a memory image's DRAM
MAX_MODEL_BYTES = 1 << 30          # vtasim.compiler.frontend.onnx_import's bound
NETWORK_FILES = ("network.json", "params.npz", "model.onnx")
_TOP_KEYS = ("format", "version", "vtasim", "model", "config", "options", "graph", "regions")
_GRAPH_KEYS = ("name", "inputs", "outputs", "consts", "nodes", "notes", "shapes")
_NODE_KEYS = ("op", "inputs", "outputs", "attrs", "name", "where", "target")
_TAGS = ("$array", "$tuple", "$dtype", "$float")
_REGION_KEYS = ("kind", "members", "edge", "images")


# ---- values <-> JSON ------------------------------------------------------------------------------
class _Encoder:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, v, where: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            v = float(v)
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject or v.dtype.kind not in "biuf":
                raise FrontendError(f"{where}: array of dtype {v.dtype} cannot be saved (rule: numbers only)")
            key = f"a{len(self.arrays):06d}"
            self.arrays[key] = v
            return {"$array": key, "dtype": v.dtype.str, "shape": list(v.shape)}
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            return {"$dtype": np.dtype(v).str}
        if isinstance(v, tuple):
            return {"$tuple": [self(x, where) for x in v]}
        if isinstance(v, list):
            return [self(x, where) for x in v]
        if isinstance(v, dict):
            if not all(isinstance(k, str) and not k.startswith("$") for k in v):
                raise FrontendError(f"{where}: dict keys {brief(list(v))} cannot be saved (rule: strings not "
                                    f"starting with $)")
            return {k: self(x, f"{where}.{k}") for k, x in v.items()}
        raise FrontendError(f"{where}: a {type(v).__name__} cannot be saved in a compiled network "
                            f"(rule: numbers, strings, lists, tuples, dicts, numpy arrays and dtypes)")


class _Decoder:
    def __init__(self, arrays: dict, shown: str):
        self.arrays, self.shown, self.used = arrays, shown, set()

    def bad(self, where, value, rule) -> FrontendError:
        return FrontendError(f"{self.shown}: {where} = {brief(value)} ({rule})")

    def __call__(self, v, where: str):
        if isinstance(v, list):
            return [self(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if not isinstance(v, dict):
            return v
        tags = [k for k in v if k.startswith("$")]
        if not tags:
            return {k: self(x, f"{where}.{k}") for k, x in v.items()}
        tag = tags[0]
        if tag not in _TAGS or len(tags) != 1:
            raise self.bad(where, v, f"rule: one tag of {', '.join(_TAGS)}")
        if tag == "$array":
            return self.array(v, where)
        if len(v) != 1:
            raise self.bad(where, v, f"rule: {tag} alone")
        x = v[tag]
        if tag == "$tuple":
            if not isinstance(x, list):
                raise self.bad(where, v, "rule: $tuple holds a list")
            return tuple(self(e, f"{where}[{i}]") for i, e in enumerate(x))
        if tag == "$float":
            if x not in ("nan", "inf", "-inf"):
                raise self.bad(where, v, "rule: $float is nan, inf or -inf")
            return float(x)
        return self.dtype(x, where)

    def dtype(self, x, where) -> np.dtype:
        try:
            dt = np.dtype(x) if isinstance(x, str) and len(x) <= 8 else None
        except TypeError:
            dt = None
        if dt is None or dt.hasobject or dt.kind not in "biuf":
            raise self.bad(where, x, "rule: a numpy number type such as '|i1' or '<f4'")
        return dt

    def array(self, v, where) -> np.ndarray:
        if set(v) != {"$array", "dtype", "shape"}:
            raise self.bad(where, v, "rule: $array with dtype and shape")
        key, shape = v["$array"], v["shape"]
        dt = self.dtype(v["dtype"], f"{where}.dtype")
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n
                                                  for n in shape):
            raise self.bad(where, shape, "rule: a shape is a list of non-negative integers")
        arr = self.arrays.get(key) if isinstance(key, str) else None
        if arr is None:
            raise FrontendError(f"{self.shown}: {where}: array {brief(key)} is not in params.npz "
                                f"(rule: every array the graph names is stored)")
        if key in self.used:
            raise self.bad(where, key, "rule: each stored array is named once")
        if arr.dtype != dt or list(arr.shape) != shape:
            raise FrontendError(f"{self.shown}: {where}: params.npz[{key}] is {arr.dtype.str} {tuple(arr.shape)}, "
                                f"the graph declares {dt.str} {tuple(shape)} (rule: arrays as the graph declares)")
        self.used.add(key)
        return arr


# ---- saving ---------------------------------------------------------------------------------------
def _node_doc(n: Node, enc) -> dict:
    return {"op": n.op, "inputs": list(n.inputs), "outputs": list(n.outputs),
            "attrs": enc(n.attrs, f"node {n.name}"), "name": n.name, "where": n.where, "target": n.target}


def save_network(net, out, meta: dict, model_bytes: bytes | None = None) -> Path:
    """Write ``net`` (a :class:`~vtasim.compiler.frontend.network.Network` whose regions are compiled) into the
    directory ``out``; ``meta`` holds ``vtasim``, ``model`` and ``options`` (see :mod:`.netcache`)."""
    from vtasim.compiler.frontend.execute import region_starts, image_dir_name
    g = net.graph
    enc = _Encoder()
    graph = {"name": g.name,
             "inputs": [[name, enc(tuple(shape), "inputs"), enc(dtype, "inputs")]
                        for name, (shape, dtype) in g.inputs.items()],
             "outputs": list(g.outputs), "consts": enc(dict(g.consts), "consts"),
             "nodes": [_node_doc(n, enc) for n in g.nodes], "notes": [str(x) for x in g.notes],
             "shapes": [[k, enc(v, "shapes")] for k, v in g.shapes.items()]}
    d = out_dir(out, "--out network directory")
    regions, images = {}, []
    for k, region in region_starts(g, net.regions):      # a multi-op region once, at its first member
        rec = region.export()
        rdir = image_dir_name(k, region)      # the --save-images name
        steps = []
        for i, step in enumerate(rec["images"]):
            rel = f"regions/{rdir}/{i}"
            images.append((rdir, str(i), step["image"]))
            steps.append({"dir": rel, "state": enc(step["state"], f"region {region.name}")})
        regions[region.name] = {"kind": rec["kind"], "members": list(rec["members"]),
                                "edge": enc(rec["edge"], f"region {region.name}"), "images": steps}
    doc = {"format": NETWORK_FORMAT, "version": NETWORK_VERSION, "vtasim": meta["vtasim"], "model": meta["model"],
           "config": net.cfg.to_dict(), "options": meta["options"], "graph": graph, "regions": regions}
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    with open_out(d / "params.npz", "wb", "network parameters") as f:
        np.savez(f, **enc.arrays)
    for rdir, i, image in images:
        image.save(sub_dir(sub_dir(sub_dir(d, "regions", "network regions"), rdir, "region directory"), i,
                           "region image"))
    if model_bytes is not None:
        write_bytes(d / "model.onnx", model_bytes, "network model copy")
    write_text(d / "network.json", text, "network description")     # last: a complete network has it
    return d


# ---- loading --------------------------------------------------------------------------------------
def child_file(base: Path, rel: str, shown: str) -> Path:
    from vtasim.sim.errors import ImageError
    from vtasim.sim.image import safe_child
    try:
        return safe_child(base, rel, shown)
    except ImageError as e:
        raise FrontendError(str(e).replace("the image directory", "the network directory")) from None


def _keys(d, want, shown, what) -> dict:
    if not isinstance(d, dict):
        raise FrontendError(f"{shown}: {what} is a {type(d).__name__} (rule: a JSON object)")
    missing = [k for k in want if k not in d]
    extra = [k for k in d if k not in want]
    if missing or extra:
        raise FrontendError(f"{shown}: {what}: missing {missing[:5]}, unknown {[brief(k) for k in extra[:5]]} "
                            f"(rule: exactly the keys {', '.join(want)})")
    return d


def _strs(v, shown, what, empty_ok=False) -> list:
    if not isinstance(v, list) or not all(isinstance(s, str) and (s or empty_ok) for s in v):
        raise FrontendError(f"{shown}: {what} = {brief(v)} (rule: a list of value names)")
    return v


def _graph(doc, dec, shown) -> Graph:
    _keys(doc, _GRAPH_KEYS, shown, "graph")
    inputs = {}
    if not isinstance(doc["inputs"], list):
        raise FrontendError(f"{shown}: graph.inputs = {brief(doc['inputs'])} (rule: a list of [name, shape, dtype])")
    for i, item in enumerate(doc["inputs"]):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            raise FrontendError(f"{shown}: graph.inputs[{i}] = {brief(item)} (rule: [name, shape, dtype])")
        shape = dec(item[1], f"graph.inputs[{i}].shape")
        if not isinstance(shape, tuple) or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                   for n in shape):
            raise FrontendError(f"{shown}: graph.inputs[{i}].shape = {brief(shape)} (rule: positive integers)")
        dtype = dec(item[2], f"graph.inputs[{i}].dtype")
        if dtype is not None and not isinstance(dtype, np.dtype):
            raise FrontendError(f"{shown}: graph.inputs[{i}].dtype = {brief(dtype)} (rule: a $dtype)")
        inputs[item[0]] = (shape, dtype)
    consts = dec(doc["consts"], "graph.consts")
    if not isinstance(consts, dict) or not all(isinstance(v, np.ndarray) for v in consts.values()):
        raise FrontendError(f"{shown}: graph.consts (rule: an object of arrays)")
    if not isinstance(doc["nodes"], list):
        raise FrontendError(f"{shown}: graph.nodes = {brief(doc['nodes'])} (rule: a list of nodes)")
    defined = set(inputs) | set(consts)
    nodes = []
    for k, nd in enumerate(doc["nodes"]):
        where = f"graph.nodes[{k}]"
        _keys(nd, _NODE_KEYS, shown, where)
        for f in ("op", "name", "where", "target"):
            if not isinstance(nd[f], str):
                raise FrontendError(f"{shown}: {where}.{f} = {brief(nd[f])} (rule: a string)")
        if nd["target"] not in ("host", "vta"):
            raise FrontendError(f"{shown}: {where}.target = {brief(nd['target'])} (rule: host or vta)")
        ins = _strs(nd["inputs"], shown, f"{where}.inputs", empty_ok=True)
        outs = _strs(nd["outputs"], shown, f"{where}.outputs")
        undefined = [i for i in ins if i and i not in defined]
        if undefined:
            raise FrontendError(f"{shown}: {where} ({nd['name']}) reads {brief(undefined)} before it is computed "
                                f"(rule: nodes in topological order)")
        twice = [o for o in outs if o in defined]
        if twice or len(set(outs)) != len(outs):
            raise FrontendError(f"{shown}: {where} ({nd['name']}) writes {brief(twice or outs)} again "
                                f"(rule: each value has one producer)")
        defined.update(outs)
        attrs = dec(nd["attrs"], f"{where}.attrs")
        if not isinstance(attrs, dict):
            raise FrontendError(f"{shown}: {where}.attrs (rule: an object)")
        nodes.append(Node(nd["op"], list(ins), list(outs), attrs, nd["name"], nd["where"], nd["target"]))
    outputs = _strs(doc["outputs"], shown, "graph.outputs")
    missing = [o for o in outputs if o not in defined]
    if not outputs or missing:
        raise FrontendError(f"{shown}: graph.outputs {brief(outputs)}: {brief(missing)} never computed "
                            f"(rule: outputs are computed values)")
    if not isinstance(doc["name"], str) or not isinstance(doc["notes"], list) or \
            not all(isinstance(s, str) for s in doc["notes"]) or not isinstance(doc["shapes"], list):
        raise FrontendError(f"{shown}: graph.name/notes/shapes (rule: a string, a list of strings, a list of pairs)")
    shapes = {}
    for i, item in enumerate(doc["shapes"]):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise FrontendError(f"{shown}: graph.shapes[{i}] = {brief(item)} (rule: [name, shape])")
        shapes[item[0]] = dec(item[1], f"graph.shapes[{i}]")
    return Graph(nodes, inputs, list(outputs), consts, doc["name"], list(doc["notes"]), shapes)


def _region_kinds(region_mode: str) -> dict:
    """{kind: restore(nodes, graph, cfg, record, where, requant path)} of the region kinds a network of
    ``region_mode`` holds: ``qlayer`` (one node), and in multi mode ``chain`` (a multi-op region)."""
    from vtasim.compiler.frontend.region import REGION_KIND, VtaRegion
    from vtasim.compiler.frontend.region_chain import CHAIN_KIND, VtaChainRegion
    kinds = {REGION_KIND: lambda nodes, g, cfg, rec, where, path: VtaRegion.restore(nodes[0], cfg, rec, where, path)}
    if region_mode == "multi":
        kinds[CHAIN_KIND] = VtaChainRegion.restore
    return kinds


def load_network(path, cfg=None):
    """``(Network, doc)`` of the compiled network directory ``path`` (see the module docstring); ``cfg``,
    when given, must equal the network's config.  ``doc`` is ``network.json`` without the graph."""
    from vtasim.compiler.frontend.network import Network
    from vtasim.hw.config import ConfigError, VTAConfig
    from vtasim.sim.errors import SimError
    from vtasim.sim.image import MemoryImage
    base = Path(path)
    if not base.is_dir():
        raise FrontendError(f"compiled network {base}: not a directory (rule: the --out directory of "
                            f"vtasim onnx --compile-only)")
    meta = child_file(base, "network.json", f"compiled network {base}")
    shown = str(meta)
    doc = load_json(meta, "compiled network", MAX_JSON_BYTES, limit="MAX_JSON_BYTES", error=FrontendError,
                    follow_symlinks=False)
    _keys(doc, _TOP_KEYS, shown, "top level")
    if doc["format"] != NETWORK_FORMAT or doc["version"] != NETWORK_VERSION:
        raise FrontendError(f"{shown}: format {brief(doc['format'])} version {brief(doc['version'])} (rule: "
                            f"{NETWORK_FORMAT!r} version {NETWORK_VERSION}; recompile with this vtasim)")
    try:
        net_cfg = VTAConfig.from_dict(doc["config"], f"{shown}: config")
    except ConfigError as e:
        raise FrontendError(str(e)) from None
    if cfg is not None and cfg != net_cfg:
        raise FrontendError(f"{shown}: compiled for another config than --config (rule: run a network on the "
                            f"config it was compiled for)")
    params = child_file(base, "params.npz", shown)
    arrays = load_npz(params, "network parameters", MAX_PARAMS_BYTES, limit="MAX_PARAMS_BYTES",
                      error=FrontendError, follow_symlinks=False)
    dec = _Decoder(arrays, shown)
    try:
        g = _graph(doc["graph"], dec, shown)
    except RecursionError:
        raise FrontendError(f"{shown}: graph nested too deeply (rule: the few levels vtasim writes)") from None
    if not isinstance(doc["regions"], dict):
        raise FrontendError(f"{shown}: regions (rule: an object of regions by node name)")
    from vtasim.compiler.frontend.partition import REGION_MODES
    from vtasim.compiler.qnn.vta_requant import REQUANT_PATHS
    options = doc["options"] if isinstance(doc["options"], dict) else {}
    requant, region_mode = options.get("requant", "auto"), options.get("region_mode")
    if requant not in REQUANT_PATHS or region_mode not in REGION_MODES:
        raise FrontendError(f"{shown}: options = {brief(doc['options'])} (rule: an object whose requant is one of "
                            f"{', '.join(REQUANT_PATHS)} and region_mode one of {', '.join(REGION_MODES)})")
    kinds = _region_kinds(region_mode)
    vta = {n.name: (k, n) for k, n in enumerate(g.nodes) if n.target == "vta"}
    claimed: dict = {}
    for name, rec in doc["regions"].items():
        _keys(rec, _REGION_KEYS, shown, f"region {name}")
        members = rec["members"]
        if rec["kind"] not in kinds:
            raise FrontendError(f"{shown}: region {name}: kind {brief(rec['kind'])} (rule: one of "
                                f"{', '.join(kinds)} in region_mode {region_mode})")
        if not isinstance(members, list) or not members or members[0] != name or \
                any(not isinstance(m, str) or m not in vta or m in claimed for m in members) or \
                [vta[m][0] for m in members] != sorted(vta[m][0] for m in members) or \
                (rec["kind"] == "qlayer" and len(members) != 1):
            raise FrontendError(f"{shown}: region {name}: members {brief(members)} (rule: VTA nodes in graph order, "
                                f"the first the region's name, each in one region; one for a qlayer)")
        claimed.update(dict.fromkeys(members, name))
    if set(vta) != set(claimed):
        raise FrontendError(f"{shown}: regions {brief(sorted(doc['regions']))} for VTA nodes {brief(sorted(vta))} "
                            f"(rule: one region per VTA node)")
    regions = {}
    for name, rec in doc["regions"].items():
        where = f"{shown}: region {name}"
        if not isinstance(rec["images"], list) or not rec["images"]:
            raise FrontendError(f"{where}: images (rule: a non-empty list)")
        steps = []
        for i, step in enumerate(rec["images"]):
            _keys(step, ("dir", "state"), shown, f"region {name} images[{i}]")
            d = child_file(base, step["dir"], f"{where} images[{i}].dir")
            try:
                image = MemoryImage.load(d)
            except (SimError, OSError) as e:
                raise FrontendError(f"{where}: image {step['dir']}: {e}") from None
            try:
                steps.append({"image": image, "state": dec(step["state"], f"region {name} images[{i}].state")})
                edge = dec(rec["edge"], f"region {name}.edge")
            except RecursionError:
                raise FrontendError(f"{where}: nested too deeply (rule: the few levels vtasim writes)") from None
        record = {"kind": rec["kind"], "members": rec["members"], "edge": edge, "images": steps}
        nodes = [vta[m][1] for m in rec["members"]]
        try:
            region = kinds[rec["kind"]](nodes, g, net_cfg, record, where, requant)
        except FrontendError:
            raise
        except SimError as e:           # CompileError / QnnError of the layer state
            raise FrontendError(str(e) if str(e).startswith(shown) else f"{where}: {e}") from None
        regions.update(dict.fromkeys(rec["members"], region))
    unused = sorted(set(arrays) - dec.used)
    if unused:
        raise FrontendError(f"{shown}: params.npz holds arrays the graph does not name: {brief(unused)} "
                            f"(rule: exactly the arrays network.json declares)")
    net = Network.from_parts(g, net_cfg, regions, source=str(doc["model"].get("source", base))
                             if isinstance(doc["model"], dict) else str(base))
    return net, {k: v for k, v in doc.items() if k != "graph"}
