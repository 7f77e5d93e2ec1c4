"""GRPO wiring: presets, a live 3-step smoke run of train_grpo, the prefilter, evaluation."""

from __future__ import annotations

import math

import pytest
import torch
from sim2reason.errors import ConfigError


@pytest.fixture(scope="module")
def tiny_lm():
    from llmcore.zoo import train_bpe_tokenizer
    from llmcore.zoo.recipes import ModelSpec
    from llmcore.zoo.train import build_model

    tok = train_bpe_tokenizer(["block0: m=2 kg, F=4 N. velocity at t=1.50 s? \\boxed{3}"], 264)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model(ModelSpec(hidden_size=32, num_layers=1, num_heads=2,
                                      intermediate_size=64, max_position_embeddings=96), tok, seed=0)  # fmt: skip
    return model, tok


def _ds(tok, n=8):
    from datasets import Dataset

    return Dataset.from_list(
        [{"prompt": tok.bos_token + f"block0: m=2 kg, F={i} N. v at t=1.00 s?\n", "answer": i / 2}
         for i in range(1, n + 1)]
    )  # fmt: skip


def test_presets_map_the_recipe():
    from sim2reason.train import grpo_config

    off = grpo_config("official", max_completion_length=64)
    assert off.importance_sampling_level == "sequence" and off.beta == 0.001
    assert (off.epsilon, off.epsilon_high, off.num_generations) == (3e-4, 4e-4, 16)
    assert (off.learning_rate, off.warmup_steps, off.weight_decay, off.max_grad_norm) == (
        1e-6,
        10,
        0.1,
        1.0,
    )
    assert off.use_cpu and not off.bf16
    tiny = grpo_config("tiny")
    assert tiny.num_generations == 8 and tiny.per_device_train_batch_size == 64
    assert tiny.max_completion_length == 48 and tiny.beta == 0.0
    with pytest.raises(ConfigError, match="preset"):
        grpo_config("huge")
    with pytest.raises(Exception, match="num_generations"):
        grpo_config("tiny", num_generations=7)


def test_grpo_smoke_three_steps(tiny_lm):
    """Three live steps of the arm's own train_grpo (tiny preset, shrunk batch): finite loss."""
    from sim2reason.train import grpo_config, train_grpo

    model, tok = tiny_lm
    cfg = grpo_config("tiny", max_steps=3, per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, learning_rate=1e-3)  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    trained = train_grpo(model, tok, _ds(tok), None, cfg)
    hist = [h for h in trained.sim2reason_log_history if "loss" in h]
    assert len(hist) == 3
    assert all(math.isfinite(h["loss"]) for h in hist)
    assert all("reward" in h for h in hist)
    changed = any(not torch.equal(a, b) for a, b in zip(before, trained.parameters(), strict=True))
    # A random policy gets zero reward everywhere -> zero advantages; the weights may stay.
    assert isinstance(changed, bool)


def test_prefilter_and_accuracy(tiny_lm):
    from sim2reason.evaluate import accuracy
    from sim2reason.train import prefilter_by_pass_rate

    model, tok = tiny_lm
    ds = _ds(tok, 4)
    kept, res = prefilter_by_pass_rate(model, tok, ds, k=4, max_new_tokens=6)
    assert len(res.rates) == 4 and len(kept) == len(res.kept_indices)
    assert all(0 < r < 1 for r in res.kept_rates)
    rows = [{"prompt": r["prompt"], "answer": r["answer"], "scene_type": "cf"} for r in ds]
    out = accuracy(model, tok, rows, n=2, temperature=1.0, max_new_tokens=6,
                   format_prompt=lambda p: p)  # fmt: skip
    assert (
        set(out) >= {"mean@2", "pass@2", "per_scene_type"}
        and 0 <= out["mean@2"] <= out["pass@2"] <= 1
    )
