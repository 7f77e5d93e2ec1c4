"""Claim: GRPO on simulator QA alone raises accuracy on held-out questions, and (extended,
does not hold at this scale) on differently-phrased textbook problems (the paper's Sec. 4).

The arm is a cached zoo entry (``sim2reason-grpo-arm``, built by the fixture phase or on first
use): a 2 x 128 character-level Llama warm-started (completion-only SFT, 200 steps x 32,
documents up to 144 tokens) on textbook worked solutions, gated to proxy accuracy in [0.10, 0.40]; then the pass-rate
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
| 2b | as 2, no prior document truncated (29 of the 504 lost the end of their boxed answer at tries 1-4's 128-token limit) | 101 of 431 / 0.21 | as 2 | 0.264 -> 0.218 (-0.046) | 0.068 -> 0.158 (+0.090) |
| 4 | as 2 | as 2 (111 / 0.20) | lr 1e-5, 60 steps | 0.232 -> 0.232 (+0.000) | 0.068 -> 0.106 (+0.038) |
| 5 | 200 steps, prior + worked solutions of the 281 simulator-phrased RL questions whose physics is no proxy problem's | 226 of 431 / 0.28 (all: 0.23) | lr 3e-5, 60 steps | 0.138 -> 0.200 (+0.062) | 0.284 -> 0.316 (+0.032) |
| 6 | as 5 | as 5 | lr 5e-5, 60 steps | 0.138 -> 0.202 (+0.064) | 0.284 -> 0.320 (+0.036) |
| 7 | as 5 | as 5 at T = 0.7: 214 / 0.28 | as 6 at rollout T = 0.7 | 0.138 -> 0.180 (+0.042) | 0.284 -> 0.314 (+0.030) |
| 8 | as 5 | as 5 | as 6 + beta 0.001 (reference model) | 0.138 -> 0.192 (+0.054) | 0.284 -> 0.320 (+0.036) |
| 9 | as 5 | as 5 | as 6 with 4 prompts x 16 generations per step (same 64 rollouts) | 0.138 -> 0.172 (+0.034) | 0.284 -> 0.322 (+0.038) |
| 10 | as 5 | as 5 | as 6, 120 steps (twice the GRPO CPU time: over the fixtures' budget, report only) | 0.138 -> 0.172 (+0.034) | 0.284 -> 0.298 (+0.014) |

Try 2b is the shipped configuration: try 2's recipe with the warm start's length limit raised
to 144 tokens (tries 5-10 need it for the simulator-phrased documents; it also stops cutting
the boxed answers of 29 textbook documents, so the warm start changed). Try 2's numbers had
been reproduced exactly by every rebuild under new engine/QA/reward code (same 931
questions). The synthetic rise holds with margin (+0.090 vs 0.05; a paired difference on 500
items has a standard error of about 0.02); the proxy falls (-0.046).

The proxy part does not hold with any recipe tried; it is asserted only in the extended tier
(``test_proxy_transfer``, xfail). Why the proxy falls with the textbook-only prior: on the
proxy problems try 2 loses after GRPO (43 lost, 33 gained), the steps are often still right and the
boxed number wrong (``a=15/5=3 \\boxed{6}``, ``T=19.62*2*4/6=26.2 \\boxed{262}``) or a
parameter is copied wrongly; every answer stays boxed, so it is not a format or extraction
failure. The warm start cannot read the simulator's compact phrasing (its greedy answers to
simulator prompts are fragments of worked solutions), so GRPO rewards boxed guesses (9.81 for
every projectile acceleration) and loosens the tie between the steps and the box that the
proxy relies on; lr 1e-5 (try 4) stops the drift but halves the synthetic gain. Giving the
prior worked solutions in the simulator's phrasing (tries 5-10: 281 RL questions, never a
proxy problem's physics or a synthetic test question's text; ``ArmConfig.prior_sim_phrased``)
makes rollouts solve a share of the RL prompts (mean pass 0.23 at T = 1, 226 kept) and then
the proxy does rise, +0.062 / +0.064 / +0.054 at T = 1 (+0.042 at T = 0.7, +0.034 with 16
generations of 4 prompts), but the synthetic gain drops to +0.014-0.038 whatever the lever
(lr, T, beta, group size, steps): the warm start now reads the simulator's phrasing (synthetic
before 0.284, 58 of the 500 being projectile accelerations it always solves) and the
remaining errors are copied parameters and arithmetic that 60 steps barely move (try 6:
atwood displacement 0.03 -> 0.12 and projectile velocity 0.45 -> 0.61 gain, atwood tension
and pushed-block displacement lose). Twice the GRPO steps (try 10, over the fixtures' budget)
raised the training reward (0.24 -> 0.33) but not the held-out sets: the policy fits the 226
kept prompts. No try made both halves hold on seed 0. Not tried: 16 x 8 rollouts (twice
GRPO's CPU time), a prefilter band nearer pass 0.4-0.5, a larger parameter grid.
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
    reason="no recipe made the proxy and synthetic rises hold together (module docstring)",
)
def test_proxy_transfer(arm):
    m = arm.metrics
    assert m["proxy_after"] - m["proxy_before"] >= 0.05


def test_simulator_phrased_prior_keeps_the_held_out_sets_clean():
    """``prior_sim_phrased``: every RL question gets a worked solution whose boxed answer the
    reward accepts; none is a synthetic test text or a proxy problem's physics; the proxy and
    synthetic sets are the same as without it."""
    from sim2reason.arm import claim_data, sim_worked_solution
    from sim2reason.rewards import sim2reason_reward

    base, data = claim_data(0), claim_data(0, prior_sim_phrased=True)
    assert [p["prompt"] for p in data.proxy] == [p["prompt"] for p in base.proxy]
    assert [q.text for q in data.synthetic_test] == [q.text for q in base.synthetic_test]
    worked = [sim_worked_solution(q) for q in data.rl]
    assert all(w is not None for w in worked)
    assert all(sim2reason_reward([w[0]], [q.answer], rel=0.01)[0] == 1.0
               for w, q in zip(worked, data.rl, strict=True))  # fmt: skip
    added = data.prior[len(base.prior) :]
    assert len(added) == 281
    proxy_combos = {p["combo"] for p in data.proxy}
    synthetic = {q.text for q in data.synthetic_test}
    assert not any(a["combo"] in proxy_combos or a["prompt"] in synthetic for a in added)
