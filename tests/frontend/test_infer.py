"""Compiled networks: ``vtasim onnx --compile-only`` then ``vtasim infer`` in new processes gives the
one-shot run's outputs and cycles; tampered networks are refused in one line; the compile cache is hit;
data sets split across Dask workers give the single-process results; an interrupted run resumes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from cli_checks import one_line_error as _one_line_error

from vtasim.compiler.frontend.models import DIGITS_QDQ


def _vtasim(*args, env=None):
    r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", *map(str, args)], capture_output=True, text=True,
                       timeout=900, env={**os.environ, **(env or {})})
    return r.returncode, r.stdout, r.stderr


def _ok(*args, env=None) -> str:
    rc, out, err = _vtasim(*args, env=env)
    assert rc == 0, err + out
    return out


@pytest.fixture(scope="module")
def net_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("compiled") / "digits"
    out = _ok("onnx", DIGITS_QDQ, "--compile-only", "--out", d)
    assert "2 VTA region(s)" in out
    return d


@pytest.fixture(scope="module")
def inputs(digits_split, tmp_path_factory):
    x = digits_split[2][:3]                      # three test images, a (3, 1, 8, 8) stack
    p = tmp_path_factory.mktemp("x") / "x.npy"
    np.save(p, x)
    return x[:, None], p


def _fresh(cfg, xs, engine):
    """The one-shot path in this process: import, passes, partition, compile, run."""
    from vtasim.compiler.frontend.network import Network
    net = Network.from_onnx(DIGITS_QDQ, cfg)
    ys, cycles = [], []
    for x in xs:
        y, recs = net.run(x, engine=engine)
        ys.append(y)
        cycles.append(sum(r.cycles for r in recs if r.target == "vta"))
    return np.stack(ys), cycles


def test_saved_network_runs_like_the_one_shot_command(net_dir, inputs, cfg, tmp_path):
    x, xp = inputs
    ys, cycles = _fresh(cfg, x, "cycle")
    assert ys.std() > 0.5 and not np.array_equal(ys[0], ys[1])      # real, distinct outputs
    yp = tmp_path / "y.npy"
    out = _ok("infer", net_dir, "--input", xp, "--engine", "cycle", "--outputs", yp)
    got = np.load(yp)
    assert got.dtype == ys.dtype and np.array_equal(got, ys)
    assert f"total {sum(cycles):,} over 3 input(s)" in out
    # the one-shot command, compiling afresh, prints the same cycles for the first input
    one = _ok("onnx", DIGITS_QDQ, "--input", xp, "--limit", "1", "--engine", "cycle", "--no-cache")
    assert f"{cycles[0]:,} cycles" in one
    # and the numpy reference of the loaded network agrees with the engine's bytes
    rp = tmp_path / "r.npy"
    _ok("infer", net_dir, "--input", xp, "--engine", "reference", "--outputs", rp)
    assert np.array_equal(np.load(rp), ys)
    # mutation: flipped weight bits in a saved image must change the outputs (the check can fail)
    bad = tmp_path / "bad"
    shutil.copytree(net_dir, bad)
    seg = next(p for p in sorted((bad / "regions").glob("*conv1/0/seg*.bin")) if p.stat().st_size == 32 * 16 * 9)
    seg.write_bytes(bytes(b ^ 1 for b in seg.read_bytes()))     # conv1's 32x16x3x3 kernel, each weight +-1
    _ok("infer", bad, "--input", xp, "--engine", "cycle", "--outputs", yp, "--no-reference")
    assert not np.array_equal(np.load(yp), ys)


def _rewrite_npz(path, change):
    arrays = dict(np.load(path, allow_pickle=False))
    change(arrays)
    path.unlink()
    np.savez(path, **arrays)


def _first_weight_key(net: str) -> str:
    doc = json.loads(open(f"{net}/network.json").read())
    node = next(n for n in doc["graph"]["nodes"] if n["target"] == "vta")
    return node["attrs"]["weight"]["$array"]


def _change_weight(d, change):
    key = _first_weight_key(d)

    def edit(arrays):
        arrays[key] = change(arrays[key])
    _rewrite_npz(d / "params.npz", edit)


def _edit_json(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


TAMPER = {
    "bad JSON": (lambda d: (d / "network.json").write_text((d / "network.json").read_text()[:500]), "not valid JSON"),
    "wrong shape": (lambda d: _change_weight(d, lambda w: w.reshape(-1)), "the graph declares"),
    "wrong dtype": (lambda d: _change_weight(d, lambda w: w.astype(np.int16)), "the graph declares"),
    "extra array": (lambda d: _rewrite_npz(d / "params.npz", lambda a: a.__setitem__("zz", np.zeros(3))),
                    "does not name"),
    "pickled array": (lambda d: _rewrite_npz(d / "params.npz", lambda a: a.__setitem__(
        "zz", np.array([{"x": 1}], dtype=object))), "no pickle"),
    "symlink": (lambda d: (os.rename(d / "params.npz", d / "p2.npz"), os.symlink(d / "p2.npz", d / "params.npz")),
                "symlink"),
    "oversized": (lambda d: os.truncate(d / "params.npz", (1 << 30) + 1), "more than MAX_PARAMS_BYTES"),
    "oversized json": (lambda d: os.truncate(d / "network.json", (64 << 20) + 1), "more than MAX_JSON_BYTES"),
    "missing params": (lambda d: os.unlink(d / "params.npz"), "params.npz"),
    "missing image": (lambda d: shutil.rmtree(next((d / "regions").iterdir())), "image.json"),
    "unknown key": (lambda d: _edit_json(d / "network.json", lambda doc: doc.__setitem__("extra", 1)), "unknown"),
    "bad target": (lambda d: _edit_json(d / "network.json", lambda doc: doc["graph"]["nodes"][0].__setitem__(
        "target", "gpu")), "host or vta"),
    "no region": (lambda d: _edit_json(d / "network.json", lambda doc: doc["regions"].popitem()), "one region per"),
    "out of order": (lambda d: _edit_json(d / "network.json", lambda doc: doc["graph"]["nodes"].reverse()),
                     "topological"),
    "edge": (lambda d: _edit_json(d / "network.json", lambda doc: next(iter(doc["regions"].values()))["edge"]
                                  .__setitem__("in_shift", 128)), "does not match"),
    "segment size": (lambda d: next(iter(sorted((d / "regions").glob("*/0/seg000*.bin")))).write_bytes(b"\0" * 3),
                     "image"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_tampered_network_is_refused_in_one_line(net_dir, inputs, tmp_path, case):
    bad = tmp_path / "net"
    shutil.copytree(net_dir, bad)
    tamper, fragment = TAMPER[case]
    tamper(bad)
    _one_line_error(*_vtasim("infer", bad, "--input", inputs[1], "--engine", "reference")[::2], fragment)


def test_compile_cache_is_hit_on_the_second_run(inputs, tmp_path):
    cache = tmp_path / "cache"
    args = ("onnx", DIGITS_QDQ, "--input", inputs[1], "--engine", "functional", "--cache-dir", cache)
    first = _ok(*args)
    assert "network: compiled, stored in" in first and "cache hit" not in first
    second = _ok(*args)
    assert f"network: cache hit {cache}" in second
    strip = [ln for ln in first.splitlines() if not ln.startswith("network") and "wall" not in ln]
    assert strip == [ln for ln in second.splitlines() if not ln.startswith("network") and "wall" not in ln]
    # another compile option is another entry
    third = _ok(*args, "--all-convs")
    assert "network: compiled, stored in" in third
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 2
    # the environment variable names the cache when no option does
    env_out = _ok(*args[:-2], env={"VTASIM_NETWORK_CACHE": str(cache)})
    assert f"network: cache hit {cache}" in env_out
    # a damaged entry is compiled again and replaced, with the same results
    entry = next(p for p in cache.iterdir() if (p / "params.npz").exists() and f"{p.name}" in second)
    (entry / "params.npz").write_bytes(b"PK garbage")
    again = _ok(*args)
    assert "does not load" in again and "network: compiled, stored in" in again
    assert strip == [ln for ln in again.splitlines() if not ln.startswith("network") and "wall" not in ln]
    assert f"network: cache hit {entry}" in _ok(*args)


def _records(path):
    lines = path.read_text().splitlines()
    return json.loads(lines[0]), sorted((json.loads(ln) for ln in lines[1:]), key=lambda r: r["index"])


def _summary(out):
    return [ln for ln in out.splitlines() if ln.startswith(("cycles per input", "vs onnxruntime", "accuracy"))]


def test_dataset_on_two_workers_gives_the_single_process_results(net_dir, tmp_path):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    a = _ok("infer", net_dir, "--dataset", "digits", "--limit", "16", "--results", one)
    b = _ok("infer", net_dir, "--dataset", "digits", "--limit", "16", "--results", two, "--workers", "2")
    assert "local cluster of 2 worker processes" in b
    ha, ra = _records(one)
    hb, rb = _records(two)
    assert ha == hb and ra == rb and [r["index"] for r in ra] == list(range(16))
    assert len({r["top"][0] for r in ra}) > 3 and all(r["cycles"] > 0 for r in ra)
    assert _summary(a) == _summary(b) and len(_summary(a)) == 3


def test_interrupted_dataset_run_resumes_computing_only_missing_inputs(net_dir, tmp_path):
    res = tmp_path / "r.jsonl"
    _ok("infer", net_dir, "--dataset", "digits", "--limit", "12", "--engine", "functional", "--results", res)
    header, full = _records(res)
    lines = res.read_text().splitlines(keepends=True)
    res.write_text("".join(lines[:6]) + lines[6][:20])          # header, 5 records and a torn sixth
    out = _ok("infer", net_dir, "--dataset", "digits", "--limit", "12", "--engine", "functional", "--results", res)
    assert "12, 5 already in" in out and "7 to run" in out and "7 computed" in out
    h2, again = _records(res)
    assert h2 == header and again == full
    out = _ok("infer", net_dir, "--dataset", "digits", "--limit", "12", "--engine", "functional", "--results", res)
    assert "0 to run" in out
    # another engine on the same file is refused: its records would mix
    _one_line_error(*_vtasim("infer", net_dir, "--dataset", "digits", "--limit", "12", "--engine", "reference",
                             "--results", res)[::2], "engine")


def test_user_npz_dataset_with_preprocessing(net_dir, digits_split, tmp_path):
    x, y = digits_split[2][:8], digits_split[3][:8]
    data = tmp_path / "d.npz"
    np.savez(data, x=(x * 2 + 1).transpose(0, 2, 3, 1), y=y)           # NHWC, affine-shifted
    ref, got = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _ok("infer", net_dir, "--dataset", "digits", "--limit", "8", "--engine", "functional", "--results", ref)
    _ok("infer", net_dir, "--dataset", data, "--engine", "functional", "--results", got, "--layout", "nhwc",
        "--scale", "0.5", "--mean", "0.5")
    assert [r["digest"] for r in _records(ref)[1]] == [r["digest"] for r in _records(got)[1]]
    bad = tmp_path / "bad.npz"
    np.savez(bad, images=x)
    _one_line_error(*_vtasim("infer", net_dir, "--dataset", bad)[::2], "no array x")


def test_load_npz_bounds(tmp_path):
    from vtasim.hw.files import load_npz
    p = tmp_path / "a.npz"
    np.savez_compressed(p, big=np.zeros(1 << 20, np.uint8), small=np.arange(3))
    assert load_npz(p, "t", 2 << 20)["small"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="more than"):
        load_npz(p, "t", 1 << 19)          # the compressed file is small; its declared content is not


def test_images_of_one_layer_share_the_decoded_program(net_dir):
    """Only the input segment changes per input: the cycle engine decodes a layer's program once."""
    from vtasim.compiler.frontend.netfile import load_network
    from vtasim.sim.cycle.engine import cached_program
    net, _ = load_network(net_dir)
    layer = net.regions["conv1"].layer
    rng = np.random.default_rng(0)
    a, b = (layer.image(rng.integers(-128, 128, layer.in_shape).astype(np.int8), expected=False) for _ in range(2))
    assert a is not b and a.segments != b.segments
    assert cached_program(a) is cached_program(b)
    c = layer.image(np.zeros(layer.in_shape, np.int8), expected=False)
    k = next(i for i, s in enumerate(c.segments) if s.addr == c.insn_addr)
    seg = c.segments[k]
    data = seg.data[16:32] + seg.data[:16] + seg.data[32:]           # the first two instructions swapped
    c.segments[k] = type(seg)(seg.addr, data)
    assert c.insn_bytes() != a.insn_bytes()
    assert cached_program(c) is not cached_program(a)


