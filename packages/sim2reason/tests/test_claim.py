"""Claim: GRPO on simulator QA alone raises accuracy on held-out questions, and (extended,
does not hold at this scale) on differently-phrased textbook problems (the paper's Sec. 4).

The arm is a cached zoo entry (``sim2reason-grpo-arm``, built by the fixture phase or on first
use): a 2 x 128 character-level Llama warm-started (completion-only SFT, 200 steps x 32) on
textbook worked solutions, gated to proxy accuracy in [0.10, 0.40]; then the pass-rate
prefilter (8 samples at T = 1 over the 431 simulator prompts, keep 0 < pass < 1) and 60 GRPO
steps of 8 prompts x 8 generations (tiny preset: dapo loss, lr 3e-5 constant, beta 0, T = 1,
48 new tokens) on simulator QA (constant force, Atwood, projectile). Accuracies are greedy,
5 % rule, on the same 500 proxy and 500 synthetic items before and after.

Calibration (seed 0, one torch thread, 2-core machine shared with 3 other builds, load 4-5):

| try | warm start | prefilter (kept / mean pass kept) | GRPO | proxy before -> after | synthetic before -> after |
|---|---|---|---|---|---|
| 0 | 300 steps, all 6 sim quantities | - | - | 0.674 (above the gate) | 0.044 |
| 1 | 150 steps, quantities shared with the prior | 58 of 256 / 0.18 | lr 5e-5, 60 steps | 0.128 -> 0.112 (-0.016) | 0.028 -> 0.204 (+0.176) |
| 2 | 200 steps, same | 111 of 431 / 0.20 | lr 3e-5, 60 steps | 0.232 -> 0.212 (-0.020) | 0.068 -> 0.144 (+0.076) |
| 3 | as 2 | as 2 | as 2 + beta 0.001 (reference model) | 0.232 -> 0.208 (-0.024) | 0.068 -> 0.160 (+0.092) |

Try 2 is the shipped configuration. A cold rebuild after the 0.1.1 engine/QA/reward changes
(new code digest, same 931 questions, answers equal to within 1.5e-16) reproduced try 2's
numbers exactly: proxy 0.232 -> 0.212, synthetic 0.068 -> 0.144 (+0.076). The synthetic rise holds with margin (+0.076 vs 0.05; a
paired difference on 500 items has a standard error of about 0.02). The proxy did not rise in
any GRPO run (-0.016, -0.020, -0.024; a KL anchor did not stop the small drift): RL on the simulator's phrasing fixed the model's reading of
that phrasing but did not carry over to the textbook wording at this scale; the proxy part is
therefore asserted only in the extended tier (``test_proxy_transfer``), marked as not holding.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def arm():
    from sim2reason.arm import build_arm

    return build_arm()


@pytest.mark.claim
@pytest.mark.slow
def test_grpo_on_simulator_qa_raises_synthetic_accuracy(arm):
    from sim2reason.arm import ArmConfig, claim_data, evaluate_items

    m = arm.metrics
    assert m["n_proxy"] >= 500 and m["n_synthetic"] >= 500
    assert 0.10 <= m["proxy_before"] <= 0.40  # the warm start's gate window
    assert m["synthetic_after"] - m["synthetic_before"] >= 0.05
    # The cached policy itself, evaluated here, reproduces the recorded accuracy.
    model, tok = arm.load()
    data = claim_data(ArmConfig().seed)
    res = evaluate_items(model, tok, [q.text for q in data.synthetic_test],
                         [q.answer for q in data.synthetic_test])  # fmt: skip
    assert res["n"] >= 500
    assert res["accuracy"] == pytest.approx(m["synthetic_after"], abs=0.01)


@pytest.mark.extended
@pytest.mark.xfail(
    strict=False,
    reason="proxy accuracy fell 0.016-0.024 after GRPO in all three calibrated runs (module docstring)",
)
def test_proxy_transfer(arm):
    m = arm.metrics
    assert m["proxy_after"] - m["proxy_before"] >= 0.05
