"""Extended tier (``nox -s extended``): report-only estimators over the whole grid and the model
claim on more training seeds and levels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ptdi.stats import simulate

GRID = list(itertools.product((20, 100, 500), (200, 1000), (0.0, 0.2, 0.5, 0.8, 0.95), (1, 2, 3)))


@pytest.mark.extended
def test_report_jkbb_z0_and_auto_over_grid():
    """JKBB z = 0 and jkbb_auto: FIR and power per cell (reported, not asserted)."""
    over = {"jkbb_z0": 0, "jkbb_auto": 0}
    worst = {"jkbb_z0": 0.0, "jkbb_auto": 0.0}
    for n, m, pi, mu in GRID:
        res = simulate(n, m, pi, mu, (0.05, 0.1, 0.2), reps=100, seed=0,
                       estimators=("jkbb_z0", "jkbb_auto"))["results"]  # fmt: skip
        for est, r in res.items():
            for j, a in enumerate((0.05, 0.1, 0.2)):
                worst[est] = max(worst[est], r["fir"][j] - a)
                over[est] += r["fir"][j] > a + 3 * r["fir_se"][j]
    print(f"\ncells above alpha + 3 SE (of 270): {over}; largest FIR - alpha: {worst}")


@pytest.mark.extended
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_model_claim_other_training_seeds(seed):
    from ptdi.tiny import auc, build_members_model, score_language
    from test_claim_model import run_protocol

    model, tok = build_members_model(seed=seed).load()
    sc, labels = score_language(model, tok)
    for name, s in sc.items():
        half, high = run_protocol(s, labels, 0.5), run_protocol(s, labels, 0.9)
        print(f"\nseed {seed} {name}: AUC {auc(s[labels == 1], s[labels == 0]):.3f} "
              f"pi=0.5 power jkbb {half['jkbb']['power']:.3f} bh {half['bh']['power']:.3f}; "
              f"pi=0.9 jkbb {high['jkbb']['power']:.3f} storey {high['storey']['power']:.3f}")  # fmt: skip
        for res in (half, high):
            for r in res.values():
                assert r["fir"] <= 0.1 + 3 * r["se"]
        assert half["jkbb"]["power"] >= 1.1 * half["bh"]["power"]
        assert high["jkbb"]["power"] > high["storey"]["power"]


@pytest.mark.extended
@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.3, 0.4, 0.5])
def test_model_claim_levels(alpha):
    from ptdi.tiny import build_members_model, score_language
    from test_claim_model import run_protocol

    model, tok = build_members_model().load()
    sc, labels = score_language(model, tok)
    for name, s in sc.items():
        for pi in (0.5, 0.9):
            res = run_protocol(s, labels, pi, alpha=alpha)
            print(f"\nalpha {alpha} {name} pi={pi}: " + ", ".join(
                f"{e} {r['fir']:.3f}/{r['power']:.3f}" for e, r in res.items()))  # fmt: skip
            for r in res.values():
                assert r["fir"] <= alpha + 3 * r["se"]
            assert res["jkbb"]["power"] >= res["bh"]["power"]
    assert np.isfinite(alpha)
