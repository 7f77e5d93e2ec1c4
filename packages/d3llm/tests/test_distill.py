"""Collator, loss and trajectory helpers (exact, seconds)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import EOS, MASK
from d3llm.distill import (
    D3LLMDistillConfig,
    PseudoTrajectoryCollator,
    block_size_at,
    d3llm_loss,
    mask_ratio_bounds,
    trajectory_from_unmask_steps,
    trajectory_response_masks,
)
from d3llm.errors import D3LLMConfigError, TrajectoryAlignmentError

P, R = 4, 8


def _record(idx=0, order=(3, 1, 5, 2, 8, 4, 7, 6)):
    prompt = [1, 5, 6, 7]
    final = prompt + [10 + i for i in range(R)]
    return {"idx": idx, "prompt_ids": prompt, "unmask_step": list(order), "final_output": final}


def _examples(n=6):
    return [{"idx": 0, "prompt_ids": [1, 5, 6, 7], "response_ids": [10 + i for i in range(R - 1)]}
            for _ in range(n)]  # fmt: skip


def test_trajectory_forms_agree():
    rec = _record()
    full = trajectory_from_unmask_steps(
        rec["prompt_ids"], rec["final_output"], rec["unmask_step"], MASK
    )
    assert len(full) == 8 and full[-1] == rec["final_output"]
    a = trajectory_response_masks(rec, MASK)
    b = trajectory_response_masks({**rec, "trajectory": full}, MASK)
    assert a == b
    assert [sum(row) for row in a] == list(range(7, -1, -1))


def test_collator_masks_follow_trajectory():
    cfg = D3LLMDistillConfig(max_length=P + R, progressive_block_sizes=[4], max_mask_ratio=0.8)
    rec = _record()
    masks = trajectory_response_masks(rec, MASK)
    coll = PseudoTrajectoryCollator(None, cfg, [rec], mask_token_id=MASK, eos_token_id=EOS, seed=1)
    for step in range(0, 100, 7):
        coll.set_progress(step, 100, 0.0)
        batch = coll(_examples())
        ids, noisy, comp = batch["input_ids"], batch["complementary_input_ids"], batch["labels"]
        for b in range(ids.shape[0]):
            s, e = int(batch["block_start"][b]), int(batch["block_end"][b])
            assert torch.equal(ids[b, :s], comp[b, :s])  # before the block: clean
            assert bool((ids[b, e:] == MASK).all()) and bool((noisy[b, e:] == MASK).all())
            blk, cblk = batch["loss_mask"][b, s:e], batch["complementary_loss_mask"][b, s:e]
            assert torch.equal(blk, ~cblk)  # exact complement inside the block
            assert not bool(batch["loss_mask"][b, :s].any())
            # the block mask is one of the trajectory's steps, at k = (s-P) + n_unmasked
            cands = [row[s - P : e - P] for row in masks]
            assert blk.tolist() in cands
            assert torch.equal(ids[b, s:e] == MASK, blk)
            assert torch.equal(noisy[b, s:e] == MASK, cblk)


def test_collator_index_rule():
    """With r fixed (min = max), k = min((s - P) + floor((1 - r) B), len - 1) exactly."""
    rec = _record()
    masks = trajectory_response_masks(rec, MASK)
    cfg = D3LLMDistillConfig(
        max_length=P + R, progressive_block_sizes=[4], min_mask_ratio=0.5, max_mask_ratio=0.5
    )
    coll = PseudoTrajectoryCollator(None, cfg, [rec], mask_token_id=MASK, eos_token_id=EOS)
    batch = coll(_examples(20))
    for b in range(20):
        s, e = int(batch["block_start"][b]), int(batch["block_end"][b])
        k = min((s - P) + math.floor(0.5 * (e - s)), len(masks) - 1)
        assert batch["loss_mask"][b, s:e].tolist() == masks[k][s - P : e - P]


def test_mask_ratio_and_block_schedules():
    cfg = D3LLMDistillConfig(min_mask_ratio=0.0, max_mask_ratio=0.8)
    lows = [mask_ratio_bounds(cfg, s, 100)[0] for s in range(0, 101, 10)]
    assert lows == sorted(lows) and lows[0] == 0.0 and lows[-1] == pytest.approx(0.8)
    sizes = [16, 16, 24, 24, 32, 32]
    assert block_size_at(sizes, 0.0) == 16 and block_size_at(sizes, 1.5) == 20
    assert block_size_at(sizes, 2.25) == 24 and block_size_at(sizes, 3.5) == 28
    assert block_size_at(sizes, 5.9) == 32 and block_size_at(sizes, 9.0) == 32


def test_collator_misaligned_trajectory():
    rec = _record()
    cfg = D3LLMDistillConfig(max_length=P + R + 4, progressive_block_sizes=[4])
    coll = PseudoTrajectoryCollator(None, cfg, [rec], mask_token_id=MASK, eos_token_id=EOS)
    with pytest.raises(TrajectoryAlignmentError, match="response of 8 positions"):
        coll(_examples(2))
    cfg = D3LLMDistillConfig(max_length=P + R + 4, progressive_block_sizes=[4], fallback="random")
    coll = PseudoTrajectoryCollator(None, cfg, [rec], mask_token_id=MASK, eos_token_id=EOS)
    with pytest.warns(UserWarning, match="at random"):
        batch = coll(_examples(2))
    assert batch["input_ids"].shape == (2, P + R + 4)


@pytest.mark.parametrize(
    "kw",
    [
        {"progressive_block_sizes": []},
        {"progressive_block_sizes": [4, 0]},
        {"min_mask_ratio": -0.1},
        {"max_mask_ratio": 1.5},
        {"min_mask_ratio": 0.9, "max_mask_ratio": 0.5},
    ],
)
def test_config_rejects_bad_values(kw):
    with pytest.raises(D3LLMConfigError):
        D3LLMDistillConfig(**kw)


def test_loss_entropy_zero_when_confident_and_correct():
    labels = torch.tensor([[3, 1]])
    logits = torch.full((1, 2, 5), -1e4)
    logits[0, 0, 3] = logits[0, 1, 1] = 1e4
    mask = torch.tensor([[True, True]])
    loss, parts = d3llm_loss(logits, labels, mask, logits, ~mask)
    assert parts["entropy"] == pytest.approx(0.0, abs=1e-6)
    assert float(loss) == pytest.approx(0.0, abs=1e-6)


def test_loss_hand_computed_two_token_toy():
    # vocab 2, token 0 target 0 with logits (1, 0); token 1 target 1 with logits (1, 0) (wrong)
    logits = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    labels = torch.tensor([[0, 1]])
    mask = torch.tensor([[True, True]])
    comp = torch.tensor([[False, True]])
    loss, parts = d3llm_loss(logits, labels, mask, logits, comp, entropy_weight=2.0,
                             entropy_temperature=0.5)  # fmt: skip
    lse = math.log(math.e + 1)
    ce = ((lse - 1) + lse) / 2
    ce_c = lse
    # entropy only at position 0 (argmax == target), softmax(logits / 0.5) = softmax(2, 0)
    p = math.exp(2) / (math.exp(2) + 1)
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert parts["ce"] == pytest.approx(ce, rel=1e-6)
    assert parts["ce_c"] == pytest.approx(ce_c, rel=1e-6)
    assert parts["entropy"] == pytest.approx(h, rel=1e-6)
    assert float(loss) == pytest.approx((ce + ce_c + 2.0 * h) / 4, rel=1e-6)
    # Dream adds the complementary entropy (position 1 is wrong there: 0)
    loss_d, parts_d = d3llm_loss(logits, labels, mask, logits, comp, variant="dream")
    assert parts_d["entropy_c"] == 0.0 and float(loss_d) == pytest.approx(float(loss), rel=1e-6)