@pytest.mark.parametrize("args, fragment", [
    (("--limit", "0"), "--limit 0"),
    (("--scale", "2"), "preprocess a --dataset"),
    (("--dataset", "digits", "--mean", "a,b"), "--mean 'a,b'"),
    (("--dataset", "digits", "--std", "0"), "std non-zero"),
    (("--dataset", "digits", "--mean", "1,2"), "one per channel"),
    (("--dataset", "nosuch"), "not one of digits"),
    (("--outputs", "y.npy", "--workers", "2"), "--outputs"),
])
def test_bad_infer_options_are_one_line(net_dir, inputs, tmp_path, args, fragment):
    extra = () if "--dataset" in args else ("--input", inputs[1])
    _one_line_error(*_vtasim("infer", net_dir, *extra, *args, "--engine", "reference")[::2], fragment)


def test_compile_only_refuses_run_options(tmp_path, inputs):
    _one_line_error(*_vtasim("onnx", DIGITS_QDQ, "--compile-only")[::2], "--out NET")
    _one_line_error(*_vtasim("onnx", DIGITS_QDQ, "--compile-only", "--out", tmp_path / "n", "--input",
                             inputs[1])[::2], "--input")
    _one_line_error(*_vtasim("onnx", DIGITS_QDQ, "--out", tmp_path / "n")[::2], "--compile-only")


