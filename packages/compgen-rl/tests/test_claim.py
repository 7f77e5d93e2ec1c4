"""Claim D1: RL after SFT solves unseen recombinations that SFT alone does not.

Setting (the routing-context CPU split): tiny inventory (6 skills x 4 routings, alphabet a-f),
length-4 inputs, L_train = 2; one held-out local event per skill at step 2 under a routing that
is not value-identical to a seen one (sort, inc, mirror under chain; rev, swap, rot1 under
splice): 216 SFT / 36 RL / 36 unseen-test signatures. SFT: 2 x 128 Llama, 1,000 x 64, lr 1e-3
cosine (cached fixture ``compgen-rl-sft``). RL: prefilter 1,000 RL prompts x 8 samples at T 1.0
(keep 0 < pass < 1; 128 prompts per sampling call), GRPO 8 prompts x 8 generations, lr 2e-5
constant, beta 0, dapo, T 1.0, completion <= 28 tokens, 60 steps (cached arm
``compgen-rl-sft-rl``). Both models are evaluated live, greedily, on the same 500 seen and 500
unseen prompts.

Thresholds are the method's margins, not tuned here: unseen gain >= 0.05, seen drop <= 0.03,
unseen step accuracy rises, SFT unseen accuracy inside [0.05, 0.70] (non-degenerate).

Calibration (seed 0, this lock: torch 2.14 / transformers 5.20 / trl 1.16, one thread).
SFT gate on 200 prompts: seen 0.935, unseen 0.36. On the 500 + 500 test prompts SFT has seen
0.936, unseen 0.426 (step_acc 0.713).

This test's arm (try P1 below): the prefilter kept 363 of 1,000 RL prompts (447 never solved,
190 always; mean pass of kept 0.55). Unseen 0.426 -> 0.488 (+0.062, paired SE 0.014, SE
clustered by signature 0.025), seen 0.936 -> 0.934 (-0.002, SE 0.010), unseen step_acc 0.713 ->
0.744, frac_reward_zero_std 0.25 -> 0.625. Holds, with a thin margin on the unseen gain (0.012
above 0.05, about half a clustered SE); per event: rev@2/splice 0.18 -> 0.36, swap@2/splice
0.30 -> 0.45, sort@2/chain 0.55 -> 0.57, rot1@2/splice 0.57 -> 0.59, mirror@2/chain 0.84 ->
0.88, inc@2/chain 0.16 -> 0.12.

Earlier arms of the same SFT model with the prefilter at 16 prompts per sampling call (it kept
370 prompts: 447 never solved, 183 always):

* lr 5e-5, beta 0 (the earlier prototype's recipe): unseen 0.496 (+0.070), seen 0.874 (-0.062):
  fails the seen margin; frac_reward_zero_std 0.375 -> 0.625.
* lr 5e-5, beta 0.04 (KL anchor): unseen 0.486 (+0.060, clustered SE 0.030), seen 0.866
  (-0.070): fails the seen margin.
* lr 2e-5, beta 0 (the previous claim arm): unseen 0.486 (+0.060, paired SE 0.013, clustered SE
  0.017), seen 0.936 (+0.000), unseen step_acc 0.713 -> 0.743, frac_reward_zero_std 0.375 -> 0.5.

Cheaper SFT recipes (the 1,000-step SFT is most of the fixture cost). Every try: same split,
seed 0, the same 500 + 500 prompts; prefilter 1,000 x 8 at 128 prompts per sampling call; GRPO
as above at the lr given. Recipes were written here before each was measured. CPU seconds are
process time on the shared 2-core machine at load 4-6 (inflated by contention).

* S1: SFT 700 x 64, lr 1e-3 (cosine as above); GRPO lr 2e-5 and 5e-5.
* S2: SFT 600 x 64, lr 1e-3; GRPO lr 2e-5 and 5e-5.
* S3: SFT 600 x 64, peak lr 2e-3 (50 warm-up steps, cosine to 10 %); GRPO lr 2e-5.
* S3b: the S3 SFT model, GRPO lr 5e-5 (the earlier prototype's rate, where its SFT model had a
  similar unseen accuracy).
* S4: SFT 600 x 64, peak lr 3e-3 (otherwise as S3); GRPO lr 5e-5, then 2e-5 if 5e-5 fails.
* S5: SFT 1,000 x 32 (a step of 32 sequences costs half a step of 64, measured), peak lr 1.5e-3
  (S3's 2e-3 scaled by 1/sqrt(2) for half the batch), 50 warm-up steps, cosine to 10 %; GRPO
  lr 5e-5, then 2e-5 if 5e-5 fails.
* P1: the claim's SFT model (1,000 x 64, lr 1e-3), prefilter at 128 prompts per sampling call
  instead of 16 (30-40 s cheaper), GRPO lr 2e-5 as in the claim.

Results (SFT seen / unseen -> after GRPO; kept = prompts the prefilter kept):

=====  ============  =============  ====  ========  =============  =======================  ====
try    SFT CPU s     SFT seen/uns.  kept  GRPO lr   seen change    unseen gain (clust. SE)  D1
=====  ============  =============  ====  ========  =============  =======================  ====
S1     ~270 (wall)   0.816 / 0.338  406   2e-5      -0.008         +0.028 (0.015)           no
S1     same          same           406   5e-5      -0.036         +0.046 (0.020)           no
S2     ~223 (wall)   0.744 / 0.326  395   2e-5      -0.024         +0.022 (0.019)           no
S2     same          same           395   5e-5      -0.062         +0.026 (0.024)           no
S3     260           0.872 / 0.144  199   2e-5      -0.028         +0.040 (0.027)           no
S3b    same          same           199   5e-5      -0.036         +0.076 (0.031)           no
S4     253           0.820 / 0.116  -     not run: SFT seen < 0.85                          no
S5     254           0.896 / 0.152  75    5e-5      -0.052         +0.052 (0.031)           no
S5     same          same           75    2e-5      -0.006         +0.032 (0.013)           no
P1     (1,000 x 64)  0.936 / 0.426  363   2e-5      -0.002         +0.062 (0.025)           yes
=====  ============  =============  ====  ========  =============  =======================  ====

No SFT run that costs less than the 1,000-step one reaches seen accuracy near 0.93; from the
weaker models GRPO either gains less than 0.05 on unseen (lr 2e-5) or costs more than 0.03 on
seen (lr 5e-5). The fixture keeps the 1,000-step SFT model; only the prefilter got cheaper (P1).
"""

