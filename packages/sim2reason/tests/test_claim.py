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
| 11 | as 5, rebuilt | band 2/8 <= pass <= 7/8 (rule below): 135 of 431 / 0.40 | as 6 | 0.124 -> 0.184 (+0.060) | 0.286 -> 0.284 (-0.002) |
| 12 | as 11 | 0 < pass < 1: 228 of 431 / 0.29 | as 6 with 16 prompts x 8 generations per step (twice the rollouts), 60 steps | 0.124 -> 0.168 (+0.044) | 0.286 -> 0.306 (+0.020) |
| 13 | as 11 | as 11 (135 / 0.40) | as 12 (16 x 8, 60 steps) | 0.124 -> 0.170 (+0.046) | 0.286 -> 0.288 (+0.002) |
| 14 | as 11 | try 11's band over a larger grid (the 431 RL prompts + 554 questions at t = 1.25 / 1.75 s): 199 of 985 / 0.43 | as 6 (8 x 8, 60 steps) | 0.124 -> 0.176 (+0.052) | 0.286 -> 0.276 (-0.010) |
| 15 | as 2b, rebuilt | band 3/8 <= pass <= 6/8 (same rule) over try 14's larger grid: 30 of 985 / 0.45 | as 2b (lr 3e-5, 8 x 8, 60 steps) | 0.222 -> 0.234 (+0.012) | 0.060 -> 0.180 (+0.120) |
| 16 | as 15 | as 15 (30 / 0.45) | as 15 with 16 x 8 rollouts, 40 steps (the fixtures' CPU budget) | 0.222 -> 0.182 (-0.040) | 0.060 -> 0.182 (+0.122) |
| 17 | as 11 | 0 < pass < 1: 228 of 431 / 0.29 | as 6 (baseline of tries 11-14 on the rebuilt warm start) | 0.124 -> 0.174 (+0.050) | 0.286 -> 0.296 (+0.010) |
| 18 | as 15 | as 15 (30 / 0.45) | as 15 at lr 5e-5 | 0.222 -> 0.184 (-0.038) | 0.060 -> 0.170 (+0.110) |
| 2b, rebuilt | 2b's warm start rebuilt from an empty cache (the fixture phase; same key, different bits) | 94 of 431 / 0.21 | as 2b | 0.222 -> 0.210 (-0.012) | 0.060 -> 0.200 (+0.140) |

Try 2b is the shipped configuration: try 2's recipe with the warm start's length limit raised
to 144 tokens (tries 5-10 need it for the simulator-phrased documents; it also stops cutting
the boxed answers of 29 textbook documents, so the warm start changed). Try 2's numbers had
been reproduced exactly by every rebuild under new engine/QA/reward code (same 931
questions), but a cold build from an empty cache on 2026-12-02 (fixture phase of a clean
clone, one thread per worker, torch's AVX512 kernels with MKL unpinned, as for tries 11-18)
gave 2b's recipe a different warm start (proxy 0.222, not 0.264) and arm (row "2b, rebuilt"):
fixtures built on other CPU kernels differ in their bits. The other rows are AVX2 builds: with
the AVX2 kernels pinned (as the project's nox sessions do), the fixture phase rebuilt 2b's
warm start and arm with exactly the numbers above (0.264 -> 0.218, 0.068 -> 0.158, 101 kept).
Tries 11-18 are therefore one AVX512 build each, not the shipped fixtures' kernels. The synthetic rise holds with margin in both builds (+0.090 and
+0.140 vs 0.05; a paired difference on 500 items has a standard error of about 0.02); the
proxy falls (-0.046, -0.012).

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
kept prompts. No try made both halves hold on seed 0.

Tries 11-18 (each recipe written here before it ran): the warm start of try 5, rebuilt from an empty
cache, gives proxy 0.124 and synthetic 0.286 before GRPO (try 5's build: 0.138 / 0.284), and
its pass@8 at T = 1 over the 431 RL prompts counts 168 / 93 / 63 / 29 / 23 / 2 / 5 / 13 / 35
prompts at 0 / 1 / ... / 8 passes of 8 (mean 0.23; 0 < pass < 1 keeps 228 at mean 0.29; by
family: Atwood 0.09, pushed block 0.17, projectile 0.46). Band rule for try 11, fixed from that
distribution: keep the widest band of pass counts ``lo <= c <= hi`` (1 <= lo <= hi <= 7) whose
kept prompts' mean pass lies in [0.40, 0.50] (the kept mean at which GRPO moved held-out
accuracy in compgen-rl's calibration): 2 <= c <= 7, 135 prompts at mean 0.40 (``3 <= c <= 6``
would keep 59 at 0.46). Try 11 = try 6 (lr 5e-5, 60 steps of 8 x 8, T = 1, beta 0) on those
135 prompts. Try 12 = try 6 with 16 prompts x 8 generations per step (60 steps, twice the
rollouts of 8 x 8) on the 228 prompts of the default prefilter. Try 13 = both: try 11's band
with try 12's 16 x 8 rollouts, 60 steps. Try 14 = try 11 over a larger prefilter grid: the
same scenes, templates and shortcut filter also ask at t = 1.25 and 1.75 s (the claim's sets use
1.0 / 1.5 / 2.0 s; none of the new questions is an RL or synthetic test text, and no proxy
problem asks at those times), all prefiltered with the same 8 samples at T = 1 and try 11's band
2 <= c <= 7, then lr 5e-5, 60 steps of 8 x 8. Try 15 = the band on the shipped textbook-only
warm start (2b's recipe, rebuilt from an empty cache: proxy 0.222, synthetic 0.060 before GRPO;
pass@8 at T = 1 over the 431 RL prompts 337 / 56 / 22 / 9 / 4 / 2 / 1 at 0 / 1 / ... / 6
passes, mean 0.05): the same rule gives 3 <= c <= 6 (16 of the 431 at mean 0.46), so it is
applied over try 14's larger grid, then 2b's GRPO (lr 3e-5, 60 steps of 8 x 8). Try 16 = try 15
with 16 prompts x 8 generations per step for 40 steps (60 would pass the fixtures' 6
CPU-minute budget). Try 17 = try 6's recipe on try 11's rebuilt warm start (the baseline that
tries 11-14 change one lever of). Try 18 = try 15 at lr 5e-5.

Findings of tries 11-18 (paired standard errors of each difference 0.015-0.019): no try made
both halves hold. On the simulator-phrased warm start the proxy rises in every try (+0.044 to
+0.060; baseline try 17 +0.050) and the synthetic set does not (-0.010 to +0.020; baseline
+0.010): the band (kept mean pass 0.40-0.43) takes the synthetic change to -0.002 / -0.010,
16 x 8 rollouts to +0.020, both together to +0.002, all within about one standard error of
the baseline. Per family (try 11) both sets gain on projectile velocities (proxy 0.27 ->
0.58, synthetic 0.44 -> 0.67) while the synthetic set loses on Atwood and pushed-block
questions (0.11 -> 0.06, 0.15 -> 0.09), whose prompts the band mostly drops (27 of the 156
Atwood prompts pass 2 or more of 8). On the textbook-only warm start the band leaves 30 of
985 prompts (23 projectile, 7 pushed block, no Atwood); the proxy moves +0.012 / -0.040 /
-0.038 (lr 3e-5 at 8 x 8 / 16 x 8 for 40 steps / lr 5e-5), against -0.012 for the shipped
recipe on the same warm start, and the synthetic rise stays large (+0.110 to +0.122; shipped
+0.140), most of it projectile accelerations (0.17 -> 1.00 in try 15). CPU per try (one
thread, GRPO + evaluation in one process; the warm start, its evaluation and prefilter once
per warm start): 1.6-3.2 CPU-minutes, of which GRPO 68-92 s at 8 x 8 and 96-161 s at 16 x 8.
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
