"""Tiny random models built in code for the tests (nothing trained, nothing downloaded)."""

from __future__ import annotations

import random

WORDS = ("the", "cat", "dog", "sat", "on", "a", "mat", "and", "ran", "to", "big", "red", "tree")


def word_corpus(n: int = 300, seed: int = 0) -> list[str]:
    """``n`` random 12-word sentences over a 13-word vocabulary."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(n)]


def sums_corpus() -> list[str]:
    """Short English sums ("what is 3 plus 4? it is 7.")."""
    return [f"what is {a} plus {b}? it is {a + b}." for a in range(20) for b in range(15)]


def toy_tokenizer(texts: list[str] | None = None, vocab_size: int = 320):
    """A zoo BPE tokenizer (pad/bos/eos/unk/mask, chat template) trained on ``texts``."""
    from llmcore.zoo.tokenizer import train_bpe_tokenizer

    return train_bpe_tokenizer(texts or word_corpus(), vocab_size=vocab_size)


def random_llama(
    tokenizer,
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    max_positions: int = 256,
    seed: int = 0,
    **config_overrides,
):
    """A randomly initialised ``LlamaForCausalLM`` in eval mode, through the zoo's
    ``build_model`` (so the tests exercise the same constructor the zoo uses)."""
    from llmcore.zoo import ModelSpec
    from llmcore.zoo.train import build_model

    spec = ModelSpec(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=max_positions,
    )
    return build_model(spec, tokenizer, seed=seed, **config_overrides).eval()
