"""Shared test setup: one torch thread, a tiny random Llama built in code."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


def make_llama(vocab: int = 48, hidden: int = 32, layers: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def tiny_pair():
    """A random 2-layer Llama and a word tokenizer over 40 pseudo-words (ids line up)."""
    from llmcore.zoo import word_tokenizer

    words = [f"w{i}" for i in range(40)]
    tok = word_tokenizer(words)
    model = make_llama(vocab=len(tok))
    return model, tok
