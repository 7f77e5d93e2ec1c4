"""Live trainer smoke tests on a random tiny model: GRPO (2 steps of the arm's own run_grpo,
finite loss, the reward receives the answer column), SFTTrainer, prefilter, RFT."""

from __future__ import annotations

import math

import pytest
from compgen_rl.train import GRPOArgs, RFTArgs, SFTArgs, prefilter_rows, run_grpo, run_rft, run_sft


def test_grpo_smoke(tiny_model, monkeypatch):
    import compgen_rl.rewards as rw

    model, tok, rows = tiny_model
    seen_answers = []
    orig = rw.exact_match_reward

    def spy(completions, answer, **kw):
        seen_answers.extend(answer)
        return orig(completions, answer, **kw)

    monkeypatch.setattr(rw, "exact_match_reward", spy)
    cfg = GRPOArgs(
        steps=2, prompts_per_step=2, num_generations=4, max_completion_length=8, prefilter=False
    )
    _, stats = run_grpo(model, tok, rows["rl"][:8], cfg)
    assert stats["steps"] == 2
    assert stats["loss_last"] is not None and math.isfinite(stats["loss_last"])
    assert stats["frac_reward_zero_std_first"] is not None
    assert set(seen_answers) <= {r["answer"] for r in rows["rl"][:8]} and seen_answers


def test_grpo_constructor_can_log_after_a_reset(tiny_model):
    """trl's GRPOTrainer logs through accelerate in its constructor for some settings (here: the
    ``luspo`` loss at token-level importance sampling), before it builds its Accelerator.
    ``run_grpo`` resets accelerate's process state with its own config just before the trainer,
    so that works even right after another trainer's reset."""
    import copy

    from llmcore.rl import reset_accelerate_state

    model, tok, rows = tiny_model
    reset_accelerate_state()  # what a previous run_sft / run_grpo leaves behind
    cfg = GRPOArgs(
        steps=1,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=8,
        prefilter=False,
        loss_type="luspo",
    )
    _, stats = run_grpo(copy.deepcopy(model), tok, rows["rl"][:4], cfg)
    assert stats["steps"] == 1


def test_sft_trainer_smoke(tiny_model):
    import copy

    import torch

    model, tok, rows = tiny_model
    m = copy.deepcopy(model)
    before = [p.detach().clone() for p in m.parameters()]
    m = run_sft(m, tok, rows["sft"][:32], SFTArgs(steps=2, batch_size=8, warmup_steps=0))
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True))


def test_prefilter_and_rft(tiny_model):
    import copy

    model, tok, rows = tiny_model
    kept, stats = prefilter_rows(model, tok, rows["rl"][:6], k=4, max_new_tokens=8)
    assert stats["n"] == 6 and stats["kept"] == len(kept)
    assert stats["never"] + stats["always"] + stats["kept"] == 6
    _, st = run_rft(
        copy.deepcopy(model),
        tok,
        rows["rl"][:6],
        RFTArgs(samples=12, samples_per_prompt=4, steps=1),
    )
    assert st["prompts"] == 3 and st["samples"] == 12


def test_bf16_on_cpu_is_refused(tiny_model):
    model, tok, rows = tiny_model
    with pytest.raises(ValueError, match="use_cpu=True, bf16=False"):
        run_sft(model, tok, rows["sft"][:4], SFTArgs(steps=1, bf16=True))
    with pytest.raises(ValueError, match="bf16=False"):
        run_grpo(
            model,
            tok,
            rows["rl"][:4],
            GRPOArgs(steps=1, bf16=True, prefilter=False, prompts_per_step=2),
        )


def test_grpo_with_lora_adapter(tiny_model):
    import copy

    peft = pytest.importorskip("peft")
    model, tok, rows = tiny_model
    lora = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
    )
    cfg = GRPOArgs(
        steps=1, prompts_per_step=2, num_generations=4, max_completion_length=8, prefilter=False
    )
    m, stats = run_grpo(copy.deepcopy(model), tok, rows["rl"][:4], cfg, peft_config=lora)
    assert stats["steps"] == 1
    assert any("lora" in n for n, _ in m.named_parameters())
