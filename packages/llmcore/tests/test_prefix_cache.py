"""Shared-prefix KV reuse in HFBackend.generate: outputs equal those without reuse.

A tiny random Llama built in code (wide init, so greedy argmax gaps dwarf float noise).
"""

from __future__ import annotations

import pytest
import torch

from llmcore.errors import ConfigError
from llmcore.generation import Completion, HFBackend, SamplingParams

PREFIX = (
    "the big red tree and the cat sat on a mat and the dog ran to the big red tree. "
    "a cat and a dog sat on the mat. "
)
QUESTIONS = ["the cat", "a dog ran to the mat and", "red", "the tree sat on the big", "and"]


@pytest.fixture(scope="module")
def backends() -> tuple[HFBackend, HFBackend]:
    from tinymodels import random_llama, toy_tokenizer

    tok = toy_tokenizer()
    model = random_llama(tok, initializer_range=0.2)
    kw = {"batch_size": 8, "device": "cpu", "progress": False}
    return HFBackend(model, tok, **kw), HFBackend(model, tok, prefix_cache=True, **kw)


def assert_same(a: list[list[Completion]], b: list[list[Completion]]) -> None:
    assert len(a) == len(b)
    for row_a, row_b in zip(a, b, strict=True):
        assert len(row_a) == len(row_b)
        for x, y in zip(row_a, row_b, strict=True):
            assert (x.prompt_index, x.sample_index) == (y.prompt_index, y.sample_index)
            assert x.token_ids == y.token_ids
            assert x.text == y.text
            assert x.finish_reason == y.finish_reason
            if x.logprobs is None:
                assert y.logprobs is None
            else:
                assert y.logprobs == pytest.approx(x.logprobs, abs=1e-4)


def prefix_len(backend: HFBackend, prompts: list[str]) -> int:
    ids = backend.tokenizer(prompts)["input_ids"]
    n = 0
    while n < min(map(len, ids)) - 1 and len({x[n] for x in ids}) == 1:
        n += 1
    return n


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(max_new_tokens=16),
        SamplingParams(max_new_tokens=16, n=2, logprobs=True),
        SamplingParams(max_new_tokens=16, n=3, temperature=1.0, seed=7, logprobs=True),
        SamplingParams(max_new_tokens=16, n=2, temperature=0.8, top_k=20, top_p=0.9, seed=1),
        SamplingParams(max_new_tokens=16, stop=["mat"], repetition_penalty=1.5),
    ],
    ids=["greedy", "greedy-n2-logprobs", "sample-n3", "sample-topk-topp", "stop-penalty"],
)
def test_shared_prefix_reuse_gives_identical_outputs(backends, params) -> None:
    plain, cached = backends
    prompts = [PREFIX + q for q in QUESTIONS]
    want = plain.generate(prompts, params)
    got = cached.generate(prompts, params)
    shared = prefix_len(plain, prompts)
    assert shared > 20  # the test really exercises reuse
    assert cached.last_prefix_lengths == [shared]
    assert plain.last_prefix_lengths == [0]
    assert_same(want, got)


def test_n_samples_of_one_prompt_reuse_all_but_its_last_token(backends) -> None:
    plain, cached = backends
    prompt = PREFIX + QUESTIONS[1]
    params = SamplingParams(max_new_tokens=12, n=4, temperature=1.0, seed=3)
    got = cached.generate([prompt], params)
    assert cached.last_prefix_lengths == [len(plain.tokenizer(prompt)["input_ids"]) - 1]
    assert_same(plain.generate([prompt], params), got)
    assert len({tuple(c.token_ids) for c in got[0]}) > 1  # really sampled


def test_prompt_equal_to_prefix_and_per_batch_prefixes(backends) -> None:
    plain, cached = backends
    # Batch 1: one prompt is the prefix itself; batch 2: another shared prefix; batch 3: none.
    other = "a dog sat on the big red tree and the cat ran to the mat. the dog and "
    prompts = [PREFIX, *(PREFIX + q for q in QUESTIONS[:3])]
    prompts += [other + q for q in QUESTIONS[:4]] + ["the cat", "red tree"]
    params = SamplingParams(max_new_tokens=10, n=2, temperature=1.0, seed=5)
    plain.batch_size = cached.batch_size = 4
    try:
        want = plain.generate(prompts, params)
        got = cached.generate(prompts, params)
    finally:
        plain.batch_size = cached.batch_size = 8
    lengths = cached.last_prefix_lengths
    assert lengths[0] == len(plain.tokenizer(PREFIX)["input_ids"]) - 1
    assert lengths[1] == prefix_len(plain, prompts[4:8]) > 0
    assert lengths[2] == 0  # shorter than prefix_cache_min_tokens
    assert_same(want, got)


def test_prefix_cache_config_is_validated(backends) -> None:
    plain, _ = backends
    with pytest.raises(ConfigError, match="prefix_cache="):
        HFBackend(plain.model, plain.tokenizer, prefix_cache="auto")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="prefix_cache_min_tokens"):
        HFBackend(plain.model, plain.tokenizer, prefix_cache=True, prefix_cache_min_tokens=0)


def test_sliding_window_cache_falls_back_to_plain_generation(backends) -> None:
    from transformers import MistralConfig, MistralForCausalLM

    tok = backends[0].tokenizer
    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=8,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        initializer_range=0.2,
    )
    model = MistralForCausalLM(config).eval()
    plain = HFBackend(model, tok, device="cpu", progress=False)
    cached = HFBackend(model, tok, device="cpu", progress=False, prefix_cache=True)
    prompts = [PREFIX + q for q in QUESTIONS[:3]]
    params = SamplingParams(max_new_tokens=8)
    got = cached.generate(prompts, params)
    assert cached.last_prefix_lengths == [0]  # a sliding-window cache is not reused
    assert_same(plain.generate(prompts, params), got)
