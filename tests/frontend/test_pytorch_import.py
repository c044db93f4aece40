"""The PyTorch importer: eager- and FX-quantised models -> the front end's graph, judged op by op against
PyTorch's own quantised CPU kernels (fbgemm): each imported op, fed the integers PyTorch computed for its
input, must give PyTorch's output integers to within 1 LSB (PyTorch requantises in float32 with its float
bias, the front end exactly from an int32 bias); plus the file-loading trust rule and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from vtasim.compiler.frontend.errors import FrontendError, ModelFileError, UnsupportedModel  # noqa: E402
from vtasim.compiler.frontend.models.torchvision_quant import TRAIN_STEPS, build, random_inputs, task_inputs  # noqa: E402
from vtasim.compiler.frontend.network import Network  # noqa: E402
from vtasim.compiler.frontend.torch_import import apply_state_dict, from_torch, load_factory, load_state_dict  # noqa: E402
from vtasim.compiler.frontend.torch_reference import TorchReference, layer_lsb  # noqa: E402
from torch_cases import tiny  # noqa: E402

CASES = [(n, m) for n in ("resnet18", "mobilenet_v2", "mobilenet_v3_large") for m in ("eager", "fx")]


@pytest.fixture(params=CASES, ids=[f"{n}-{m}" for n, m in CASES])
def quantised(request, torch_model):
    name, mode = request.param
    return (name, mode) + torch_model(name, mode)


def _qmodules(module, kind):
    nnq = torch.ao.nn.quantized
    base = {"conv": nnq.Conv2d, "linear": nnq.Linear}[kind]
    return sum(1 for m in module.modules() if isinstance(m, base))


def test_every_quantised_layer_is_imported(quantised, cfg):
    name, mode, module, shape = quantised
    g = from_torch(module, shape)
    counts = g.counts()
    assert counts.get("qconv", 0) == _qmodules(module, "conv") > 0
    assert counts.get("qdense", 0) == _qmodules(module, "linear") == {"mobilenet_v3_large": 2}.get(name, 1)
    assert counts.get("qadd", 0) == {"resnet18": 8, "mobilenet_v2": 10, "mobilenet_v3_large": 10}[name]
    if name == "mobilenet_v3_large":      # 8 squeeze-excitation products, their 8 hardsigmoids, 21 hardswishes
        assert counts["qmul"] == 8 and counts["qlut"] == 29 and counts["qgap"] == 9
    assert counts["QuantizeLinear"] == 1 and counts["DequantizeLinear"] == 1
    # the weights are PyTorch's integers, the per-channel scales its scales
    convs = [m for m in module.modules() if isinstance(m, torch.ao.nn.quantized.Conv2d)]
    ours = [n for n in g.nodes if n.op == "qconv"]
    for m, n in zip(convs, ours):
        assert np.array_equal(n.attrs["weight"], m.weight().int_repr().numpy())
        assert np.allclose(n.attrs["w_scale"], m.weight().q_per_channel_scales().numpy(), rtol=0)


def test_each_op_within_one_lsb_of_pytorch(quantised, cfg):
    """One step of every op against PyTorch's own tensors (no compounding): <= 1 LSB, and exact on most."""
    name, mode, module, shape = quantised
    net = Network.from_torch(module, shape, cfg)
    x = task_inputs(1, shape[-1], 11)[0]
    steps = layer_lsb(net, module, x, engine="reference")
    checked = [n for n in net.graph.nodes if n.op != "DequantizeLinear"]
    assert set(steps) == {n.name for n in checked}          # every op with a quantised output was compared
    assert max(steps.values()) <= 1, sorted(steps.items(), key=lambda kv: -kv[1])[:5]
    # the input's quantisation, the adds, products, tables, pools and flatten are exact
    exact = [n.name for n in checked if n.op not in ("qconv", "qdense")]
    assert all(steps[k] == 0 for k in exact), {k: steps[k] for k in exact if steps[k]}


