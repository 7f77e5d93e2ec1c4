"""Shared fixtures: tiny models built in code (property tests) and the zoo-cached CPU
fixtures (target with layer dropout, briefly trained drafter)."""

from __future__ import annotations

import time

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


def make_llama(layers: int, hidden: int, vocab: int = 48, seed: int = 0, eos: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=256,
        eos_token_id=eos,
        bos_token_id=1,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def rand_pair():
    """An untrained 6-layer target and 2-layer drafter with one vocabulary."""
    return make_llama(6, 64, seed=0), make_llama(2, 32, seed=1)


@pytest.fixture(scope="session")
def fx():
    """The trained CPU fixtures (built once per machine, then loaded from the zoo cache)."""
    from via_sd.tiny import build_fixtures

    t0 = time.perf_counter()
    models = build_fixtures(progress=False)
    models.info["session_load_seconds"] = time.perf_counter() - t0
    print(f"\nvia-sd fixtures: {models.info}")
    return models


@pytest.fixture(scope="session")
def searched_mask(fx):
    """The DIMR-searched skip set of the target fixture (``via-sd-mask`` zoo entry: searched
    once per target and search code, then loaded)."""
    from via_sd.tiny import build_searched_mask

    entry = build_searched_mask(target=fx.target, tokenizer=fx.tokenizer)
    print(f"\nvia-sd searched mask: {entry.metrics} (from cache: {entry.from_cache})")
    return entry


@pytest.fixture(scope="session")
def prompts64():
    from via_sd.tiny import eval_prompts

    return eval_prompts(64)


def encode(tok, text: str) -> list[int]:
    from via_sd.bench import encode_prompt

    return encode_prompt(tok, text)
