"""Exactness and invariants: lossless cases equal greedy AR token for token."""

from __future__ import annotations

import pytest
import torch
from conftest import encode
from via_sd import (
    EarlyExitDrafter,
    ForwardCounter,
    PromptLookupDrafter,
    SlimVerifier,
    ViaSDConfig,
    autoregressive_generate,
    hf_assisted_generate,
    speculative_generate,
    via_sd_generate,
)
from via_sd.slim import find_layers

NO_EOS = -1
PROMPTS = [[1, 5, 6, 7], [1, 9], [1, 3, 3, 3, 4, 10, 11, 12], [1, 20, 21]]


def cfg(**kw):
    base = dict(max_new_tokens=24, eos_token_id=NO_EOS, gamma=4)
    base.update(kw)
    return ViaSDConfig(**base)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_sd_equals_ar_random_models(rand_pair, prompt):
    q, p = rand_pair
    ar = autoregressive_generate(q, prompt, cfg())
    sd = speculative_generate(q, p, prompt, cfg())
    assert sd.new_tokens == ar.new_tokens
    assert ar.stats.target_forwards == ar.stats.tokens == 24
    assert sd.stats.lossless and ar.stats.lossless


@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_via_all_escalated_equals_sd_and_ar(rand_pair, gamma):
    q, p = rand_pair
    c = cfg(gamma=gamma, tau_accept=1.01, tau_escalate=1.01)
    for prompt in PROMPTS:
        ar = autoregressive_generate(q, prompt, c)
        sd = speculative_generate(q, p, prompt, c)
        via = via_sd_generate(q, p, SlimVerifier(q, skip_layers=[2, 3]), prompt, c)
        assert via.new_tokens == sd.new_tokens == ar.new_tokens
        assert via.stats.tier_c == via.stats.drafted and via.stats.lossless


@pytest.mark.parametrize("tau_escalate", [0.0, 0.3, 0.5, 1.0])
def test_via_empty_skip_tau_one_equals_ar(rand_pair, tau_escalate):
    q, p = rand_pair
    c = cfg(tau_accept=1.0, tau_escalate=tau_escalate)
    slim = SlimVerifier(q, skip_layers=[])
    for prompt in PROMPTS:
        assert via_sd_generate(q, p, slim, prompt, c).new_tokens == (
            autoregressive_generate(q, prompt, c).new_tokens
        )


def test_slim_no_skip_is_bit_equal(rand_pair):
    q, _ = rand_pair
    ids = torch.tensor([[1, 4, 9, 16, 25, 36]])
    with torch.no_grad():
        ref = q(input_ids=ids).logits
        got = SlimVerifier(q, skip_layers=[]).forward(ids)
    assert torch.equal(ref, got)


def test_slim_matches_manual_kept_layer_loop(rand_pair):
    q, _ = rand_pair
    ids = torch.tensor([[1, 4, 9, 16, 25, 36, 7]])
    skip = [2, 4]
    slim = SlimVerifier(q, skip_layers=skip)
    with torch.no_grad():
        got = slim.forward(ids)
        m = q.model
        h = m.embed_tokens(ids)
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        pe = m.rotary_emb(h, position_ids=pos)
        mask = torch.full((ids.shape[1], ids.shape[1]), float("-inf")).triu(1)[None, None]
        for i, layer in enumerate(find_layers(q)):
            if i not in skip:
                h = layer(h, attention_mask=mask, position_ids=pos, position_embeddings=pe)
        ref = q.lm_head(m.norm(h))
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    # the swap is undone: q is q again afterwards
    assert all(type(x).__name__ == "LlamaDecoderLayer" for x in find_layers(q))
    assert slim.mask == [1, 1, 0, 1, 0, 1] and slim.kept_fraction == pytest.approx(4 / 6)


def test_slim_cache_matches_full_pass(rand_pair):
    q, _ = rand_pair
    slim = SlimVerifier(q, skip_layers=[1, 3])
    ids = torch.tensor([[1, 4, 9, 16, 25, 36, 7, 8]])
    with torch.no_grad():
        full = slim.forward(ids)
        cache = slim.new_cache()
        a = slim.forward(ids[:, :5], cache)
        b = slim.forward(ids[:, 5:], cache)
    torch.testing.assert_close(torch.cat([a, b], 1), full, atol=1e-5, rtol=1e-5)


