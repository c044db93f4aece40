"""torchvision's quantizable ResNet-18, MobileNetV2 and MobileNetV3-Large with random weights, quantised here
in eager mode or with FX: the bundled models of ``vtasim torch`` and of the PyTorch tests (no weights are
downloaded).  MobileNetV3 brings hardswish and hardsigmoid (tables) and the squeeze-excitation product (a
broadcasting ``quantized::mul``).

An untrained network's batch-norm layers hold the initial statistics (mean 0, variance 1), which
leave the deep activations collapsed or exploding; :func:`float_model` first sets each layer's running
statistics from random inputs (a forward pass in training mode, cumulative averages), so every layer
sees normalised activations and the int8 ranges calibrated afterwards are neither all zero nor all
clipped.  Inputs (calibration and test) are standard normal, the range of a normalised image.

* eager: ``model.fuse_model()`` (conv-bn-relu), ``qconfig = get_default_qconfig(engine)``,
  ``prepare``, calibration, ``convert``; the quantizable models carry their QuantStub/DeQuantStub and
  FloatFunctional adds.
* fx: ``prepare_fx(model, get_default_qconfig_mapping(engine), example)``, calibration, ``convert_fx``.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["TORCH_MODELS", "QUANT_MODES", "float_model", "quantise", "build", "random_inputs"]

TORCH_MODELS = ("resnet18", "mobilenet_v2", "mobilenet_v3_large")
QUANT_MODES = ("eager", "fx")


def random_inputs(n: int, image: int, seed: int) -> np.ndarray:
    """``n`` standard-normal inputs (n, 3, image, image), float32."""
    return np.random.default_rng(seed).standard_normal((n, 3, image, image)).astype(np.float32)


def float_model(name: str, classes: int = 10, image: int = 32, seed: int = 0):
    """The float quantizable model (``quantize=False``, random weights, eval mode, batch-norm statistics
    set from random inputs)."""
    import torch
    from torchvision.models import quantization as tvq
    if name not in TORCH_MODELS:
        raise ValueError(f"model {name!r} is not one of {', '.join(TORCH_MODELS)}")
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(tvq, name)(weights=None, quantize=False, num_classes=classes)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None                    # a cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for k in range(4):
            model(torch.from_numpy(random_inputs(16, image, seed + 1000 + k)))
    return model.eval()


def quantise(model, mode: str, calibration: np.ndarray, engine: str = "fbgemm"):
    """``model`` (float, eval) quantised in ``mode`` (eager | fx) for PyTorch's ``engine``, calibrated on
    ``calibration`` (N, C, H, W).  Eager mode needs the model's ``fuse_model()`` and quant stubs."""
    import torch
    import torch.ao.quantization as tq
    if mode not in QUANT_MODES:
        raise ValueError(f"quantisation mode {mode!r} is not one of {', '.join(QUANT_MODES)}")
    torch.backends.quantized.engine = engine
    x = torch.from_numpy(np.ascontiguousarray(calibration, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # torch.ao.quantization's deprecation notes
        if mode == "eager":
            model.fuse_model(is_qat=False)
            model.qconfig = tq.get_default_qconfig(engine)
            tq.prepare(model, inplace=True)
            with torch.no_grad():
                model(x)
            return tq.convert(model, inplace=True)
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        prepared = prepare_fx(model, tq.get_default_qconfig_mapping(engine), (x[:1],))
        with torch.no_grad():
            prepared(x)
        return convert_fx(prepared)


def build(name: str, mode: str, image: int = 32, classes: int = 10, seed: int = 0, calibration: int = 32,
          engine: str = "fbgemm"):
    """A bundled model, quantised: (module, input shape (1, 3, image, image))."""
    model = float_model(name, classes, image, seed)
    return quantise(model, mode, random_inputs(calibration, image, seed + 1), engine), (1, 3, image, image)
