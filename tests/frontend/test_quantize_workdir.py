"""Quantising a model leaves the user's working directory as it was.

onnxruntime's symbolic shape inference saves its partial model to the current directory when it
gives up (here: Resize behind a symbolic batch); ``models._onnx.quantize`` must keep that inside its
temporary directory.
"""

import numpy as np
import pytest

from vtasim.compiler.frontend.models._onnx import quantize
from vtasim.compiler.frontend.models.edge import edge_net_float


def test_quantize_writes_nothing_in_the_working_directory(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    calib = np.random.default_rng(1).random((2, 3, 16, 16)).astype(np.float32)
    with pytest.raises(Exception, match="symbolic shape inference"):
        quantize(edge_net_float(), tmp_path / "out" / "m.onnx", calib, "qdq", batch=1, symbolic_shapes=True)
    assert sorted(p.name for p in work.iterdir()) == []
