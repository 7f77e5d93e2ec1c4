"""block_modules on tiny random models of five layouts, and input-side interventions."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from llmcore.errors import ConfigError
from llmcore.hooks import (
    BlockModules,
    block_modules,
    capture_activations,
    get_module,
    intervene,
)

HIDDEN, LAYERS, VOCAB = 32, 2, 64


def _build(arch: str) -> nn.Module:
    import transformers as tf

    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, num_hidden_layers=LAYERS, num_attention_heads=4)
    if arch == "gpt2":
        cfg = tf.GPT2Config(
            vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=4, n_positions=32
        )
        return tf.GPT2LMHeadModel(cfg).eval()
    if arch == "gpt_neox":
        cfg = tf.GPTNeoXConfig(
            hidden_size=HIDDEN, intermediate_size=64, max_position_embeddings=32, **common
        )
        return tf.GPTNeoXForCausalLM(cfg).eval()
    classes = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
    }
    config_cls, model_cls = classes[arch]
    cfg = config_cls(
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_key_value_heads=2,
        max_position_embeddings=32,
        **common,
    )
    return model_cls(cfg).eval()


ARCHS = ["llama", "qwen2", "mistral", "gpt2", "gpt_neox"]
# Expected (attn_out, v_proj, mlp_down, input_norm) child names and whether v is fused.
LAYOUT = {
    "llama": ("self_attn.o_proj", "self_attn.v_proj", "mlp.down_proj", "input_layernorm", False),
    "qwen2": ("self_attn.o_proj", "self_attn.v_proj", "mlp.down_proj", "input_layernorm", False),
    "mistral": ("self_attn.o_proj", "self_attn.v_proj", "mlp.down_proj", "input_layernorm", False),
    "gpt2": ("attn.c_proj", "attn.c_attn", "mlp.c_proj", "ln_1", True),
    "gpt_neox": (
        "attention.dense",
        "attention.query_key_value",
        "mlp.dense_4h_to_h",
        "input_layernorm",
        True,
    ),
}
BIAS_FREE_OUT = {"llama", "qwen2", "mistral"}


@pytest.fixture(scope="module", params=ARCHS)
def arch_model(request) -> tuple[str, nn.Module]:
    return request.param, _build(request.param)


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))


def _logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_names_resolve_to_expected_modules(arch_model) -> None:
    arch, model = arch_model
    attn_out, v_proj, mlp_down, norm, fused = LAYOUT[arch]
    for layer in range(LAYERS):
        bm = block_modules(model, layer)
        assert isinstance(bm, BlockModules)
        prefix = bm.block + "."
        assert bm.attn_out == prefix + attn_out
        assert bm.v_proj == prefix + v_proj
        assert bm.mlp_down == prefix + mlp_down
        assert bm.input_norm == prefix + norm
        assert bm.v_fused is fused
        assert bm.attn == bm.attn_out.rsplit(".", 1)[0]
        assert bm.mlp == bm.mlp_down.rsplit(".", 1)[0]
        assert type(get_module(model, bm.block)).__name__.endswith(
            ("DecoderLayer", "Block", "Layer")
        )
        assert "Attention" in type(get_module(model, bm.attn)).__name__
        assert "MLP" in type(get_module(model, bm.mlp)).__name__
        norm_mod = get_module(model, bm.input_norm)
        assert "Norm" in type(norm_mod).__name__
        for name in (bm.attn_out, bm.v_proj, bm.mlp_down):
            mod = get_module(model, name)
            assert type(mod).__name__ in ("Linear", "Conv1D"), (name, type(mod))
    assert block_modules(model, -1) == block_modules(model, LAYERS - 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bm.attn = "x"  # type: ignore[misc]


def test_layer_out_of_range(arch_model) -> None:
    _, model = arch_model
    for bad in (LAYERS, -LAYERS - 1, 100):
        with pytest.raises(ConfigError, match="out of range"):
            block_modules(model, bad)
    with pytest.raises(ConfigError, match="must be an int"):
        block_modules(model, "0")  # type: ignore[arg-type]


def test_capture_attn_out_input_and_mlp_down_output(arch_model, ids) -> None:
    _, model = arch_model
    bm = block_modules(model, 1)
    with (
        capture_activations(model, bm.attn_out, input=True) as heads,
        capture_activations(model, [bm.mlp_down, bm.attn]) as outs,
    ):
        _logits(model, ids)
    assert len(heads[bm.attn_out]) == 1 and len(outs[bm.mlp_down]) == 1
    assert heads[bm.attn_out][0].shape == (2, 7, HIDDEN)
    assert outs[bm.mlp_down][0].shape == (2, 7, HIDDEN)
    # The attention block's output is its output projection applied to the captured input.
    proj = get_module(model, bm.attn_out)
    with torch.no_grad():
        again = proj(heads[bm.attn_out][0])
    torch.testing.assert_close(again, outs[bm.attn][0], rtol=1e-5, atol=1e-6)


def test_input_intervention_zeroes_attention(arch_model, ids) -> None:
    arch, model = arch_model
    bm = block_modules(model, 0)
    base = _logits(model, ids)
    with intervene(model, {bm.attn_out: lambda t: t.clone()}, input=True):
        same = _logits(model, ids)
    torch.testing.assert_close(same, base, rtol=0, atol=0)

    with (
        intervene(model, {bm.attn_out: torch.zeros_like}, input=True),
        capture_activations(model, bm.attn) as rec,
    ):
        zeroed = _logits(model, ids)
    attn_out = rec[bm.attn][0]
    if arch in BIAS_FREE_OUT:
        assert torch.count_nonzero(attn_out) == 0
    else:  # only the output projection's bias is left
        bias = get_module(model, bm.attn_out).bias
        torch.testing.assert_close(attn_out, bias.expand_as(attn_out))
    assert not torch.allclose(zeroed, base)
    # Hooks are gone afterwards.
    torch.testing.assert_close(_logits(model, ids), base, rtol=0, atol=0)


def test_input_edit_of_keyword_called_module(ids) -> None:
    # Llama's decoder layer calls self_attn(hidden_states=...) by keyword: the pre-hook edits it.
    model = _build("llama")
    bm = block_modules(model, 1)
    base = _logits(model, ids)
    # Pre-hooks run in registration order: the capture registered second sees the edit.
    with (
        intervene(model, {bm.attn: torch.zeros_like}, input=True),
        capture_activations(model, bm.attn, input=True) as seen,
    ):
        edited = _logits(model, ids)
    assert torch.count_nonzero(seen[bm.attn][0]) == 0
    assert not torch.allclose(edited, base)


def test_input_edit_bad_shape_raises(ids) -> None:
    from llmcore.errors import LLMCoreError

    model = _build("gpt2")
    bm = block_modules(model, 0)
    with (
        pytest.raises(LLMCoreError, match="but the input has shape"),
        intervene(model, {bm.attn_out: lambda t: t[..., :-1]}, input=True),
    ):
        _logits(model, ids)
    assert not get_module(model, bm.attn_out)._forward_pre_hooks  # removed after the error


def test_unknown_layout_raises() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mixer = nn.Linear(4, 4)
            self.norm = nn.LayerNorm(4)

    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Block(), Block()])

    with pytest.raises(ConfigError, match=r"Odd.*mixer, norm"):
        block_modules(Odd(), 0)