@pytest.mark.parametrize("model", ["digits_qop", "digits_fixed", "edge16", "resnet_small"])
def test_round_trip_of_every_region_kind(model, cfg, tmp_path, request):
    """Depthwise and grouped convs (the edge net at c=16), QOperator files, a ResNet with residual adds on
    the host: saved and reloaded, the network gives the fresh one's bytes and cycles."""
    from vtasim.compiler.frontend.inputs import load_feeds
    from vtasim.compiler.frontend.models import DIGITS_QOP
    from vtasim.compiler.frontend.models.edge import make_edge_net
    from vtasim.compiler.frontend.netcache import compile_key, compile_network
    from vtasim.compiler.frontend.netfile import load_network
    from vtasim.compiler.frontend.network import Network
    path = {"digits_qop": lambda: DIGITS_QOP, "digits_fixed": lambda: DIGITS_QOP,
            "edge16": lambda: make_edge_net(tmp_path / "e.onnx", c=16),
            "resnet_small": lambda: request.getfixturevalue("resnet_small")}[model]()
    options = {"requant": "fixed", "skip_first_conv": False} if model == "digits_fixed" else {}
    data = path.read_bytes()
    _, meta = compile_key(data, cfg, options)
    compile_network(path, data, cfg, options, meta, tmp_path / "net")
    loaded, _ = load_network(tmp_path / "net", cfg)
    fresh = Network.from_onnx(path, cfg, **options)
    if model == "digits_fixed":
        assert all(r.plan.path == "fixed" for r in loaded.regions.values())
    assert len(loaded.regions) == len(fresh.regions) >= 2
    if model == "edge16":
        assert any(n.attrs.get("group", 1) > 1 for n in loaded.graph.nodes if n.target == "vta")
    feeds, _, _ = load_feeds(fresh.graph, None, None, seed=3)
    for engine in ("reference", "cycle"):
        (ya, ra), (yb, rb) = fresh.run(feeds[0], engine=engine), loaded.run(feeds[0], engine=engine)
        assert ya.dtype == yb.dtype and np.array_equal(ya, yb) and np.std(ya) > 0
        assert [r.cycles for r in ra] == [r.cycles for r in rb]