def test_activations_are_neither_zero_nor_clipped(quantised):
    """The calibration leaves every quantised activation spread over its range (else the checks are void)."""
    from vtasim.compiler.frontend.torch_reference import _torch_values
    _, _, module, shape = quantised
    vals = _torch_values(module, task_inputs(1, shape[-1], 12)[0])
    for k, t in vals.items():
        if getattr(t, "is_quantized", False):
            q = t.int_repr().numpy().astype(np.int64)
            assert len(np.unique(q)) >= min(8, q.size // 2), (k, np.unique(q))
            # Hardsigmoid and Sigmoid outputs have PyTorch's fixed parameters (scale 1/256, zero point 0):
            # not calibrated, their 255 is the function's own plateau (an SE block's gate at 1), so only
            # most of them must be off it; every calibrated tensor must almost never reach 255
            fixed = t.q_scale() == 1 / 256 and t.q_zero_point() == 0
            assert np.mean(q == 255) < (0.5 if fixed else 0.05) and np.mean(q == t.q_zero_point()) < 0.9, k


def test_the_conditioning_makes_the_network_insensitive_to_rounding():
    """An untrained random MobileNetV2 is chaotic: input noise of 1 % of an input LSB (which moves a few input
    codes, as a rounding difference moves a few codes of a layer) changes PyTorch's own top-1 class on many
    inputs.  The bundled network, conditioned on its synthetic task, keeps every input's class."""
    from vtasim.compiler.frontend.compare import agreement
    from vtasim.compiler.frontend.torch_reference import input_scale, noisy_runs
    xs = task_inputs(32, 32, 21)[0][:, None]
    floors = {}
    for steps in (0, TRAIN_STEPS):
        module, shape = build("mobilenet_v2", "eager", train_steps=steps)
        ref = TorchReference(module, "fbgemm")
        refs = np.concatenate([ref.run(x) for x in xs])
        floors[steps] = agreement(noisy_runs(ref, xs, input_scale(from_torch(module, shape))), refs, None)
    assert floors[0]["top1"] <= 0.75 and floors[0]["rel_err"] >= 0.3, floors
    assert floors[TRAIN_STEPS]["top1"] == 1.0 and floors[40]["rel_err"] <= 0.1, floors


def test_tiny_model_on_vta_matches_pytorch(cfg):
    m = tiny()
    net = Network.from_torch(m, (1, 3, 16, 16), cfg, skip_first_conv=False)
    assert [n.op for n in net.graph.nodes if n.target == "vta"] == ["qconv", "qconv", "qdense"]
    ref = TorchReference(m, "fbgemm")
    xs = random_inputs(8, 16, 2)[:, None]
    assert max(layer_lsb(net, m, xs[0], engine="cycle").values()) <= 1
    ours = np.concatenate([net.run(x, engine="cycle")[0] for x in xs])
    refs = np.concatenate([ref.run(x) for x in xs])
    from vtasim.compiler.frontend.compare import agreement, output_lsb
    a = agreement(ours, refs, output_lsb(net.graph))
    assert a["max_lsb"] <= 2 and a["top1"] == 1.0, a


def test_unsupported_ops_are_listed(cfg):
    m = tiny(extra=torch.nn.Softmax(dim=1))
    with pytest.raises(UnsupportedModel, match=r"torch.nn.modules.activation.Softmax is not supported"):
        from_torch(m, (1, 3, 16, 16))


def test_bad_modules_and_shapes():
    m = tiny()
    with pytest.raises(FrontendError, match=r"does not run on an input of shape \(1, 4, 16, 16\)"):
        from_torch(m, (1, 4, 16, 16))
    with pytest.raises(FrontendError, match="every dimension at least 1"):
        from_torch(m, (1, 0, 16, 16))
    with pytest.raises(FrontendError, match="training mode"):
        from_torch(m.train(), (1, 3, 16, 16))
    m.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch.jit's deprecation and tracer notes
        traced = torch.jit.trace(m, torch.zeros(1, 3, 16, 16))
    with pytest.raises(FrontendError, match="TorchScript module"):
        from_torch(traced, (1, 3, 16, 16))
    with pytest.raises(UnsupportedModel, match="float Conv2d .quantise the model first"):
        from_torch(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)).eval(), (1, 3, 8, 8))


def test_state_dict_loads_weights_only(tmp_path, cfg):
    a, b = tiny(seed=3), tiny(seed=4)
    x = random_inputs(1, 16, 5)
    assert not np.array_equal(TorchReference(a).run(x), TorchReference(b).run(x))
    path = tmp_path / "a.pt"
    torch.save(a.state_dict(), path)
    apply_state_dict(b, load_state_dict(path), str(path))
    assert np.array_equal(TorchReference(b).run(x), TorchReference(a).run(x))
    net_a, net_b = (Network.from_torch(m, (1, 3, 16, 16), cfg) for m in (a, b))
    assert np.array_equal(net_a.run(x, engine="reference")[0], net_b.run(x, engine="reference")[0])
    # a state dict of another model is refused in one line naming the keys
    other = torch.nn.Linear(2, 2).state_dict()
    torch.save(other, tmp_path / "other.pt")
    with pytest.raises(FrontendError, match="does not fit the model"):
        apply_state_dict(b, load_state_dict(tmp_path / "other.pt"), "other.pt")


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    torch.save({"w": _Payload(marker)}, tmp_path / "evil.pt")
    with pytest.raises(ModelFileError, match="evil.pt: not a state dict torch.load.weights_only=True. reads"):
        load_state_dict(tmp_path / "evil.pt")
    assert not marker.exists()
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ModelFileError, match="not a state dict"):
        load_state_dict(tmp_path / "list.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="junk.pt: not a state dict"):
        load_state_dict(tmp_path / "junk.pt")


def test_factory_spec():
    m = load_factory("torch_cases:tiny")
    assert isinstance(m, torch.nn.Module) and not m.training
    for bad, msg in (("torch_cases", "package.module:function"),
                     ("nowhere_at_all:tiny", "cannot import it"),
                     ("torch_cases:random_inputs", r"random_inputs\(\) raised TypeError"),
                     ("builtins:dict", "returned a dict, not a torch.nn.Module")):
        with pytest.raises(FrontendError, match=msg):
            load_factory(bad)


def test_concat_requantises_each_input_as_pytorch(cfg):
    from torch_cases import tiny_cat
    m = tiny_cat()
    net = Network.from_torch(m, (1, 3, 16, 16), cfg)
    tables = [n for n in net.graph.nodes if n.op == "qlut" and n.attrs["fn"] == "requantize"]
    assert len(tables) >= 1 and "Concat" in net.graph.counts()
    steps = layer_lsb(net, m, random_inputs(1, 16, 6), engine="reference")
    cat = next(n.name for n in net.graph.nodes if n.op == "Concat")
    assert steps[cat] == 0 and max(steps.values()) <= 1, steps
