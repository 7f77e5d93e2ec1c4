"""Benchmark targets (``nox -s perf``; wall-clock assertions, run serially)."""

from __future__ import annotations

import time

import pytest
from pfa_learnability import PFA, count_distribution, rejection_sample, sample_corpus

pytestmark = pytest.mark.perf


def test_sampler_throughput_and_rare_bin_speedup():
    pfa = PFA.random(seed=3)
    t0 = time.perf_counter()
    pfa.sample_batch(50000, 0)
    assert 50000 / (time.perf_counter() - t0) >= 50_000
    Z = count_distribution(pfa, "sym:b", 8)
    k = 5  # P(bin) ≈ 0.27 %
    assert Z[k] < 0.01
    t0 = time.perf_counter()
    sample_corpus(pfa, "sym:b", mode=f"exact:{k}", n=5000, B=8, seed=0)
    cond = 5000 / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    kept, _ = rejection_sample(pfa, "sym:b", k, 8, 200, seed=0)
    rej = len(kept) / (time.perf_counter() - t0)
    assert cond >= 10 * rej


def test_count_distribution_n200_b32():
    big = PFA.random(n_states=200, alphabet_size=10, out_degree=5, seed=0)
    t0 = time.perf_counter()
    count_distribution(big, "sym:a", 32)
    assert time.perf_counter() - t0 < 0.5
