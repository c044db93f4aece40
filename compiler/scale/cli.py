"""``vtasim sweep SPEC`` and ``vtasim dse RESULTS`` (added to the parser by :func:`vtasim.compiler.cli.add_commands`).

::

    vtasim sweep sweep.toml --out runs/sweep.csv --workers 2          # a LocalCluster of 2 processes
    vtasim sweep sweep.toml --out runs/sweep.csv --scheduler tcp://10.0.0.5:8786
    vtasim sweep sweep.toml --out runs/sweep.csv --scheduler-file ~/dask-scheduler.json
    vtasim sweep sweep.toml --scheduler tls://10.0.0.5:8786 --tls-ca ca.pem --tls-cert me.pem --tls-key me.key
    vtasim dse runs/sweep.csv --out runs/dse                          # front.csv + PNGs
"""

from __future__ import annotations

from pathlib import Path

from vtasim.hw.outfiles import check_out
from vtasim.sim.scale.cluster import add_cluster_options

__all__ = ["add_scale_commands"]


def cmd_sweep(args) -> int:
    from vtasim.compiler.scale.runner import run_sweep
    from vtasim.compiler.scale.spec import load_spec
    from vtasim.sim.scale.cluster import check_workers, cluster_opts, cluster_option, require_cluster, security_from
    from vtasim.sim.scale.handshake import check_timeout
    require_cluster(f"vtasim sweep (on Dask, {cluster_option(args)})")
    check_workers(args.workers, args.force_workers)
    check_timeout(args.connect_timeout)
    spec = load_spec(args.spec)
    check_out(args.out, "--out results file")      # before the cluster starts: no write through a link
    counts = run_sweep(spec, args.out, workers=args.workers, scheduler=args.scheduler,
                       scheduler_file=args.scheduler_file, processes=not args.threads,
                       security=security_from(args.tls_ca, args.tls_cert, args.tls_key),
                       cluster_opts=cluster_opts(args))
    return 1 if counts["lost"] else 0


def cmd_dse(args) -> int:
    from vtasim.compiler.scale.pareto import run_dse
    run_dse(args.results, args.out)
    return 0


def add_scale_commands(sub) -> None:
    p = sub.add_parser("sweep", help="design-space sweep on Dask: configs x workloads -> results CSV (resumable)")
    p.add_argument("spec", type=Path, help="sweep spec (.toml or .json): [grid]/[sample]/[[points]], workloads, knobs")
    p.add_argument("--out", type=Path, default=Path("runs/sweep.csv"),
                   help="results CSV, appended as points finish; a rerun skips the points already in it")
    add_cluster_options(p, default_workers=2)
    p.add_argument("--threads", action="store_true", help="local cluster of threads in this process (debugging)")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("dse", help="Pareto fronts (cycles vs area proxy), sensitivity plots and a front table")
    p.add_argument("results", type=Path, help="results CSV of vtasim sweep")
    p.add_argument("--out", type=Path, default=Path("runs/dse"), help="directory for front.csv and the PNGs")
    p.set_defaults(func=cmd_dse)
