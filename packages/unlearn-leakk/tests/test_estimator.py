"""Estimator properties: brute-force enumeration, exact binomials, monotonicity, bad k."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from unlearn_leakk.errors import LeakConfigError
from unlearn_leakk.estimator import (
    chance_at_k,
    expected_max_at_k,
    expected_max_curve,
    leak_at_k,
    leak_at_k_comb,
    leak_at_k_curve,
)


def brute_leak(n: int, c: int, k: int) -> float:
    flags = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(flags[i] for i in s) for s in subsets) / len(subsets)


def brute_max(scores: list[float], k: int) -> float:
    subsets = list(itertools.combinations(scores, k))
    return sum(max(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 11))
def test_leak_equals_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert leak_at_k(n, c, k) == pytest.approx(brute_leak(n, c, k), abs=1e-12)


def test_expected_max_equals_enumeration():
    rng = np.random.default_rng(0)
    for n in range(1, 9):
        scores = rng.random(n).round(3).tolist()
        for k in range(1, n + 1):
            assert expected_max_at_k(scores, k) == pytest.approx(brute_max(scores, k), abs=1e-12)


def test_expected_max_reduces_to_binary():
    for n, c, k in [(10, 3, 4), (32, 1, 16), (50, 0, 7), (20, 20, 5)]:
        scores = [1.0] * c + [0.0] * (n - c)
        assert expected_max_at_k(scores, k) == pytest.approx(leak_at_k(n, c, k), abs=1e-12)


def test_stable_product_equals_comb_up_to_200():
    worst = 0.0
    for n in range(1, 201, 7):
        for c in range(n + 1):
            for k in {1, min(2, n), max(1, n // 3), n}:
                worst = max(worst, abs(leak_at_k(n, c, k) - leak_at_k_comb(n, c, k)))
    assert worst < 1e-12


def test_vectorised_curve_equals_scalar():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 201, 50)
    curve = leak_at_k_curve(counts, 200, [1, 2, 4, 8, 16, 32, 64, 128, 200])
    for k, v in curve.items():
        ref = np.mean([leak_at_k_comb(200, int(c), k) for c in counts])
        assert v == pytest.approx(ref, abs=1e-12)


def test_basic_properties():
    for n in (1, 5, 40, 200):
        for c in range(n + 1):
            assert leak_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)
            assert leak_at_k(n, c, n) == float(c > 0)
            ks = [leak_at_k(n, c, k) for k in range(1, n + 1)]
            assert all(b >= a - 1e-15 for a, b in itertools.pairwise(ks))
        for k in (1, n):
            cs = [leak_at_k(n, c, k) for c in range(n + 1)]
            assert all(b >= a - 1e-15 for a, b in itertools.pairwise(cs))


@pytest.mark.parametrize("args", [(10, 2, 0), (10, 2, 11), (0, 0, 1), (10, 11, 1), (10, -1, 1)])
def test_bad_arguments_raise(args):
    with pytest.raises(LeakConfigError):
        leak_at_k(*args)


def test_curve_bad_input():
    with pytest.raises(LeakConfigError, match="empty k list"):
        leak_at_k_curve([1, 2], 10, [])
    with pytest.raises(LeakConfigError, match="k=20 > n=10"):
        leak_at_k_curve([1, 2], 10, [20])
    with pytest.raises(LeakConfigError):
        leak_at_k_curve([], 10, [1])
    with pytest.warns(UserWarning, match="different sample counts"):
        curve = leak_at_k_curve([1, 2], [10, 20], [1])
    assert curve[1] == pytest.approx((0.1 + 0.1) / 2)
    with pytest.raises(LeakConfigError):
        expected_max_at_k([], 1)
    with pytest.raises(LeakConfigError):
        expected_max_curve([], [1])


def test_estimator_on_paper_scale_counts_is_warning_free():
    counts = np.random.default_rng(0).integers(0, 201, 400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        leak_at_k_curve(counts, 200, [1, 2, 4, 8, 16, 32, 64, 128])


@pytest.mark.perf
def test_estimator_is_fast():
    import time

    counts = np.random.default_rng(0).integers(0, 201, 400)
    t0 = time.perf_counter()
    leak_at_k_curve(counts, 200, [1, 2, 4, 8, 16, 32, 64, 128])
    assert time.perf_counter() - t0 < 1.0


def test_chance_curve():
    assert chance_at_k(4, 1) == 0.25
    assert chance_at_k(4, 2) == pytest.approx(1 - 0.75**2)
    assert math.isclose(chance_at_k(1, 5), 1.0)
