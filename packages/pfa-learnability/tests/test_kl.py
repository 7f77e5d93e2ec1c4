"""Decomposed KL identities (chain rule, per-state sum, grouping identity, oracle, uniform)."""

from __future__ import annotations

import numpy as np
import pytest
from pfa_learnability import (
    AddAlphaStateLearner,
    UniformModel,
    decomposed_kl,
    reference_automaton,
    sample_corpus,
)
from pfa_learnability.kl import categorical_kl, forward_pass, grouping_terms
from pfa_learnability.learners import expected_decision_kl


def _check_identities(rep):
    tot = sum(rep.visits[q] * rep.per_state[q] for q in rep.visits)
    assert tot == pytest.approx(rep.total, abs=1e-9)


def test_oracle_model_has_zero_kl(pdfa8):
    rep = decomposed_kl(pdfa8, pdfa8, "sym:b", n_eval=500, seed=0)
    assert abs(rep.total) < 1e-12
    assert all(abs(v) < 1e-12 for v in rep.decision_kl.values() if np.isfinite(v))


def test_uniform_model_analytic_value(pdfa8):
    rep = decomposed_kl(pdfa8, UniformModel(pdfa8.alphabet), "sym:b", n_eval=500, seed=1)
    batch = pdfa8.sample_batch(500, np.random.default_rng(1))  # same draw as inside
    p, _ = forward_pass(pdfa8, batch.symbols, batch.lengths)
    K = len(pdfa8.alphabet) + 1
    mask = np.arange(p.shape[1])[None, :] <= batch.lengths[:, None]
    H = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0).sum(-1)
    analytic = float(((np.log(K) - H) * mask).sum(1).mean())
    assert rep.total == pytest.approx(analytic, abs=1e-9)
    _check_identities(rep)


def test_grouping_identity_per_position(pdfa8):
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.dirichlet(np.ones(7) * 0.5)
        q = rng.dirichlet(np.ones(7))
        a = int(rng.integers(0, 7))
        dec, rest = grouping_terms(p, q, a)
        assert dec + rest == pytest.approx(float(categorical_kl(p, q)), abs=1e-12)


@pytest.mark.parametrize("mode", ["tilt:2", "exact:2", 'mixture:{"1": 1, "3": 1}'])
def test_decomposition_sums_on_training_reference(pdfa8, mode):
    c = sample_corpus(pdfa8, "sym:b", mode=mode, n=3000, B=8, seed=0)
    ref = reference_automaton(pdfa8, c, "training")
    lrn = AddAlphaStateLearner(pdfa8).fit(c)
    rep = decomposed_kl(ref, lrn, "sym:b", n_eval=400, seed=2, base=pdfa8)
    _check_identities(rep)
    for key, d in rep.decision_kl.items():
        if np.isfinite(d):
            lo, hi = rep.decision_kl_ci[key]
            assert lo <= d + 1e-12 and d <= hi + 1e-12
    nat = decomposed_kl(pdfa8, lrn, "sym:b", n_eval=400, seed=2)
    _check_identities(nat)
    bits = decomposed_kl(ref, lrn, "sym:b", n_eval=400, seed=2, base=pdfa8, unit="bits")
    assert bits.total == pytest.approx(rep.total / np.log(2), rel=1e-12)


def test_exact_reference_gives_zero_mass_outside_bin(pdfa8):
    c = sample_corpus(pdfa8, "sym:b", mode="exact:2", n=200, B=6, seed=0)
    ref = reference_automaton(pdfa8, c)
    other = sample_corpus(pdfa8, "sym:b", mode="exact:1", n=50, B=6, seed=1)
    assert all(ref.logprob(s) == float("-inf") for s in other.strings())
    assert all(np.isfinite(ref.logprob(s)) for s in c.strings()[:50])


def test_oracle_learner_decision_kl_matches_closed_form(pdfa8):
    c = sample_corpus(pdfa8, "sym:b", n=2000, seed=0)
    lrn = AddAlphaStateLearner(pdfa8, alpha=0.5).fit(c)
    rep = decomposed_kl(pdfa8, lrn, "sym:b", n_eval=300, seed=0)
    from pfa_learnability.analysis import oracle_decision_kl

    for key, d in rep.decision_kl.items():
        q, a = key.split(":")
        exact, _ = oracle_decision_kl(pdfa8, lrn, (int(q), pdfa8.sym_index[a]), expected=False)
        if np.isfinite(d):
            assert d == pytest.approx(exact, rel=1e-9)
    # the 1/(2n) law of the add-α Bernoulli estimate away from 0/1
    assert expected_decision_kl(0.2, 4000, 0.5, 7) * 2 * 4000 == pytest.approx(1.0, abs=0.02)
