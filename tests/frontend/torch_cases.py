"""Small quantised PyTorch models for the PyTorch front-end tests (``tiny`` is also a
``package.module:function`` for ``vtasim torch``)."""

from __future__ import annotations

import warnings

import torch

from vtasim.compiler.frontend.models.torchvision_quant import random_inputs


class Tiny(torch.nn.Module):
    """QuantStub, conv-bn-relu, a conv-relu, max-pool, a FloatFunctional add, global pooling, a linear head,
    DeQuantStub: each op kind of the importer's table on a model that builds in a second."""

    def __init__(self, extra=None):
        super().__init__()
        nn = torch.nn
        self.quant, self.dequant = torch.ao.quantization.QuantStub(), torch.ao.quantization.DeQuantStub()
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()
        self.conv2, self.relu2 = nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.add = torch.ao.nn.quantized.FloatFunctional()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)
        self.extra = extra

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(self.quant(x))))
        x = self.pool(self.add.add(x, self.relu2(self.conv2(x))))
        y = self.dequant(self.fc(torch.flatten(self.gap(x), 1)))
        return self.extra(y) if self.extra is not None else y


def tiny(seed: int = 3, extra=None):
    """``Tiny`` quantised in eager mode for fbgemm, calibrated on random 16x16 inputs."""
    import torch.ao.quantization as tq
    torch.manual_seed(seed)
    m = Tiny(extra).eval()
    tq.fuse_modules(m, [["conv1", "bn1", "relu1"], ["conv2", "relu2"]], inplace=True)
    m.qconfig = tq.get_default_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch.ao.quantization's deprecation notes
        tq.prepare(m, inplace=True)
        m(torch.from_numpy(random_inputs(16, 16, seed)))
        return tq.convert(m, inplace=True)


class TinyCat(torch.nn.Module):
    """Two conv branches of different output scales concatenated (FloatFunctional.cat): an Inception join."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.quant, self.dequant = torch.ao.quantization.QuantStub(), torch.ao.quantization.DeQuantStub()
        self.a, self.b = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(3, 16, 1)
        self.cat = torch.ao.nn.quantized.FloatFunctional()
        self.gap, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(32, 10)

    def forward(self, x):
        x = self.quant(x)
        y = self.cat.cat([self.a(x), self.b(x)], dim=1)
        return self.dequant(self.fc(torch.flatten(self.gap(y), 1)))


def tiny_cat(seed: int = 5):
    import torch.ao.quantization as tq
    torch.manual_seed(seed)
    m = TinyCat().eval()
    with torch.no_grad():
        m.b.weight.mul_(4.0)                 # the two branches' ranges (and so scales) differ
    m.qconfig = tq.get_default_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare(m, inplace=True)
        m(torch.from_numpy(random_inputs(16, 16, seed)))
        return tq.convert(m, inplace=True)
