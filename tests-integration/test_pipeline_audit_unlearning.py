"""Pipeline 3, audit an unlearned model (unlearn-leakk + ptdi; recipe:
docs/recipes/audit-an-unlearned-model.md).

Two views of "did it forget" on unlearn-leakk's greedy-stopped GradDiff models (seeds 0-2,
each forgetting one pair of fictitious authors of its 20-author world, stopped when greedy
decoding answers at most 10 % of the forget questions):

- leak@k: sampled answers (T = top-p = 1, n = 32 per question, exact-phrase judge) to the 10
  forget questions per seed;
- PTDI: the 30 forget-set documents per seed (5 facts x 3 renderings x 2 authors), scored by
  the unlearned model (mean token log-prob, fixed before looking at any data) and tested
  against known non-members: the 600 documents of two other worlds made by the same generator
  (``make_world(101)``, ``make_world(102)``), never seen in training. At alpha = 0.1 the
  selection's false identification rate (FIR) is measured on held-out non-members over 500
  random splits (540 calibration / 60 test non-members beside the 30 forget documents).

Calibration (2026-12-01, the cached fixtures; loss score, JKBB): greedy forget accuracy 0.10 on
every seed; leak@16 0.276 / 0.200 / 0.200 (pooled 0.225, 2.3 x the greedy 0.10); PTDI power on
the forget documents 0.967 / 0.763 / 1.000 (original world model: 1.000 on every seed) at FIR
0.088 / 0.086 / 0.089. Thresholds: the PTDI guarantee itself (FIR <= alpha + 3 SE), leak@16
above the greedy leak (the paper's direction) and PTDI selecting at least half of the forget
documents (pooled; measured 0.91).
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEEDS = (0, 1, 2)
ALPHA = 0.1
N_SAMPLES = 32
K = 16


@pytest.fixture(scope="module")
def audit():
    from ptdi import MembershipScorer, evaluate, ptdi_select
    from unlearn_leakk import (
        DecodingConfig,
        ExactPhraseJudge,
        fixtures,
        greedy_accuracy,
        leak_at_k_curve,
        sample_responses,
    )
    from unlearn_leakk.world import make_world, world_recipe

    from llmcore import zoo

    world = make_world(0)
    non_members = make_world(101).documents() + make_world(102).documents()
    original, tok = zoo.build(world_recipe(), progress=False).load()
    judge = ExactPhraseJudge()
    builders = {
        0: fixtures.build_baseline_seed0,
        1: fixtures.build_baseline_seed1,
        2: fixtures.build_baseline_seed2,
    }
    rows = []
    for seed in SEEDS:
        model, _ = builders[seed]().load()
        authors = world.forget_authors(seed % 3)
        forget_q = world.qa_items(authors)
        forget_docs = world.documents(authors)
        # view 1: leak@k under sampling
        dec = DecodingConfig(
            1.0, 1.0, n=N_SAMPLES, max_new_tokens=16, seed=1000 + seed, batch_size=N_SAMPLES
        )
        outs = sample_responses(model, tok, forget_q, dec, chat_template=False)
        counts = [
            int(sum(v >= 0.5 for v in judge(list(r), it.answer)))
            for r, it in zip(outs, forget_q, strict=True)
        ]
        leak = leak_at_k_curve(counts, N_SAMPLES, [1, K])
        # view 2: PTDI, forget documents against known non-members
        scorer = MembershipScorer(model, tok, scores=("loss",), batch_size=32)
        s_forget = scorer.score(forget_docs)["loss"]
        s_non = scorer.score(non_members)["loss"]
        ev = evaluate(
            s_forget,
            s_non,
            alphas=[ALPHA],
            pi_estimators=("jkbb",),
            n_exp=500,
            test_member_ratio=1.0,
            test_nonmember_ratio=0.1,
            cal_ratio=0.9,
        )["results"]["jkbb"]
        # one concrete selection: calibration = the first 540 non-members, test = the rest
        sel = ptdi_select(s_non[:540], np.r_[s_forget, s_non[540:]], ALPHA)
        chosen = np.asarray(sel.selected).reshape(-1)[: len(forget_docs)]
        qa = np.array([d.startswith("Q: ") for d in forget_docs])
        s_orig = MembershipScorer(original, tok, scores=("loss",)).score(forget_docs)["loss"]
        rows.append(
            {
                "seed": seed,
                "greedy_forget_acc": greedy_accuracy(model, tok, forget_q),
                "leak@1": leak[1],
                f"leak@{K}": leak[K],
                "fir": ev["FDP"][0],
                "fir_se": ev["FDP_se"][0],
                "power": ev["Power"][0],
                "selected_qa": float(chosen[qa].mean()),
                "selected_declarative": float(chosen[~qa].mean()),
                "loss_forget_unlearned": float(np.mean(s_forget)),
                "loss_forget_original": float(np.mean(s_orig)),
                "loss_non_members": float(np.mean(s_non)),
            }
        )
        print(f"\naudit seed {seed}: " + ", ".join(f"{k}={v:.3f}" for k, v in rows[-1].items()))
    return rows


def test_greedy_says_forgotten_but_sampling_leaks(audit):
    assert all(r["greedy_forget_acc"] <= 0.1 for r in audit)
    greedy = np.mean([r["greedy_forget_acc"] for r in audit])
    assert np.mean([r[f"leak@{K}"] for r in audit]) > greedy


def test_ptdi_still_identifies_the_forget_set_as_training_data(audit):
    for r in audit:
        assert r["fir"] <= ALPHA + 3 * r["fir_se"], r  # the selection's guarantee holds
        assert r["loss_forget_unlearned"] < r["loss_forget_original"]  # unlearning did act
    assert np.mean([r["power"] for r in audit]) >= 0.5