# ---- multi-op regions in a compiled network ---------------------------------------------------------
@pytest.fixture(scope="module")
def resnet_net(resnet_small, tmp_path_factory):
    """The reduced ResNet-18 compiled in the default multi mode (its body one chain region), and an input."""
    d = tmp_path_factory.mktemp("resnet-net")
    x = np.random.default_rng(7).random((1, 3, 32, 32), np.float32)
    np.save(d / "x.npy", x)
    _ok("onnx", resnet_small, "--compile-only", "--out", d / "net")
    return d / "net", x, d / "x.npy"


def _table(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("layer "))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("total (VTA regions)"))
    return lines[start:end + 1]


def _chain_record(d):
    doc = json.loads((d / "network.json").read_text())
    (name, rec), = ((k, r) for k, r in doc["regions"].items() if r["kind"] == "chain")
    return doc, name, rec


def test_multi_op_network_reloads_with_the_one_shot_outputs_table_and_cycles(resnet_net, resnet_small, cfg, tmp_path):
    """Compiled in one process, run in another: the one-shot ``vtasim onnx``'s per-layer table (every member of
    the body with its share of the launch's cycles) and cycles; the in-process fresh network's bytes."""
    from vtasim.compiler.frontend.network import Network
    d, x, xp = resnet_net
    doc, name, rec = _chain_record(d)
    assert doc["options"]["region_mode"] == "multi" and len(rec["members"]) == 27 and len(rec["images"]) == 1
    assert len(doc["regions"]) == 2                                     # the body and the dense head
    yp = tmp_path / "y.npy"
    inf = _ok("infer", d, "--input", xp, "--engine", "cycle", "--outputs", yp)
    one = _ok("onnx", resnet_small, "--input", xp, "--engine", "cycle", "--no-cache")
    fresh = Network.from_onnx(resnet_small, cfg)
    y, recs = fresh.run(x, engine="cycle")
    got = np.load(yp)
    assert got.dtype == y.dtype and np.array_equal(got, y[None] if got.ndim > y.ndim else y) and np.std(y) > 0
    cycles = sum(r.cycles for r in recs if r.target == "vta")
    assert f"total {cycles:,} over 1 input(s)" in inf and f"{cycles:,} cycles" in one
    table = _table(one)
    assert table == _table(inf)
    body = [ln for ln in table if ln.split()[1:3] in (["qconv", "vta"], ["qadd", "vta"])]
    assert len(body) >= 27 and len({ln.split()[5] for ln in body}) > 5      # per-member shares, not one figure
    # the loaded chain's numpy reference gives the engine's bytes too
    rp = tmp_path / "r.npy"
    _ok("infer", d, "--input", xp, "--engine", "reference", "--outputs", rp, "--no-reference")
    assert np.array_equal(np.load(rp), got)