def test_rollback_and_cache_invariants(rand_pair):
    q, p = rand_pair
    c = cfg(max_new_tokens=30)
    slim = SlimVerifier(q, skip_layers=[2, 3])
    trace: list[dict] = []
    r1 = via_sd_generate(q, p, slim, PROMPTS[0], c, on_block=trace.append)
    r2 = via_sd_generate(q, p, slim, PROMPTS[0], c)
    assert r1.new_tokens == r2.new_tokens
    assert trace
    for b in trace[:-1]:
        assert b["slim_cache"] in (b["committed"] - 1, b["committed"])
        assert b["slim_ids_prefix"]
        assert b["target_cache"] <= b["committed"]
    s = r1.stats
    assert s.tier_a + s.tier_b + s.tier_c == s.drafted
    assert s.tokens == len(r1.new_tokens) == 30
    assert s.rejections == s.rejections_b + s.rejections_c
    assert s.slim_forwards == s.blocks


def test_forward_counter_matches_stats(rand_pair):
    q, p = rand_pair
    c = cfg()
    with ForwardCounter(q) as cq, ForwardCounter(p) as cp:
        sd = speculative_generate(q, p, PROMPTS[2], c)
    assert (cq.calls, cq.tokens) == (sd.stats.target_forwards, sd.stats.target_tokens_processed)
    assert cp.calls == sd.stats.draft_forwards
    slim = SlimVerifier(q, skip_layers=[2])  # its one probe call happens here
    with ForwardCounter(q) as cq:
        via = via_sd_generate(q, p, slim, PROMPTS[2], c)
    # q' runs through q's modules, so the hook sees both
    assert cq.calls == via.stats.target_forwards + via.stats.slim_forwards


def test_other_drafters_are_exact_in_greedy(rand_pair):
    q, _ = rand_pair
    prompt = [1, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    ar = autoregressive_generate(q, prompt, cfg())
    pl = speculative_generate(q, PromptLookupDrafter(n=2), prompt, cfg())
    ee = speculative_generate(q, EarlyExitDrafter(q, 3), prompt, cfg())
    assert pl.new_tokens == ar.new_tokens == ee.new_tokens
    assert pl.stats.draft_forwards == 0
    assert PromptLookupDrafter(2).propose([1, 5, 6, 7, 5, 6], 3)[0] == [7, 5, 6]
    assert PromptLookupDrafter(2).propose([1, 2, 3], 3)[0] == []


def test_eos_stops_and_cuts_drafts(rand_pair):
    q, p = rand_pair
    ar = autoregressive_generate(q, PROMPTS[0], cfg(max_new_tokens=20))
    eos = ar.new_tokens[5]  # pretend that token is EOS
    c = cfg(max_new_tokens=20, eos_token_id=eos)
    a = autoregressive_generate(q, PROMPTS[0], c).new_tokens
    assert a[-1] == eos and eos not in a[:-1]
    assert speculative_generate(q, p, PROMPTS[0], c).new_tokens == a
    v = via_sd_generate(q, p, SlimVerifier(q, skip_layers=[2]), PROMPTS[0], c).new_tokens
    assert eos not in v[:-1]


def test_hf_assisted_peer_equals_ar(rand_pair):
    q, p = rand_pair
    ar = autoregressive_generate(q, PROMPTS[0], cfg())
    hf = hf_assisted_generate(q, p, PROMPTS[0], cfg())
    assert hf.new_tokens == ar.new_tokens
    assert hf.stats.target_forwards < ar.stats.target_forwards or hf.stats.target_forwards > 0


def test_fixture_sd_equals_ar(fx, prompts64):
    c = ViaSDConfig(max_new_tokens=48, eos_token_id=fx.tokenizer.eos_token_id)
    for row in prompts64[:8]:
        ids = encode(fx.tokenizer, row["prompt"])
        ar = autoregressive_generate(fx.target, ids, c)
        assert speculative_generate(fx.target, fx.drafter, ids, c).new_tokens == ar.new_tokens
        assert (
            via_sd_generate(
                fx.target,
                fx.drafter,
                None,
                ids,
                ViaSDConfig(
                    max_new_tokens=48,
                    eos_token_id=fx.tokenizer.eos_token_id,
                    tau_accept=1.01,
                    tau_escalate=1.01,
                ),
            ).new_tokens
            == ar.new_tokens
        )
