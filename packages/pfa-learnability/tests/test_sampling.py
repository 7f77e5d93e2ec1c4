"""Exact conditional sampling, tilting and the pushed PFA (sampler exactness and identities)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import small_pdfa
from pfa_learnability import (
    count_distribution,
    product_automaton,
    pushed_pfa,
    sample_conditioned,
    sample_corpus,
    tilt_theta,
)
from pfa_learnability.sampling import bin_counts, enumerate_strings, string_counts
from scipy.stats import chisquare


@pytest.fixture(scope="module")
def tiny():
    return small_pdfa(7, n_states=3, alphabet=2, out_degree=2)


@pytest.mark.parametrize("k", [0, 1, 3])
def test_conditioned_samples_are_in_bin_and_exact(tiny, k):
    B = 3
    prop = "sym:a"
    Z = count_distribution(tiny, prop, B)
    c = sample_conditioned(tiny, prop, k, B=B, n=20000, seed=k)
    # hard invariant: every string's count is in the requested bin
    assert (np.minimum(c.batch.counts, B) == k).all()
    recount = [min(string_counts(tiny, prop, tiny.encode(s)), B) for s in c.strings()[:500]]
    assert set(recount) == {k}
    # chi-square of empirical vs exact p(y | bin) over the enumerated strings
    exact = {
        s: w / Z[k]
        for s, w in enumerate_strings(tiny, 14, 1e-13)
        if min(string_counts(tiny, prop, s), B) == k
    }
    emp: dict[tuple[int, ...], int] = {}
    for i in range(len(c)):
        key = tuple(c.batch.symbols[i, : c.batch.lengths[i]].tolist())
        emp[key] = emp.get(key, 0) + 1
    big = [s for s, p in exact.items() if p * 20000 >= 5]
    obs = [emp.get(s, 0) for s in big]
    expct = [exact[s] * 20000 for s in big]
    obs.append(20000 - sum(obs))
    expct.append(20000 - sum(expct))
    assert set(emp) <= set(exact) | {s for s in emp if len(s) > 14}
    assert chisquare(obs, expct).pvalue > 1e-3


@pytest.mark.parametrize("f", [0.25, 0.5, 2.0, 4.0])
def test_tilt_realises_requested_frequency(pdfa8, f):
    from pfa_learnability.sampling import expected_count
    from pfa_learnability.semiring import increments

    c = sample_corpus(pdfa8, "sym:b", mode="tilt", f=f, n=50000, seed=0, max_length=4096)
    nat = c.meta["natural_freq"]["per_string"]
    # the pushed PFA's exact mean is f × natural; the realised mean (MC error ~1 %) within 3 %
    exact = expected_count(c.sampler, increments(pdfa8, "sym:b")) / nat
    assert exact == pytest.approx(f, rel=1e-9)
    ratio = c.meta["realised_freq"]["per_string"] / nat
    assert abs(ratio / f - 1) < 0.03
    assert c.meta["factor"] == f and "realised_freq" in c.meta


def test_pushed_pfa_equals_bin_mixture(tiny):
    prop, B = "sym:a", 4
    theta = tilt_theta(tiny, prop, 1.7)
    pushed = pushed_pfa(tiny, prop, theta)
    from pfa_learnability.sampling import tilt_bin_weights

    weights = tilt_bin_weights(tiny, prop, theta, B, overflow_tol=1.0)
    mix = product_automaton(tiny, prop, B, weights)
    Zt = count_distribution(pushed, prop, B)
    Zm = count_distribution(mix, prop, B)
    np.testing.assert_allclose(Zt, Zm, atol=1e-12)  # same count histogram
    n_checked = 0
    logz = tiny_partition(tiny, prop, theta)
    for s, w in enumerate_strings(tiny, 10, 1e-12):
        cnt = string_counts(tiny, prop, s)
        syms = [tiny.alphabet[i] for i in s]
        lp_push = pushed.logprob(syms)
        # p_θ(y) ∝ p(y) e^{θ count}: exact against the definition
        want = np.log(w) + theta * cnt - np.log(logz)
        assert lp_push == pytest.approx(want, abs=1e-9)
        if cnt < B:
            assert np.exp(mix.logprob(syms)) == pytest.approx(np.exp(lp_push), abs=1e-9)
            n_checked += 1
    assert n_checked > 50


def tiny_partition(pfa, prop, theta):
    from pfa_learnability.semiring import increments

    M = pfa.transition_matrix(pfa.prob * np.exp(theta * increments(pfa, prop)))
    return float(pfa.initial @ np.linalg.solve(np.eye(pfa.n) - M, pfa.final))


def test_bins_and_pushed_tilt_agree_in_histogram(pdfa8):
    a = sample_corpus(pdfa8, "sym:b", f=2.0, n=20000, B=16, seed=1)
    b = sample_corpus(pdfa8, "sym:b", f=2.0, n=20000, B=16, seed=2, tilt_method="bins")
    ha, hb = bin_counts(a.batch, 16), bin_counts(b.batch, 16)
    keep = (ha + hb) > 20
    from scipy.stats import chi2_contingency

    assert chi2_contingency(np.stack([ha[keep], hb[keep]])).pvalue > 1e-3


def test_exact_mode_changes_length_but_not_conditional(pdfa8):
    c = sample_corpus(pdfa8, "sym:b", mode="exact:3", n=3000, B=8, seed=0)
    assert (c.batch.counts == 3).all()
    m = sample_corpus(pdfa8, "sym:b", mode='mixture:{"0": 1, "2": 3}', n=4000, B=8, seed=0)
    frac2 = float((m.batch.counts == 2).mean())
    assert abs(frac2 - 0.75) < 0.03


def test_corpus_formats(tmp_path, pdfa8):
    from pfa_learnability.sampling import read_corpus

    c = sample_corpus(pdfa8, "sym:b", f=2.0, n=50, seed=0)
    path = c.save(tmp_path / "corpus.txt")
    strings, meta = read_corpus(path)
    assert strings == c.strings() and meta["realised_freq"] == c.meta["realised_freq"]
    assert (tmp_path / "corpus.meta.json").exists()
    ds = c.to_dataset()
    assert ds.column_names == ["text"] and ds[0]["text"] == " ".join(c[0])


def test_sampling_is_deterministic(pdfa8):
    a = sample_corpus(pdfa8, "enter:4", f=2.0, n=500, seed=4)
    b = sample_corpus(pdfa8, "enter:4", f=2.0, n=500, seed=4)
    assert a.strings() == b.strings()
