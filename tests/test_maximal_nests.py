"""The largest legal loop nests (iteration fields at their maximum, every iteration on the same rows;
``vtasim.sim.programs.synthetic.maximal_nest_image``): the functional engine (its numpy executor) runs them under a 2 GiB
address-space limit and stores the same bytes as the cycle engine (the independent reference).
CI runs one-uop nests of the two ALU kinds; the slow set runs the issue's 8-uop nests of every kind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vtasim.hw.config import load_config
from vtasim.sim.programs.synthetic import MAXIMAL_KINDS, maximal_nest_image

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 2 << 30


def _functional_under_limit(kind: str, uops: int) -> dict:
    script = "\n".join([
        "import json, resource, sys",
        f"sys.path.insert(0, {str(ROOT)!r})",
        f"resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))",
        "from vtasim.hw.config import load_config",
        "from vtasim.sim.functional import run_image",
        "from vtasim.sim.programs.synthetic import maximal_nest_image",
        f"r = run_image(maximal_nest_image(load_config(), {kind!r}, uops={uops}), executor='numpy')",
        "print(json.dumps({'y': r.outputs['y'].hex(), 'counters': r.counters}))"])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check(kind: str, uops: int) -> None:
    from vtasim.sim.cycle import run_image
    cfg = load_config()
    got = _functional_under_limit(kind, uops)
    want = run_image(maximal_nest_image(cfg, kind, uops=uops))
    n = 16383 * 16383 * uops
    assert got["counters"]["gemm_counter" if kind == "gemm" else "alu_counter"] == n
    assert got["counters"] == want.counters
    assert bytes.fromhex(got["y"]) == want.outputs["y"]


@pytest.mark.parametrize("kind", ["alu-imm", "alu-vec"])
def test_one_uop_maximal_alu_nests(kind):
    _check(kind, 1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", MAXIMAL_KINDS)
def test_eight_uop_maximal_nests(kind):
    _check(kind, 8)
