"""Shared fixtures of the front-end tests: the default config and small generated int8 models."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session", autouse=True)
def network_cache(tmp_path_factory):
    """``vtasim onnx`` caches compiled networks; the tests' go to a private directory, not ~/.cache."""
    import os
    d = tmp_path_factory.mktemp("network-cache")
    old = os.environ.get("VTASIM_NETWORK_CACHE")
    os.environ["VTASIM_NETWORK_CACHE"] = str(d)
    yield d
    if old is None:
        os.environ.pop("VTASIM_NETWORK_CACHE", None)
    else:
        os.environ["VTASIM_NETWORK_CACHE"] = old


@pytest.fixture(scope="session")
def resnet_small(tmp_path_factory):
    """A ResNet-18-shaped int8 QDQ model at 32x32 (every conv shape class, residual adds, head)."""
    from vtasim.compiler.frontend.models.resnet18 import make_resnet18
    return make_resnet18(tmp_path_factory.mktemp("resnet") / "resnet18_32.onnx", image=32, classes=16)


@pytest.fixture(scope="session")
def digits_split():
    from vtasim.compiler.frontend.models.digits import load_split
    return load_split()


@pytest.fixture(scope="session")
def torch_model():
    """``get(name, mode, image=32)``: a bundled torchvision model (conditioned on its synthetic task, 10 classes) quantised in
    ``mode`` for fbgemm, built once per session: (module, input shape)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from vtasim.compiler.frontend.models.torchvision_quant import build
    torch.set_num_threads(1)          # two cores shared: PyTorch's thread pool only contends
    cache = {}

    def get(name, mode, image=32):
        if (name, mode, image) not in cache:
            cache[name, mode, image] = build(name, mode, image=image, classes=10, seed=0, calibration=32)
        return cache[name, mode, image]
    return get
