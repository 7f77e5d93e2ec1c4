"""Shared test setup: one torch thread, a tiny random bidirectional Llama built in code."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)

VOCAB = 24
MASK = 3
EOS = 2


def make_llama(vocab: int = VOCAB, hidden: int = 32, layers: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=EOS,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg).eval()
        # a wide output bias spread keeps entropies varied, so thresholds matter
        model.lm_head.weight.data *= 8.0
    return model


@pytest.fixture(scope="session")
def tiny_mdlm():
    from d3llm import MaskedDiffusionLM

    return MaskedDiffusionLM(make_llama(), MASK, "none", EOS)


@pytest.fixture(scope="session")
def prompt():
    return [1, 5, 9, 7, 11, 6]
