"""Shared test setup: one torch thread, tiny random Llama/Qwen2 models built in code."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


def make_model(
    arch: str = "llama",
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    vocab: int = 300,
    seed: int = 0,
    attn: str = "eager",
):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    cls_cfg, cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[arch]
    cfg = cls_cfg(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads or heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    cfg._attn_implementation = attn
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(cfg).eval()


@pytest.fixture(scope="session")
def stream_tok():
    """The word tokenizer over the 256 stream symbols (BOS id 1)."""
    from sink_probe.data import SYMBOLS

    from llmcore.zoo import word_tokenizer

    return word_tokenizer(SYMBOLS)


@pytest.fixture(scope="session")
def stream_texts_small():
    from sink_probe.data import stream_texts

    return stream_texts(12, seed=3)