def test_corrupt_weight_byte_in_a_chain_image_changes_the_outputs(resnet_net, cfg, tmp_path):
    """Mutation: one byte of the last convolution's kernel in the saved chain image: the reloaded network's
    outputs are no longer the compiled one's (the reload-equality check can fail)."""
    from vtasim.compiler.frontend.netfile import load_network
    d, x, xp = resnet_net
    net, _ = load_network(d, cfg)
    (chain,) = {id(r): r for r in net.regions.values() if hasattr(r, "nodes")}.values()
    y, _ = net.run(x, engine="functional")
    last = next(m for m in reversed(chain._built["members"]) if m.nodes[0].op == "qconv")
    w = last.layer.weight
    assert w.ndim == 4
    bad = tmp_path / "bad"
    shutil.copytree(d, bad)
    _, name, rec = _chain_record(bad)
    img = json.loads((bad / rec["images"][0]["dir"] / "image.json").read_text())
    sizes = {s["file"]: (bad / rec["images"][0]["dir"] / s["file"]).stat().st_size for s in img["segments"]}
    kernel = w.shape[0] * w.shape[1] * w.shape[2] * w.shape[3]
    seg = bad / rec["images"][0]["dir"] / max(f for f, n in sizes.items() if n == kernel)
    data = bytearray(seg.read_bytes())
    data[0] ^= 0x7F
    seg.write_bytes(bytes(data))
    worse, _ = load_network(bad, cfg)
    y_bad, _ = worse.run(x, engine="functional")
    assert not np.array_equal(y_bad, y)


def _set_edge(index, key, change):
    def edit(doc):
        rec = next(r for r in doc["regions"].values() if r["kind"] == "chain")
        e = rec["edge"][index]
        e[key] = change(e[key])
    return edit


def _first_conv_kernel(doc) -> dict:
    rec = next(r for r in doc["regions"].values() if r["kind"] == "chain")
    return next(k["conv"] for k in rec["images"][0]["state"]["kernels"] if k["conv"] is not None)


def _tuple_first(t, f):
    return {"$tuple": [f(t["$tuple"][0])] + t["$tuple"][1:]}


