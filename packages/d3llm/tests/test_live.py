"""Live (untrained, tiny) runs of the extraction and the distillation trainer, seconds."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def word_pair():
    from conftest import make_llama
    from d3llm import MaskedDiffusionLM

    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer([str(d) for d in range(10)] + ["="])
    model = make_llama(vocab=len(tok), seed=1)
    return MaskedDiffusionLM(model, tok.mask_token_id, "none", tok.eos_token_id), tok


def test_one_prompt_extraction_retry_ladder(word_pair):
    from d3llm import exact_answer_checker, extract_trajectories

    m, tok = word_pair
    recs = [{"idx": 7, "question": "1 2 3 =", "gt_answer": "9 9 9"}]
    ds = extract_trajectories(m, tok, recs, gen_length=4, block_length=4, max_attempts=3,
                              checker=exact_answer_checker)  # fmt: skip
    row = ds[0]
    assert row["idx"] == 7 and row["attempts"] == 3 and row["is_correct"] is False
    traj, steps = row["trajectory"], row["unmask_step"]
    assert len(traj) == 4 and sorted(steps) == [1, 2, 3, 4]
    P = len(row["prompt_ids"])
    for k, seq in enumerate(traj):  # step k has exactly k + 1 committed response positions
        assert sum(t != tok.mask_token_id for t in seq[P:]) == k + 1
    assert traj[-1] == row["final_output"]
    # an empty ground truth counts as correct (first attempt kept)
    ds2 = extract_trajectories(m, tok, [{"question": "1 =", "gt_answer": ""}], gen_length=4,
                               block_length=4, checker=exact_answer_checker)  # fmt: skip
    assert ds2[0]["attempts"] == 1 and ds2[0]["is_correct"] is True


def test_boxed_checker():
    from d3llm import boxed_answer_checker

    assert boxed_answer_checker(r"so \boxed{12}", "12")[0]
    assert boxed_answer_checker(r"so \boxed{\frac{1}{2}}", r"\boxed{0.5}")[0]
    assert not boxed_answer_checker(r"\boxed{13}", "12")[0]
    assert boxed_answer_checker("anything", "")[0]


@pytest.mark.parametrize("lora", [False, True])
def test_live_distillation_steps(word_pair, lora):
    """Three trainer steps change the weights and give a finite loss (LoRA merged back)."""
    import copy

    from d3llm import D3LLMDistillConfig, MaskedDiffusionLM, extract_trajectories, run_distillation
    from d3llm.distill import exact_answer_checker

    m0, tok = word_pair
    m = MaskedDiffusionLM(copy.deepcopy(m0.model), m0.mask_token_id, "none", m0.eos_token_id)
    recs = [{"idx": i, "question": f"{i} {i} =", "gt_answer": f"{i} {i}"} for i in range(4)]
    traj = extract_trajectories(m, tok, recs, gen_length=4, block_length=4, max_attempts=1,
                                checker=exact_answer_checker)  # fmt: skip
    examples = [{"idx": r["idx"], "prompt_ids": r["prompt_ids"],
                 "response_ids": tok(r["gt_answer"], add_special_tokens=False)["input_ids"]}
                for r in traj]  # fmt: skip
    P = len(examples[0]["prompt_ids"])
    cfg = D3LLMDistillConfig(max_length=P + 4, progressive_block_sizes=[2, 4])
    before = [p.detach().clone() for p in m.model.parameters()]
    stats = run_distillation(m, tok, examples, list(traj), cfg, max_steps=3, batch_size=2, lr=1e-2,
                    use_lora=lora, lora_r=4, lora_alpha=4)  # fmt: skip
    assert stats["steps"] == 3 and torch.isfinite(torch.tensor(stats["train_loss"]))
    after = list(m.model.parameters())
    assert len(after) == len(before)
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    assert set(stats["last_parts"]) == {"ce", "ce_c", "entropy", "entropy_c"}
