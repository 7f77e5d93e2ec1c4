"""Exact learners: the accounting of EDL against closed forms."""

from __future__ import annotations

import math
import random

from excess_dl.analytic import DirichletCategorical, IdentityLearner, KTBernoulli, SecretXorRule


def test_identity_learner_edl_is_zero():
    lr = IdentityLearner(K=5)
    for n in (1, 7, 100):
        assert abs(lr.edl(n, random.Random(n))) <= 1e-9
        assert abs(lr.expected_edl(n)) <= 1e-9


def test_secret_xor_rule_one_example_removes_k_bits():
    for k in (3, 6):
        rule = SecretXorRule(k)
        for n in (1, 2, 5, 20):
            assert rule.edl(n, random.Random(n)) == float(k)
            assert rule.expected_edl(n, seeds=3) == float(k)


def test_kt_bernoulli_edl_grows_like_half_log_n():
    """Slope of E[EDL] against log2 n over n = 2^4..2^12, 1000 seeds: theory 1/2 (one parameter's
    regret); calibrated 0.49."""
    kt = KTBernoulli(0.3)
    xs = list(range(4, 13, 2))
    ys = [kt.expected_edl(2**e, seeds=1000) for e in xs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    print("KT slope", slope, ys)
    assert 0.4 <= slope <= 0.6


def test_random_labels_edl_is_sublinear():
    """Uniform labels (Dirichlet(1), K = 10): E[EDL] <= (K-1)/2 log2 n + 5 (calibrated 10.0 bits
    at n = 256), so EDL/n -> 0."""
    dc = DirichletCategorical(K=10, alpha=1.0)
    for n in (256, 1024):
        e = dc.expected_edl(n, seeds=40)
        print("dirichlet", n, e)
        assert e <= 4.5 * math.log2(n) + 5
        assert e / n < 0.1