from __future__ import annotations

import pytest
from compgen_rl.evaluate import evaluate, paired_gain
from compgen_rl.tiny import claim_split, split_rows


@pytest.mark.claim
def test_d1_rl_after_sft_generalises_to_unseen_recombinations(claim_arms, record_property):
    sft_entry, rl_entry = claim_arms
    rows, _ = split_rows(claim_split())
    seen, unseen = rows["test_seen"], rows["test_unseen"]
    assert len(seen) >= 500 and len(unseen) >= 500
    res = {}
    for name, entry in (("sft", sft_entry), ("sft_rl", rl_entry)):
        model, tok = entry.load()
        res[name] = {
            s: evaluate(model, tok, r, return_rows=True)
            for s, r in (("seen", seen), ("unseen", unseen))
        }
    sft, rl = res["sft"], res["sft_rl"]
    g_unseen = paired_gain(
        sft["unseen"]["correct"], rl["unseen"]["correct"], sft["unseen"]["signature"]
    )
    g_seen = paired_gain(sft["seen"]["correct"], rl["seen"]["correct"], sft["seen"]["signature"])
    summary = {
        "sft_seen": sft["seen"]["acc"],
        "sft_unseen": sft["unseen"]["acc"],
        "rl_seen": rl["seen"]["acc"],
        "rl_unseen": rl["unseen"]["acc"],
        "gain_unseen": g_unseen,
        "gain_seen": g_seen,
        "step_unseen": (sft["unseen"]["step_acc"], rl["unseen"]["step_acc"]),
        "frac_reward_zero_std": (
            rl_entry.metrics.get("frac_reward_zero_std_first"),
            rl_entry.metrics.get("frac_reward_zero_std_last"),
        ),
        "prefilter_kept": rl_entry.metrics.get("prefilter_kept"),
    }
    record_property("d1", summary)
    print("D1", summary)
    assert 0.05 <= sft["unseen"]["acc"] <= 0.70, summary
    assert rl["unseen"]["acc"] - sft["unseen"]["acc"] >= 0.05, summary
    assert rl["seen"]["acc"] >= sft["seen"]["acc"] - 0.03, summary
    assert rl["unseen"]["step_acc"] > sft["unseen"]["step_acc"], summary
    assert rl_entry.metrics.get("frac_reward_zero_std_first") is not None