CHAIN_TAMPER = {
    "edge address": (_set_edge(0, "addr", lambda a: a + 16), "the input segment"),
    "edge shape": (_set_edge(0, "shape", lambda t: _tuple_first(t, lambda n: n + 1)), "the graph's NCHW shape"),
    "output address": (_set_edge(-1, "addr", lambda a: a + 16), "the output region"),
    "members": (lambda doc: next(r for r in doc["regions"].values() if r["kind"] == "chain")["members"].pop(),
                "one region per VTA node"),
    "kind": (lambda doc: doc["options"].__setitem__("region_mode", "single"), "in region_mode single"),
    "conv zero point": (lambda doc: _first_conv_kernel(doc).__setitem__("za", _first_conv_kernel(doc)["za"] + 1),
                        "zero point / requantisation steps differ"),
    "kernel range": (lambda doc: next(r for r in doc["regions"].values() if r["kind"] == "chain")["images"][0]
                     ["state"]["kernels"][1].__setitem__("insns", {"$tuple": [0, 5]}), "increasing range"),
}


@pytest.mark.parametrize("case", sorted(CHAIN_TAMPER) + ["missing image"])
def test_tampered_chain_region_is_refused_in_one_line(resnet_net, tmp_path, case):
    d, _, xp = resnet_net
    bad = tmp_path / "net"
    shutil.copytree(d, bad)
    if case == "missing image":
        _, _, rec = _chain_record(bad)
        shutil.rmtree(bad / rec["images"][0]["dir"])
        fragment = "image.json"
    else:
        change, fragment = CHAIN_TAMPER[case]
        _edit_json(bad / "network.json", change)
    _one_line_error(*_vtasim("infer", bad, "--input", xp, "--engine", "reference", "--no-reference")[::2], fragment)


def test_single_mode_network_round_trips_and_is_another_cache_entry(resnet_small, resnet_net, cfg, tmp_path):
    """``--regions single``: every convolution its own qlayer region, the adds on the host; the reloaded run
    gives the multi-mode network's bytes (the VTA add equals the host's), and the mode is part of the key."""
    from vtasim.compiler.frontend.netcache import compile_key
    d, x, xp = resnet_net
    _ok("onnx", resnet_small, "--compile-only", "--out", tmp_path / "single", "--regions", "single")
    doc = json.loads((tmp_path / "single" / "network.json").read_text())
    assert doc["options"]["region_mode"] == "single" and len(doc["regions"]) == 20      # 19 convs, the head
    assert {r["kind"] for r in doc["regions"].values()} == {"qlayer"}
    ys, ym = tmp_path / "s.npy", tmp_path / "m.npy"
    _ok("infer", tmp_path / "single", "--input", xp, "--engine", "functional", "--outputs", ys, "--no-reference")
    _ok("infer", d, "--input", xp, "--engine", "functional", "--outputs", ym, "--no-reference")
    assert np.array_equal(np.load(ys), np.load(ym)) and np.std(np.load(ys)) > 0
    data = resnet_small.read_bytes()
    keys = {m: compile_key(data, cfg, {"region_mode": m})[0] for m in ("multi", "single")}
    assert keys["multi"] != keys["single"] and compile_key(data, cfg, {})[0] == keys["multi"]


def test_edge_bytes_of_a_reloaded_single_mode_network(cfg, tmp_path):
    """``--regions single``: the reloaded network's single-op regions count the host<->VTA bytes the freshly
    compiled ones do (the restored layer keeps no output buffer: the bytes come from the image)."""
    from vtasim.compiler.frontend.inputs import load_feeds
    from vtasim.compiler.frontend.netfile import load_network
    from vtasim.compiler.frontend.network import Network
    from vtasim.compiler.frontend.region import VtaRegion
    from vtasim.compiler.frontend.report import edge_bytes
    _ok("onnx", DIGITS_QDQ, "--compile-only", "--out", tmp_path / "single", "--regions", "single")
    loaded, _ = load_network(tmp_path / "single", cfg)
    fresh = Network.from_onnx(DIGITS_QDQ, cfg, region_mode="single")
    feeds, _, _ = load_feeds(fresh.graph, None, None, seed=3)
    fresh.run(feeds[0], engine="reference")                     # compiles the fresh regions
    assert all(isinstance(r, VtaRegion) for r in loaded.regions.values()) and loaded.region_count >= 2
    for name, r in fresh.regions.items():
        b = r.layer.built.buffers
        assert loaded.regions[name].edge_bytes() == {"in": b["data"].nbytes, "out": b[r.layer.output.name].nbytes}
    got = edge_bytes(loaded.regions)
    assert got == edge_bytes(fresh.regions) and got["in"] > 0 and got["out"] > 0
