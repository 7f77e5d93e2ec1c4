"""Fixtures: tiny Llama/Qwen2 models built in code (GQA, qkv biases, non-unit norms) and the
cached tiny Markov Llama with injected outliers (respin_quant.tiny, built once per machine)."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


def make_model(
    arch: str = "llama",
    dtype: torch.dtype = torch.float32,
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    inter: int = 128,
    seed: int = 0,
):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    C, M = (LlamaConfig, LlamaForCausalLM) if arch == "llama" else (Qwen2Config, Qwen2ForCausalLM)
    cfg = C(
        vocab_size=40,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=inter,
        max_position_embeddings=64,
        tie_word_embeddings=(arch == "qwen2"),
    )
    m = M(cfg).to(dtype).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(dtype) * 0.2)
        for ly in m.model.layers:
            ly.input_layernorm.weight.copy_(torch.rand(hidden, generator=g).to(dtype) + 0.5)
            ly.post_attention_layernorm.weight.copy_(
                torch.rand(hidden, generator=g).to(dtype) + 0.5
            )
        m.model.norm.weight.copy_(torch.rand(hidden, generator=g).to(dtype) + 0.5)
    return m


@pytest.fixture(params=["llama", "qwen2"])
def arch(request):
    return request.param


@pytest.fixture(scope="session")
def tiny_dir():
    from respin_quant.tiny import build_tiny

    return build_tiny()


@pytest.fixture
def ids():
    return torch.randint(0, 40, (2, 24), generator=torch.Generator().manual_seed(5))
