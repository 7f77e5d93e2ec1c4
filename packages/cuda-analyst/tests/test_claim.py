"""Planted-effects recovery (claim): real evaluator (C backend, CPU), freezing, injection and
attribution; the seeded mock LLM's policy is known, so the analytic values are known.

Calibration (4 tasks x 10 frozen parents, num_run=3, num_trials=5, metric pass-or-better,
evaluations from the candidate cache; seeds 0-4, measured before the thresholds were fixed):
- |Shapley - analytic| max over players: 0.025, 0.043, 0.014, 0.016, 0.022 (threshold 0.05;
  a first recipe with milder planted effects, q in {0.05, 0.5}, missed it at seed 1 with 0.053,
  so the planted effect sizes were moved towards 0/1, the lever named for this check);
- a x p Möbius interaction (bootstrap over parents, 95 %): [0.39, 0.64], [0.35, 0.62],
  [0.26, 0.54], [0.37, 0.64], [0.22, 0.49]: CI excludes 0 at every seed;
- pass rate aligned / none / misaligned: 0.99/0.56/0.13, 0.98/0.49/0.08, 0.99/0.52/0.13,
  0.98/0.47/0.16, 1.00/0.48/0.12;
- weak mock, own plans vs replayed strong plans: 0.74/0.94, 0.72/0.96, 0.72/0.96, 0.69/0.97,
  0.66/0.98;
- across-seed std, end-to-end (8 generations, 3 seeds) / frozen: 2.13, 2.76, 1.63, 1.63, 2.42
  (threshold 1.5; with 4 evolve generations it was 1.28-1.47 under the first recipe).
The test runs seed 0. It shows recovery of planted effects, nothing about real LLMs or GPUs.
"""

from __future__ import annotations

import pytest
from cuda_analyst.candidates import CLAIM_TASKS


@pytest.fixture(scope="module")
def planted(eval_cache, tmp_path_factory):
    from cuda_analyst.experiment import run_planted

    return run_planted(
        CLAIM_TASKS, cache=eval_cache, seed=0, workdir=tmp_path_factory.mktemp("planted")
    )


@pytest.mark.claim
def test_shapley_matches_analytic(planted):
    est, true = planted["shapley"], planted["shapley_analytic"]
    assert planted["n_samples"] == 40
    for x in ("d", "a", "p"):
        assert abs(est[x] - true[x]) <= 0.05, (x, est, true)


@pytest.mark.claim
def test_ap_interaction_positive_with_ci(planted):
    lo, _hi = planted["interaction_ap"]["ci"]
    assert lo > 0 and planted["synergy"]["pairwise"]["a+p"] > 0


@pytest.mark.claim
def test_planning_helps_only_with_aligned_feedback(planted):
    r = planted["pass_rate"]
    assert r["aligned"] > r["none"] > r["misaligned"]


@pytest.mark.claim
def test_replayed_strong_plans_help_weak_model(planted):
    r = planted["replay"]
    assert r["weak_with_strong_plans"] > r["weak_own"]


@pytest.mark.claim
def test_frozen_evaluation_is_more_stable_than_end_to_end(planted):
    assert planted["drift"]["ratio"] >= 1.5, planted["drift"]


@pytest.mark.claim
def test_all_results_are_tagged_cpu_backend(planted):
    from pathlib import Path

    from llmcore.data import read_jsonl

    rows = read_jsonl(Path(planted["workdir"]) / "gen" / "p7-d3-a3-p3" / "records.jsonl")
    assert {r["backend"] for row in rows for r in row["results"]} == {"c"}


@pytest.mark.extended
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_claim_other_seeds(eval_cache, tmp_path, seed):
    """The same five checks at the calibration seeds 1-4 (same thresholds)."""
    from cuda_analyst.experiment import run_planted

    r = run_planted(CLAIM_TASKS, cache=eval_cache, seed=seed, workdir=tmp_path)
    print(
        f"\nseed {seed}: shapley {r['shapley']} analytic {r['shapley_analytic']} drift {r['drift']['ratio']:.2f}"
    )
    assert all(abs(r["shapley"][x] - r["shapley_analytic"][x]) <= 0.05 for x in "dap")
    assert r["interaction_ap"]["ci"][0] > 0
    assert r["pass_rate"]["aligned"] > r["pass_rate"]["none"] > r["pass_rate"]["misaligned"]
    assert r["replay"]["weak_with_strong_plans"] > r["replay"]["weak_own"]
    assert r["drift"]["ratio"] >= 1.5
