"""CDS ordering: exactness against the full-recompute algorithm and geometric properties."""

from __future__ import annotations

import numpy as np
import pytest
from cds_icl.tsp import (
    cds_order,
    cost_matrix,
    curvature_matrix,
    nearest_neighbor_tour,
    path_curvature,
    path_score,
    two_opt,
    two_opt_naive,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def helix(n: int = 64, seed: int = 0, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, n)
    X = np.stack([np.cos(t), np.sin(t), 0.3 * t], axis=1) + noise * rng.normal(size=(n, 3))
    perm = rng.permutation(n)
    return X[perm], perm


def reference_gamma(E: np.ndarray) -> np.ndarray:
    """Loop version of the curvature proxy (midpoint search by direct norms)."""
    n = len(E)
    g = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            u = E[j] - E[i]
            d = np.linalg.norm(E - (E[i] + E[j]) / 2, axis=1)
            d[i] = d[j] = np.inf
            w = E[int(np.argmin(d))] - E[j]
            if np.linalg.norm(u) > 0 and np.linalg.norm(w) > 0:
                c = u @ w / (np.linalg.norm(u) * np.linalg.norm(w))
                g[i, j] = np.arccos(np.clip(c, -1, 1)) / np.pi
    return g


def test_curvature_matrix_matches_loop_definition():
    E = np.random.default_rng(3).normal(size=(30, 6))
    np.testing.assert_allclose(curvature_matrix(E), reference_gamma(E), atol=1e-12)
    D = cost_matrix(E)
    assert D.dtype == np.float64 and not np.allclose(D, D.T)  # asymmetric


def test_helix_smoother_than_random_and_high_curvature():
    """Spec test 1 (what holds): on a shuffled noisy helix (n = 64, 2 turns, noise 0.02), CDS's
    path is a permutation, deterministic, smoother than each of 20 random orders and than
    ``high_curvature``.

    Calibration (8 helices: seeds 0-3, uniform and geometric spacing): CDS / best-of-20-random
    mean turning angle 0.69-0.86 (seed 0: 1.539 vs 2.003 rad, ratio 0.77); high_curvature
    1.556-1.864 rad, >= CDS in all 8 (seed 0: 1.647, margin 0.11 rad; seed 3 only 0.001).
    The 0.5x margin does not hold: see the strict xfail below."""
    X, _ = helix()
    order, score = cds_order(X)
    assert sorted(order) == list(range(64))
    c = path_curvature(X, order)
    rng = np.random.default_rng(1)
    rand = [path_curvature(X, list(rng.permutation(64))) for _ in range(20)]
    assert c < 0.85 * min(rand), (c, min(rand))
    hc_order, _hc_score = cds_order(X, "high_curvature")
    assert c + 0.05 < path_curvature(X, hc_order)
    assert score == pytest.approx(path_score(X, order))
    assert cds_order(X) == (order, score)


@pytest.mark.xfail(strict=True, reason="the reference curvature proxy does not recover a helix")
def test_helix_half_the_random_curvature():
    """The 0.5x-of-random margin fails for the reference algorithm (ratio 0.77 here): along an
    evenly sampled curve the points nearest the midpoint of neighbours i, i+1 are i-1 and i+2
    (nearly equidistant), so about half the true path's edges look like U-turns to the proxy
    and cost ~1, and the tour does not follow the curve. Strict: flags a change if it ever
    passes."""
    X, _ = helix()
    rng = np.random.default_rng(1)
    rand = [path_curvature(X, list(rng.permutation(64))) for _ in range(20)]
    assert path_curvature(X, cds_order(X)[0]) < 0.5 * min(rand)


@pytest.mark.parametrize("n", [16, 64, 128])
def test_cds_score_is_best_of_starts(n):
    """Spec test 2: ``cds`` score >= every start's score; high_curvature's <= cds's."""
    E = np.random.default_rng(n).normal(size=(n, 16))
    _order, score, runs = cds_order(E, return_all=True)
    assert all(score >= s for _, s in runs)
    assert len(runs) == 10
    _, hc = cds_order(E, "high_curvature")
    assert hc <= score


def test_incremental_two_opt_equals_naive_decision_by_decision():
    """Spec test 3: 20 random instances, identical accepted moves and tours, from NN tours
    and from random tours (which need many moves)."""
    total_moves = 0
    for s in range(20):
        rng = np.random.default_rng(100 + s)
        n = int(rng.integers(6, 28))
        E = rng.normal(size=(n, int(rng.integers(2, 10))))
        D = cost_matrix(E, "high_curvature" if s % 3 == 0 else "cds")
        starts = [nearest_neighbor_tour(D, 0), [int(i) for i in rng.permutation(n)]]
        for t0 in starts:
            a, b = two_opt(t0, D), two_opt_naive(t0, D)
            assert a[0] == b[0] and a[2] == b[2]
            assert a[1] == b[1]
            total_moves += len(a[2])
    assert total_moves > 100  # the comparison exercised many decisions


def test_incremental_matches_on_exact_ties():
    """Integer costs make many candidate deltas exactly 0: the band falls back to the full sum."""
    rng = np.random.default_rng(5)
    for _ in range(5):
        D = rng.integers(0, 3, size=(12, 12)).astype(float)
        t0 = [int(i) for i in rng.permutation(12)]
        assert two_opt(t0, D)[2] == two_opt_naive(t0, D)[2]


def test_naive_and_incremental_cds_agree():
    E = np.random.default_rng(7).normal(size=(24, 5))
    assert cds_order(E) == cds_order(E, naive=True)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(4, 14),
    seed=st.integers(0, 10_000),
    integer_costs=st.booleans(),
)
def test_incremental_two_opt_property(n, seed, integer_costs):
    """Any cost matrix (continuous or with many exact ties), any start tour: same moves."""
    rng = np.random.default_rng(seed)
    D = rng.integers(0, 4, size=(n, n)).astype(float) if integer_costs else rng.random((n, n))
    t0 = [int(i) for i in rng.permutation(n)]
    a, b = two_opt(t0, D), two_opt_naive(t0, D)
    assert a[0] == b[0] and a[2] == b[2]
