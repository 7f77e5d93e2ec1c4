"""Shared test setup: one torch thread, tiny random Llamas built in code, the cached task
models (registered fixtures) and the cached claim signature."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


def make_llama(vocab: int = 48, hidden: int = 32, layers: int = 2, seed: int = 0, **kw):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        **kw,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def task_tok():
    from circuitprint import task

    from llmcore.zoo import word_tokenizer

    return word_tokenizer(task.SYMBOLS)


@pytest.fixture(scope="session")
def random_llama(task_tok):
    """A random 2-layer Llama over the task vocabulary."""
    return make_llama(vocab=len(task_tok))


@pytest.fixture(scope="session")
def zoo_models():
    """The registered fixtures: P, I1, I3 and the derivatives (entries, not loaded)."""
    from circuitprint import fixtures

    p = fixtures.build_protected()
    ft1, ft2, lora, mlin, mties = fixtures.build_derivatives()
    return {"P": p, "I1": fixtures.build_independent_1(), "I3": fixtures.build_independent_3(),
            "FT1": ft1, "FT2": ft2, "LoRA": lora, "M-lin": mlin, "M-ties": mties}  # fmt: skip


@pytest.fixture(scope="session")
def protected(zoo_models):
    return zoo_models["P"].load()
