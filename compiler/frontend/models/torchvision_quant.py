"""torchvision's quantizable ResNet-18, MobileNetV2 and MobileNetV3-Large, conditioned on a synthetic task and
quantised here in eager mode or with FX: the bundled models of ``vtasim torch`` and of the PyTorch tests (no
weights or data are downloaded).  MobileNetV3 brings hardswish and hardsigmoid (tables) and the
squeeze-excitation product (a broadcasting ``quantized::mul``).

Why the networks are conditioned.  An untrained network (torchvision's random initialisation) is chaotic:
with batch normalisation every layer rescales whatever varies between inputs to unit size and each ReLU
layer amplifies a perturbation relative to the signal, so a change of 1e-3 of the input moves a random
MobileNetV2's float output by 8 %, and one int8 code moved by a rounding difference flips its top-1 class
as easily as any real difference does.  A trained network is the opposite: it ignores what does not
matter for its task.  So :func:`float_model` conditions the random network the way training does, with
data drawn here:

* the task (:func:`task_inputs`): ``classes`` smooth random colour templates (bicubic-upsampled 4x4 noise);
  an input is one template plus noise (smooth and per-pixel) and is standardised per image (zero mean,
  unit variance, the range of a normalised image);
* ``train_steps`` (default 40) steps of SGD on it from torchvision's random initialisation (0 keeps the
  untrained, chaotic network);
* the batch-norm running statistics recomputed on 64 task inputs (training mode, ``momentum=None``: a
  cumulative average), so each layer sees normalised activations;
* the classifier (the last ``Linear``) refitted in closed form: ridge regression of the centred one-hot
  classes on the features of 256 task inputs, so each input's top-1 class wins by a margin.

The int8 ranges are then calibrated on ``calibration`` task inputs.

* eager: ``model.fuse_model()`` (conv-bn-relu), ``qconfig = get_default_qconfig(engine)``,
  ``prepare``, calibration, ``convert``; the quantizable models carry their QuantStub/DeQuantStub and
  FloatFunctional adds.
* fx: ``prepare_fx(model, get_default_qconfig_mapping(engine), example)``, calibration, ``convert_fx``.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["TORCH_MODELS", "QUANT_MODES", "TRAIN_STEPS", "float_model", "quantise", "build", "random_inputs",
           "task_inputs"]

TORCH_MODELS = ("resnet18", "mobilenet_v2", "mobilenet_v3_large")
QUANT_MODES = ("eager", "fx")
TRAIN_STEPS = 40           # SGD steps on the synthetic task (batch 32)
_BATCH, _LR = 32, 0.05
_RECAL, _FIT, _RIDGE = 64, 256, 0.1   # inputs for the batch-norm statistics, the classifier fit; ridge weight


def random_inputs(n: int, image: int, seed: int) -> np.ndarray:
    """``n`` standard-normal inputs (n, 3, image, image), float32."""
    return np.random.default_rng(seed).standard_normal((n, 3, image, image)).astype(np.float32)


def _smooth(rng, n: int, image: int, low: int) -> np.ndarray:
    """(n, 3, image, image) standard-normal ``low`` x ``low`` noise upsampled bicubically."""
    import torch
    z = torch.from_numpy(rng.standard_normal((n, 3, low, low)).astype(np.float32))
    return torch.nn.functional.interpolate(z, size=(image, image), mode="bicubic", align_corners=False).numpy()


def task_inputs(n: int, image: int, seed, classes: int = 10, task: int = 0):
    """``n`` inputs of the synthetic task ``task`` (its class templates come from that seed) and their classes:
    (float32 (n, 3, image, image), int64 (n,)).  ``seed`` (an int or a tuple of ints) draws the classes and
    the noise."""
    t = _smooth(np.random.default_rng((task, 0, classes, image)), classes, image, 4)
    t /= t.std(axis=(1, 2, 3), keepdims=True)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    x = t[labels] + 0.35 * _smooth(rng, n, image, 8) + 0.35 * rng.standard_normal((n, 3, image, image))
    x -= x.mean(axis=(1, 2, 3), keepdims=True)
    x /= x.std(axis=(1, 2, 3), keepdims=True)
    return x.astype(np.float32), labels.astype(np.int64)


def _classifier(model):
    """The model's last ``Linear`` (ResNet's ``fc``, the MobileNets' ``classifier[-1]``)."""
    return model.fc if hasattr(model, "fc") else model.classifier[-1]


def _train(model, steps: int, image: int, classes: int, seed: int) -> None:
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=_LR, momentum=0.9, weight_decay=1e-4)
    model.train()
    for s in range(steps):
        x, y = task_inputs(_BATCH, image, (seed, 1, s), classes, seed)
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()


def _recalibrate_batch_norm(model, image: int, classes: int, seed: int) -> None:
    import torch
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None                # a cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for k in range(_RECAL // 16):
            model(torch.from_numpy(task_inputs(16, image, (seed, 2, k), classes, seed)[0]))
    model.eval()


def _fit_classifier(model, image: int, classes: int, seed: int) -> None:
    """Ridge regression of the centred one-hot classes on the classifier's input features (eval mode)."""
    import torch
    x, y = task_inputs(_FIT, image, (seed, 3), classes, seed)
    feats = []
    head = _classifier(model)
    hook = head.register_forward_hook(lambda mod, inp, out: feats.append(inp[0]))
    with torch.no_grad():
        model(torch.from_numpy(x))
    hook.remove()
    f = feats[0].double().numpy()
    mean = f.mean(0)
    fc = f - mean
    target = np.eye(classes)[y] - 1.0 / classes
    gram = fc.T @ fc
    w = np.linalg.solve(gram + _RIDGE * np.trace(gram) / len(gram) * np.eye(len(gram)), fc.T @ target).T
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(w))
        head.bias.copy_(torch.from_numpy(-w @ mean))


def float_model(name: str, classes: int = 10, image: int = 32, seed: int = 0, train_steps: int = TRAIN_STEPS):
    """The float quantizable model (``quantize=False``, torchvision's random initialisation from ``seed``), trained
    ``train_steps`` SGD steps on the synthetic task, its batch-norm statistics recomputed and (after any
    training) its classifier refitted; eval mode."""
    import torch
    from torchvision.models import quantization as tvq
    if name not in TORCH_MODELS:
        raise ValueError(f"model {name!r} is not one of {', '.join(TORCH_MODELS)}")
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(tvq, name)(weights=None, quantize=False, num_classes=classes)
    _train(model, train_steps, image, classes, seed)
    _recalibrate_batch_norm(model, image, classes, seed)
    if train_steps:
        _fit_classifier(model, image, classes, seed)
    return model


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
          engine: str = "fbgemm", train_steps: int = TRAIN_STEPS):
    """A bundled model, quantised: (module, input shape (1, 3, image, image))."""
    model = float_model(name, classes, image, seed, train_steps)
    calib = task_inputs(calibration, image, (seed, 4), classes, seed)[0]
    return quantise(model, mode, calib, engine), (1, 3, image, image)
