"""Compiled networks: compile once, run many.  Three tables from one run, each side measured here:

1. compile vs cache: ``vtasim onnx``'s network step when the cache misses (import, passes, partition,
   compile every region, save) and when it hits (load the compiled network), in this process, and the
   time a new ``vtasim onnx --engine reference --input X`` process reports before its first input;
2. per-input time of a loaded network (functional and cycle engines; VTA regions + host ops) against
   onnxruntime on the same model (1 thread), medians;
3. data-set evaluation on Dask: inputs/s on one process and on a local cluster of 2 workers (each
   worker warmed up first: network loaded, engine JIT loaded), parallel efficiency = rate2 / (2 rate1),
   and the whole ``vtasim infer --workers 2`` wall (cluster start included) against ``vtasim infer``.

::

    python bench/compiled_network.py                   # digits and the 5-layer VGG-style net
    python bench/compiled_network.py --inputs 64 --engine cycle

The machine may be shared: the efficiency is what this run saw (the load is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _median(f, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _cli(*args, env=None) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "vtasim.sim.cli", *map(str, args)], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    if r.returncode:
        raise SystemExit(r.stderr)
    return time.perf_counter() - t0, r.stdout


def compile_table(models: dict, tmp: Path) -> None:
    print("1. compile vs cache: vtasim onnx MODEL --input X --engine reference, twice, each in a new process")
    print(f"  {'model':<8} {'network step, miss':>19} {'hit':>8} {'ratio':>7} {'process wall miss / hit':>25}")
    for name, path in models.items():
        cache = tmp / f"cache-{name}"
        x = tmp / f"{name}_x.npy"
        np.save(x, np.random.default_rng(0).random(_input_shape(path), np.float32))
        steps, walls = [], []
        for want in ("compiled, stored", "cache hit"):
            wall, out = _cli("onnx", path, "--input", x, "--engine", "reference", "--cache-dir", cache)
            m = re.search(rf"network: {want} .*\(([0-9.]+) s\)", out)
            if m is None:
                raise SystemExit(f"{name}: no 'network: {want}' line in:\n{out}")
            steps.append(float(m.group(1)))
            walls.append(wall)
        print(f"  {name:<8} {steps[0]:>17.2f} s {steps[1]:>6.2f} s {steps[0] / steps[1]:>6.0f}x "
              f"{walls[0]:>13.1f} s / {walls[1]:.1f} s")


def _input_shape(model) -> tuple:
    import onnx
    m = onnx.load(str(model))
    return tuple(d.dim_value or 1 for d in m.graph.input[0].type.tensor_type.shape.dim)


def per_input_table(nets: dict, repeat: int) -> None:
    from vtasim.compiler.frontend.compare import OrtReference
    print(f"\n2. per-input time of a loaded network vs onnxruntime (median of {repeat})")
    print(f"  {'model':<8} {'onnxruntime':>12} {'functional':>11} {'x':>6} {'cycle':>9} {'x':>6} {'cycles':>9}")
    for name, (_, net, model) in nets.items():
        shape, _ = net.graph.inputs[net.input_name]
        x = np.random.default_rng(1).random(shape, np.float32)
        ort = OrtReference(model)
        ort.run(x)
        t_ort = _median(lambda o=ort, x=x: o.run(x), repeat * 10)
        row = []
        for engine in ("functional", "cycle"):
            net.run(x, engine=engine)
            row.append(_median(lambda e=engine, n=net, x=x: n.run(x, engine=e), repeat))
        _, recs = net.run(x, engine="cycle")
        cyc = sum(r.cycles for r in recs if r.target == "vta")
        print(f"  {name:<8} {t_ort * 1e3:>9.3f} ms {row[0] * 1e3:>8.2f} ms {row[0] / t_ort:>5.0f}x "
              f"{row[1] * 1e3:>6.2f} ms {row[1] / t_ort:>5.0f}x {cyc:>9,}")


def dask_table(nets: dict, n: int, engine: str, tmp: Path) -> None:
    from vtasim.compiler.frontend.evaluate import evaluate_chunk
    from vtasim.sim.scale.cluster import dask_client
    print(f"\n3. data-set evaluation, {n} inputs, engine {engine}, onnxruntime reference per input; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"  {'model':<8} {'1 proc in/s':>12} {'2 workers in/s':>15} {'efficiency':>11} "
          f"{'infer wall 1 / 2 workers':>26}")
    for name, (net_dir, net, _) in nets.items():
        shape, _ = net.graph.inputs[net.input_name]
        xs = np.random.default_rng(2).random((n,) + tuple(shape), np.float32)
        idx = list(range(n))
        evaluate_chunk(str(net_dir), engine, True, idx[:2], xs[:2], None)      # warm: load, JIT
        t0 = time.perf_counter()
        one = evaluate_chunk(str(net_dir), engine, True, idx, xs, None)
        r1 = n / (time.perf_counter() - t0)
        with dask_client(workers=2, log=lambda s: None, what="bench") as client:
            warm = [client.submit(evaluate_chunk, str(net_dir), engine, True, idx[:1], xs[:1], None, pure=False,
                                  workers=[w]) for w in client.scheduler_info()["workers"]]
            client.gather(warm)
            chunks = [idx[k:k + max(1, n // 8)] for k in range(0, n, max(1, n // 8))]
            t0 = time.perf_counter()
            futs = [client.submit(evaluate_chunk, str(net_dir), engine, True, c, xs[c], None, pure=False)
                    for c in chunks]
            two = [r for f in futs for r in f.result()]
            r2 = n / (time.perf_counter() - t0)
        assert sorted(two, key=lambda r: r["index"]) == one
        data = tmp / f"{name}.npz"
        np.savez(data, x=xs[:, 0])
        w1, _ = _cli("infer", net_dir, "--dataset", data, "--engine", engine)
        w2, _ = _cli("infer", net_dir, "--dataset", data, "--engine", engine, "--workers", "2")
        print(f"  {name:<8} {r1:>12.1f} {r2:>15.1f} {r2 / (2 * r1):>11.2f} {w1:>12.1f} s / {w2:.1f} s")


def main(argv=None) -> int:
    from vtasim.compiler.frontend.models import DIGITS_QDQ
    from vtasim.compiler.frontend.models.vgg import make_vgg5
    from vtasim.compiler.frontend.netcache import compile_key, compile_network
    from vtasim.compiler.frontend.netfile import load_network
    from vtasim.hw.config import load_config
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=128, help="inputs of the Dask table")
    ap.add_argument("--engine", default="cycle", choices=("functional", "cycle"))
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    cfg = load_config(None)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        models = {"digits": DIGITS_QDQ, "vgg5": make_vgg5(tmp / "vgg5.onnx")}
        compile_table(models, tmp)
        nets = {}
        for name, path in models.items():
            data = path.read_bytes()
            _, meta = compile_key(data, cfg, {})
            compile_network(path, data, cfg, {}, meta, tmp / f"net-{name}")
            nets[name] = (tmp / f"net-{name}", load_network(tmp / f"net-{name}")[0], path)
        per_input_table(nets, args.repeat)
        dask_table(nets, args.inputs, args.engine, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
