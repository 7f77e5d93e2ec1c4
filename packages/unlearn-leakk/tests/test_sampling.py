"""Sampling determinism and prompts (same seed, same samples; bad input)."""

from __future__ import annotations

import pytest
from unlearn_leakk.config import DecodingConfig
from unlearn_leakk.errors import LeakConfigError
from unlearn_leakk.estimator import leak_at_k_curve
from unlearn_leakk.evaluate import per_item_counts
from unlearn_leakk.judges import ExactPhraseJudge
from unlearn_leakk.sampling import render_prompts, sample_responses


def test_greedy_samples_identical(world_model, world):
    model, tok = world_model
    items = world.qa_items([0])
    with pytest.warns(UserWarning):
        dec = DecodingConfig(0.0, 1.0, n=4, max_new_tokens=12)
    outs = sample_responses(model, tok, items, dec, chat_template=False)
    assert all(len(set(o)) == 1 and len(o) == 4 for o in outs)
    counts = per_item_counts(outs, items, ExactPhraseJudge())
    curve = leak_at_k_curve(counts, 4, [1, 2, 4])
    assert curve[1] == curve[4] and curve[1] == 1.0  # the pre-trained model knows every fact


def test_seeded_sampling(world_model, world):
    model, tok = world_model
    items = world.qa_items([0])[:2]
    d = DecodingConfig(1.5, 1.0, n=6, max_new_tokens=12, seed=3, batch_size=4)
    a = sample_responses(model, tok, items, d, chat_template=False)
    b = sample_responses(model, tok, items, d, chat_template=False)
    c = sample_responses(
        model,
        tok,
        items,
        DecodingConfig(1.5, 1.0, n=6, max_new_tokens=12, seed=4, batch_size=4),
        chat_template=False,
    )
    assert a == b and a != c
    assert all(len(x) == 6 for x in a)


def test_prompts(world_model, world):
    _, tok = world_model
    items = world.qa_items([0])[:1]
    raw = render_prompts(tok, items, chat_template=False)
    assert raw[0].startswith(tok.bos_token) and raw[0].endswith("A:")
    chat = render_prompts(tok, items, chat_template=True)
    assert "<|system|>You are a helpful assistant." in chat[0]
    tok.chat_template = None
    with pytest.raises(LeakConfigError, match="no chat template"):
        render_prompts(tok, items, chat_template=True)
