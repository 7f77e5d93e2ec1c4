"""Binning semiring axioms, the worked example and exact count distributions."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import small_pdfa
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pfa_learnability import (
    PFA,
    BinningSemiring,
    backward_tables,
    count_distribution,
)
from pfa_learnability.sampling import enumerate_strings, string_counts
from pfa_learnability.semiring import pathsum_semiring

vec = lambda B: arrays(np.float64, B + 1, elements=st.floats(0, 1, allow_nan=False))  # noqa: E731


@pytest.mark.parametrize("B", [1, 3, 8])
def test_semiring_axioms(B):
    K = BinningSemiring(B)

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(vec(B), vec(B), vec(B))
    def check(u, v, w):
        close = lambda a, b: np.testing.assert_allclose(a, b, atol=1e-12, rtol=0)  # noqa: E731
        close(K.plus(K.plus(u, v), w), K.plus(u, K.plus(v, w)))
        close(K.plus(u, v), K.plus(v, u))
        close(K.times(K.times(u, v), w), K.times(u, K.times(v, w)))
        close(K.times(u, v), K.times(v, u))
        close(K.times(u, K.plus(v, w)), K.plus(K.times(u, v), K.times(u, w)))
        close(K.plus(u, K.zero()), u)
        close(K.times(u, K.one()), u)
        close(K.times(u, K.zero()), K.zero())

    check()


def test_worked_example_and_star():
    p = PFA(1, ["a"], [1.0], [(0, "a", 0, 0.5)], [0.5])
    np.testing.assert_allclose(count_distribution(p, "sym:a", 2), [0.5, 0.25, 0.25], atol=1e-15)
    K = BinningSemiring(2)
    # Z = λ ⊗ (δ x)* ⊗ ρ for the one-state automaton
    z = K.times(K.star(K.lift(0.5, 1)), K.lift(0.5, 0))
    np.testing.assert_allclose(z, [0.5, 0.25, 0.25], atol=1e-15)
    np.testing.assert_allclose(count_distribution(p, "sym:a", 1), [0.5, 0.5], atol=1e-15)


def _brute_force(p: PFA, prop: str, B: int, max_len: int = 14, prune: float = 1e-13):
    """Enumerate every string of a PDFA up to ``max_len`` (depth-first over its unique paths),
    binning each string's count; returns (bin masses, enumerated mass)."""
    from pfa_learnability.semiring import increments

    k = increments(p, prop)
    out = {q: [] for q in range(p.n)}
    for e in range(p.n_arcs):
        out[int(p.src[e])].append((int(p.dst[e]), float(p.prob[e]), int(k[e])))
    Z = np.zeros(B + 1)
    stack = [(int(np.flatnonzero(p.initial)[0]), 0, 1.0, 0)]
    while stack:
        q, c, w, depth = stack.pop()
        Z[min(c, B)] += w * p.final[q]
        if depth < max_len:
            stack += [(q2, c + m, w * pr, depth + 1) for q2, pr, m in out[q] if w * pr > prune]
    return Z, Z.sum()


@pytest.mark.parametrize("seed", range(10))
def test_count_distribution_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, a = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    p = small_pdfa(seed, n_states=n, alphabet=a, out_degree=int(rng.integers(1, a + 1)))
    sym = p.alphabet[int(rng.integers(0, a))]
    for B in (1, 3, 5):
        Z = count_distribution(p, f"sym:{sym}", B)
        assert abs(Z.sum() - 1) < 1e-9
        brute, mass = _brute_force(p, f"sym:{sym}", B)
        assert 1 - mass < 1e-6, f"mass beyond length 14 (and pruned) is {1 - mass}"
        np.testing.assert_allclose(Z, brute, atol=1e-5)
        if B == 1:  # [P(no occurrence), P(>= 1)]
            assert Z[1] == pytest.approx(1 - Z[0], abs=1e-12)


def test_enumerated_strings_agree_with_dfs():
    p = small_pdfa(2, n_states=3, alphabet=2)
    strings = enumerate_strings(p, 14, min_prefix_mass=1e-13)
    brute = np.zeros(4)
    for s, w in strings:
        brute[min(string_counts(p, "sym:a", s), 3)] += w
    np.testing.assert_allclose(brute, _brute_force(p, "sym:a", 3)[0], atol=1e-12)


def _unrolled(p: PFA, prop: str, B: int, max_len: int = 400) -> np.ndarray:
    """Length-unrolled forward DP over (state, count bin)."""
    from pfa_learnability.semiring import increments

    k = increments(p, prop)
    alpha = np.zeros((p.n, B + 1))
    alpha[:, 0] = p.initial
    Z = np.zeros(B + 1)
    for _ in range(max_len):
        Z += (alpha * p.final[:, None]).sum(0)
        new = np.zeros_like(alpha)
        for e in range(p.n_arcs):
            shifted = np.zeros(B + 1)
            m = int(k[e])
            shifted[: B + 1] = np.bincount(
                np.minimum(np.arange(B + 1) + m, B), weights=alpha[p.src[e]], minlength=B + 1
            )
            new[p.dst[e]] += p.prob[e] * shifted
        alpha = new
    return Z


@pytest.mark.parametrize("seed", range(4))
def test_count_distribution_matches_unrolled_dp_on_default_pdfas(seed):
    p = PFA.random(seed=seed, target_mean_length=8.0)
    for prop in (
        "sym:a",
        f"enter:{seed % 8}",
        p.arcs[0][0:3] and "arc:{}:{}:{}".format(*p.arcs[0][:3]),
    ):
        Z = count_distribution(p, prop, 6)
        np.testing.assert_allclose(Z, _unrolled(p, prop, 6), atol=1e-9)
        np.testing.assert_allclose(Z, pathsum_semiring(p, prop, 6), atol=1e-10)


def test_backward_tables_identities(pdfa8):
    t = backward_tables(pdfa8, "sym:b", 5)
    np.testing.assert_allclose(t.ge[0], 1.0, atol=1e-9)  # tight: β_tot = 1
    np.testing.assert_allclose(t.exact.sum(0) + t.ge[5], t.ge[0], atol=1e-12)
    d = t.as_dict()
    assert set(d) == {0, 1, 2, 3, 4, "ge", "tot"}


def test_custom_increment_matches_repeated_property():
    from pfa_learnability import CustomProperty

    p = PFA.random(seed=5, target_mean_length=6.0)
    double = CustomProperty(lambda q, a, q2: 2 * (a == "a"), name="2a")
    Z1, Z2 = count_distribution(p, "sym:a", 12), count_distribution(p, double, 12)
    # count2 = 2·count1: bins 2k hold Z1[k]
    np.testing.assert_allclose(Z2[0:12:2], Z1[:6], atol=1e-12)
    np.testing.assert_allclose(Z2[1:12:2], 0, atol=1e-12)
