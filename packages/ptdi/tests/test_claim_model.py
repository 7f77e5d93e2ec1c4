"""Claim on a model with known membership: FIR control and power gains on real scores.

Setup: 600 documents of 48 pseudo-words from a seeded Zipf-bigram language (2,000 words, 8
successors each), 300 members; a Llama 4 x 128 (word tokenizer over every pseudo-word) trained on
members only; 500 random splits, calibration = 150 non-members, alpha = 0.1.

Calibration (seed 0, one thread): the recipe's levers were training steps and the language.
- uniform successors, 300 steps: final train loss 0.13, AUC 1.00 for every score: members get
  the smallest p-value 1/151, BH already has power 1.0 (ratio 1.0, no room for the claim);
- uniform successors, 2 per word, 100 steps: AUC 1.00 (unseen bigrams give non-members away);
- Zipf(1.0) successors, 8 per word, 60 steps: loss AUC 0.793 (below the 0.8 gate);
- Zipf(1.0), 80 steps: AUC 0.92-0.95, power saturates at pi = 0.9 (storey 0.999 vs jkbb 0.998
  for zlib and minkpp: the strict inequality fails by saturation);
- Zipf(1.0), 70 steps (the fixture): AUC loss 0.856, zlib 0.895, mink 0.863, minkpp 0.897;
  pi = 0.5 power jkbb/bh = 2.27, 1.42, 2.60, 1.86 (>= 1.1 asserted); pi = 0.9 power jkbb vs
  storey 0.961/0.881, 0.988/0.954, 0.993/0.954, 0.993/0.976; largest mean FIR 0.086
  (SE 0.0026) at pi = 0.5 (mink, jkbb).
"""

from __future__ import annotations

import numpy as np
import pytest
from ptdi.stats import bh_select, conformal_pvalues, jkbb_pi0, selection_metrics, storey_pi0
from ptdi.tiny import auc, model_splits, tpr_at_fpr

ALPHA = 0.1


@pytest.fixture(scope="module")
def scores():
    from ptdi.tiny import build_members_model, score_language

    entry = build_members_model()
    model, tok = entry.load()
    return score_language(model, tok)


def run_protocol(s: np.ndarray, labels: np.ndarray, pi: float, seed: int = 0, alpha=ALPHA):
    cal, test, lab = model_splits(s, labels, pi, n_splits=500, seed=seed)
    p = conformal_pvalues(cal, test)
    out = {}
    for est, pi0 in (("bh", 1.0), ("storey", storey_pi0(p)), ("jkbb", jkbb_pi0(p))):
        met = selection_metrics(bh_select(p, alpha, scale=np.asarray(pi0)), lab)
        out[est] = {
            "fir": met["FDP"].mean(),
            "se": met["FDP"].std(ddof=1) / np.sqrt(500),
            "power": met["Power"].mean(),
        }
    return out


@pytest.mark.claim
@pytest.mark.slow
def test_claim_model_fir_and_power(scores):
    sc, labels = scores
    for name, s in sc.items():
        a = auc(s[labels == 1], s[labels == 0])
        tpr = tpr_at_fpr(s[labels == 1], s[labels == 0])
        half = run_protocol(s, labels, 0.5)
        high = run_protocol(s, labels, 0.9)
        print(f"\n{name}: AUC {a:.3f} TPR@1%FPR {tpr:.3f}")
        for pi, res in ((0.5, half), (0.9, high)):
            row = ", ".join(
                f"{e} FIR {r['fir']:.3f} power {r['power']:.3f}" for e, r in res.items()
            )
            print(f"  pi={pi}: {row}")
            for est, r in res.items():
                assert r["fir"] <= ALPHA + 3 * r["se"], (name, pi, est, r)
        assert half["jkbb"]["power"] >= 1.1 * half["bh"]["power"], name
        assert high["jkbb"]["power"] > high["storey"]["power"], name
