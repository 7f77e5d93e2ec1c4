"""Shared fixtures: a tiny random Llama over the toy's word vocabulary (built in code, for the
property tests) and the zoo-built toy base (for the claim tests)."""

from __future__ import annotations

import random

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def suite():
    from excess_dl.toy import CipherSuite

    return CipherSuite()


@pytest.fixture(scope="session")
def tiny(suite):
    """(model, tokenizer): an untrained 1-layer Llama (hidden 32) with the toy's tokenizer."""
    from llmcore import zoo
    from llmcore.zoo.train import build_model

    tok = zoo.word_tokenizer(suite.symbols)
    spec = zoo.ModelSpec(
        hidden_size=32,
        num_layers=1,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model(spec, tok, seed=0)
    return model.eval(), tok


@pytest.fixture(scope="session")
def small_data(suite):
    train = suite.task_examples("teach", 8, random.Random(0))
    test = suite.test_examples("teach")[:8]
    return train, test


@pytest.fixture(scope="session")
def toy_base(suite):
    """The calibrated toy base (zoo recipe, built once per machine then loaded)."""
    from excess_dl.toy import build_toy_base

    entry = build_toy_base(suite)
    print(f"\nexcess-dl toy base: {entry.metrics}")
    return entry.load()
