"""Tests of llmcore.hooks on a random tiny LlamaForCausalLM built in code."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llmcore.errors import ConfigError, LLMCoreError
from llmcore.hooks import (
    ablate,
    capture_activations,
    get_module,
    intervene,
    layer_module_names,
)

HIDDEN, VOCAB, LAYERS = 32, 64, 2


@pytest.fixture(scope="module")
def model() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))


def _logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def _assert_no_hooks(model: nn.Module) -> None:
    for name, module in model.named_modules():
        assert not module._forward_hooks, name
        assert not module._forward_pre_hooks, name


def test_get_module(model) -> None:
    assert get_module(model, "model.layers.1.mlp") is model.model.layers[1].mlp
    assert get_module(model, "") is model


def test_get_module_unknown_name_suggests_matches(model) -> None:
    with pytest.raises(
        ConfigError, match=r"no module named 'model.layer.0.mlp'.*'model.layers.0.mlp'"
    ):
        get_module(model, "model.layer.0.mlp")
    with pytest.raises(ConfigError, match=r"model\.layers\.5"):
        get_module(model, "model.layers.5")
    with pytest.raises(ConfigError, match=r"top-level modules are: 'model', 'lm_head'"):
        get_module(model, "zzzzzzzzzzzzzzzzzzzzzzzz")


def test_layer_module_names(model) -> None:
    assert layer_module_names(model) == ["model.layers.0", "model.layers.1"]
    assert layer_module_names(model.model) == ["layers.0", "layers.1"]

    class Custom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])  # mixed: not layers
            self.stack = nn.Sequential(nn.ModuleList([nn.Linear(2, 2) for _ in range(3)]))

    assert layer_module_names(Custom()) == ["stack.0.0", "stack.0.1", "stack.0.2"]
    with pytest.raises(ConfigError, match="decoder layers"):
        layer_module_names(nn.Linear(2, 2))


def test_capture_shapes_per_call(model, ids) -> None:
    names = [*layer_module_names(model), "model.layers.0.mlp", "model.layers.0.self_attn"]
    with capture_activations(model, names) as acts:
        _logits(model, ids)
        _logits(model, ids[:1, :4])
    assert list(acts) == names
    for name in names:
        assert [tuple(t.shape) for t in acts[name]] == [(2, 7, HIDDEN), (1, 4, HIDDEN)]
        assert not acts[name][0].requires_grad
    # The last layer's output, after the final norm, gives the logits.
    with torch.no_grad():
        logits = model.lm_head(model.model.norm(acts["model.layers.1"][0]))
    torch.testing.assert_close(logits, _logits(model, ids))
    _assert_no_hooks(model)


def test_capture_inputs(model, ids) -> None:
    with capture_activations(model, ["model.layers.1", "lm_head"], input=True) as ins:
        _logits(model, ids)
    with capture_activations(model, ["model.layers.0", "model.norm"]) as outs:
        _logits(model, ids)
    torch.testing.assert_close(ins["model.layers.1"][0], outs["model.layers.0"][0])
    torch.testing.assert_close(ins["lm_head"][0], outs["model.norm"][0])
    _assert_no_hooks(model)


def test_capture_options(model, ids) -> None:
    with capture_activations(model, "model.layers.0", detach=False, to_cpu=True) as acts:
        model(ids)  # with grad
    (t,) = acts["model.layers.0"]
    assert t.requires_grad and t.device.type == "cpu"


def test_hooks_removed_after_exception(model, ids) -> None:
    with pytest.raises(RuntimeError, match="boom"), capture_activations(model, "model.layers.0"):
        assert model.model.layers[0]._forward_hooks
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"), intervene(model, {"model.norm": lambda t: t}):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"), ablate(model, ["model.layers.1.mlp"]):
        raise RuntimeError("boom")
    _assert_no_hooks(model)


def test_bad_name_registers_nothing(model) -> None:
    with pytest.raises(ConfigError), capture_activations(model, ["model.layers.0", "nope"]):
        pass
    _assert_no_hooks(model)


def test_intervene_identity_keeps_logits(model, ids) -> None:
    base = _logits(model, ids)
    edits = {
        "model.layers.0": lambda t: t.clone(),
        "model.layers.1.self_attn": lambda t: t * 1.0,  # tuple output: (attn_out, weights)
        "model.layers.1.mlp": lambda t: None,
    }
    with intervene(model, edits):
        torch.testing.assert_close(_logits(model, ids), base, rtol=0, atol=0)
    _assert_no_hooks(model)


def test_zeroing_mlp_changes_logits_and_equals_ablate(model, ids) -> None:
    base = _logits(model, ids)
    with intervene(model, {"model.layers.0.mlp": torch.zeros_like}):
        zeroed = _logits(model, ids)
    assert not torch.allclose(zeroed, base)
    with ablate(model, "model.layers.0.mlp"):
        torch.testing.assert_close(_logits(model, ids), zeroed)
    torch.testing.assert_close(_logits(model, ids), base)  # restored
    _assert_no_hooks(model)


def test_zeroing_attention_tuple_output(model, ids) -> None:
    # Zeroing attention in every layer leaves each position independent of the others.
    names = [f"{layer}.self_attn" for layer in layer_module_names(model)]
    with ablate(model, names):
        full = _logits(model, ids)
        first = _logits(model, ids[:, :1])
        other = _logits(model, torch.cat([ids[:, :1], ids[:, 1:].flip(1)], dim=1))
    torch.testing.assert_close(full[:, 0], first[:, 0])
    torch.testing.assert_close(full[:, 0], other[:, 0])
    assert not torch.allclose(full[:, 1:], _logits(model, ids)[:, 1:])


def test_edit_sees_and_replaces_output(model, ids) -> None:
    seen: list[torch.Tensor] = []

    def steer(t: torch.Tensor) -> torch.Tensor:
        seen.append(t)
        return t + 1.0

    with (
        intervene(model, {"model.layers.0": steer}),
        capture_activations(model, ["model.layers.0", "model.layers.1"], input=False) as acts,
    ):
        _logits(model, ids)
    torch.testing.assert_close(acts["model.layers.0"][0], seen[0] + 1.0)
    with capture_activations(model, "model.layers.1", input=True) as ins:
        _logits(model, ids)
    assert not torch.allclose(ins["model.layers.1"][0], acts["model.layers.0"][0])


def test_intervene_bad_edits(model, ids) -> None:
    with (
        pytest.raises(LLMCoreError, match=r"returned shape \(2, 7, 1\)"),
        intervene(model, {"model.norm": lambda t: t[..., :1]}),
    ):
        _logits(model, ids)
    with (
        pytest.raises(LLMCoreError, match="returned a float"),
        intervene(model, {"model.norm": lambda t: 0.0}),
    ):
        _logits(model, ids)
    _assert_no_hooks(model)


def test_mean_ablation(model, ids) -> None:
    with capture_activations(model, "model.layers.0.mlp") as acts:
        _logits(model, ids)
    mean = acts["model.layers.0.mlp"][0].mean(dim=(0, 1))  # (hidden,)
    with (
        ablate(model, "model.layers.0.mlp", mode="mean"),
        capture_activations(model, "model.layers.0.mlp") as own,
    ):
        own_logits = _logits(model, ids)
    torch.testing.assert_close(own["model.layers.0.mlp"][0], mean.expand(2, 7, HIDDEN))
    with ablate(model, ["model.layers.0.mlp"], mode="mean", means={"model.layers.0.mlp": mean}):
        torch.testing.assert_close(_logits(model, ids), own_logits)
    with pytest.raises(ConfigError, match="mode"), ablate(model, "lm_head", mode="max"):  # type: ignore[arg-type]
        pass
    with (
        pytest.raises(ConfigError, match="not ablated"),
        ablate(model, "lm_head", mode="mean", means={"model.norm": mean}),
    ):
        pass
    _assert_no_hooks(model)


def test_plain_module_tuple_and_list_outputs() -> None:
    class Pair(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x * 2, x

    class Listy(nn.Module):
        def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
            return [x + 1, x]

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pair, self.listy = Pair(), Listy()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b = self.pair(x)
            c, d = self.listy(a)
            return a + b + c + d

    net, x = Net(), torch.ones(3)
    assert torch.equal(net(x), torch.full((3,), 2 + 1 + 3 + 2.0))
    with intervene(net, {"pair": torch.zeros_like, "listy": lambda t: t * 10}):
        # a = 0, b = 1, c = (0 + 1) * 10, d = 0
        assert torch.equal(net(x), torch.full((3,), 11.0))
    with capture_activations(net, ["pair", "listy"]) as acts:
        net(x)
    assert torch.equal(acts["pair"][0], x * 2) and torch.equal(acts["listy"][0], x * 2 + 1)
    _assert_no_hooks(net)
