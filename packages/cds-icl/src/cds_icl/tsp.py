"""Curvilinear Demonstration Selection (CDS): a travelling-salesperson path through the
demonstrations' embeddings that penalises sharp turns (the paper's principle (ii), Sec. 4).

Everything is float64. The cost of the pair (i, j) is ``0.2 * delta_ij + 1.0 * gamma_ij`` with
``delta`` the max-normalised Euclidean distance and ``gamma`` the turning angle (divided by pi)
from the step i -> j to the step j -> k, where k is the point nearest the midpoint of i and j (an
asymmetric matrix). Each of the first ``n_starts`` nodes seeds a nearest-neighbour tour that
2-opt improves on the closed tour; the cycle is cut at its most expensive edge and the path with
the smallest mean turning angle wins (``high_curvature``: gamma flipped, the largest wins).

The 2-opt here evaluates a candidate reversal in O(1) from prefix sums of the tour's forward and
backward edge costs; whenever that delta lies within ``EXACT_BAND`` of zero, the decision falls
back to the full closed-tour sum in the reference summation order, so every accept/reject
decision equals the full-recompute algorithm's (``two_opt_naive``, kept for tests and the bench).
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np

from cds_icl.errors import CDSInputError, unknown_choice

STRATEGIES = ("cds", "high_curvature")
EXACT_BAND = 1e-9
"""|incremental delta| below this is re-decided by the full closed-tour sum (rounding of the
prefix sums is ~n^2 * 1e-16, far below the band)."""

Strategy = Literal["cds", "high_curvature"]


def check_embeddings(E: np.ndarray) -> np.ndarray:
    """``E`` as a finite float64 ``(n, D)`` array; anything else is a :class:`CDSInputError`."""
    X = np.asarray(E, dtype=np.float64)
    if X.ndim != 2:
        raise CDSInputError(f"embeddings must be a 2-D (n, dim) array, got shape {X.shape}")
    if X.shape[0] == 0:
        raise CDSInputError("embeddings are empty (n = 0): the pool has no demonstrations")
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        raise CDSInputError(
            f"embeddings hold NaN/inf in rows {np.flatnonzero(bad)[:10].tolist()}; "
            "re-embed those texts or drop them from the pool"
        )
    return X


def _pairwise(X: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", X, X)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def curvature_matrix(E: np.ndarray) -> np.ndarray:
    """``gamma_ij``: turning angle / pi from ``i -> j`` to ``j -> k(i, j)``, ``k`` nearest the
    midpoint of i and j among the other points (0 when a step has zero length)."""
    X = check_embeddings(E)
    n = X.shape[0]
    gamma = np.zeros((n, n))
    if n < 3:
        return gamma
    sq = np.einsum("ij,ij->i", X, X)
    G = X @ X.T
    idx = np.arange(n)
    for i in range(n):
        # |(x_i + x_j)/2 - x_m|^2 for all (j, m): (n, n)
        d2 = 0.25 * (sq[i] + 2 * G[i][:, None] + sq[:, None]) - (G[i][None, :] + G) + sq[None, :]
        d2[:, i] = np.inf
        d2[idx, idx] = np.inf
        k = np.argmin(d2, axis=1)
        u = X - X[i]
        w = X[k] - X
        nu = np.linalg.norm(u, axis=1)
        nw = np.linalg.norm(w, axis=1)
        ok = (nu > 0) & (nw > 0)
        ok[i] = False
        cos = np.einsum("ij,ij->i", u[ok], w[ok]) / (nu[ok] * nw[ok])
        gamma[i, ok] = np.arccos(np.clip(cos, -1.0, 1.0)) / np.pi
    return gamma


def cost_matrix(
    E: np.ndarray,
    strategy: Strategy = "cds",
    euclidean_weight: float = 0.2,
    curvature_weight: float = 1.0,
) -> np.ndarray:
    """CDS edge costs ``D = w_e * delta + w_c * gamma`` (asymmetric, float64, (n, n))."""
    if strategy not in STRATEGIES:
        raise unknown_choice("strategy", strategy, STRATEGIES)
    X = check_embeddings(E)
    dist = _pairwise(X)
    dist = dist / (dist.max() + 1e-8)
    gamma = curvature_matrix(X)
    if strategy == "high_curvature":
        gamma = gamma.max() - gamma
    return euclidean_weight * dist + curvature_weight * gamma


def nearest_neighbor_tour(D: np.ndarray, start: int) -> list[int]:
    """Greedy tour from ``start``: always step to the cheapest unvisited node (row = current)."""
    n = D.shape[0]
    visited = np.zeros(n, dtype=bool)
    tour = [start]
    visited[start] = True
    cur = start
    for _ in range(n - 1):
        row = np.where(visited, np.inf, D[cur])
        cur = int(np.argmin(row))
        visited[cur] = True
        tour.append(cur)
    return tour


def tour_cost(D: np.ndarray, tour: list[int]) -> float:
    """Closed-tour cost, summed left to right from 0 (the reference summation order)."""
    n = len(tour)
    return sum(D[tour[k], tour[(k + 1) % n]] for k in range(n))


def two_opt_naive(
    tour: list[int], D: np.ndarray, max_sweeps: int = 500
) -> tuple[list[int], float, list[tuple[int, int]]]:
    """The reference 2-opt: every candidate reversal of ``tour[i..j]`` is priced by the full
    closed-tour sum (O(n) each, O(n^3) a sweep). Returns (tour, cost, accepted (i, j) moves)."""
    n = len(tour)
    best = list(tour)
    best_cost = tour_cost(D, best)
    moves: list[tuple[int, int]] = []
    improved, sweeps = True, 0
    while improved and sweeps < max_sweeps:
        improved = False
        for i in range(1, n - 2):
            for j in range(i + 1, n):
                if j - i == 1:
                    continue
                cand = best[:i] + best[i : j + 1][::-1] + best[j + 1 :]
                c = tour_cost(D, cand)
                if c < best_cost:
                    best, best_cost = cand, c
                    moves.append((i, j))
                    improved = True
        sweeps += 1
    return best, float(best_cost), moves


def two_opt(
    tour: list[int], D: np.ndarray, max_sweeps: int = 500
) -> tuple[list[int], float, list[tuple[int, int]]]:
    """2-opt with O(1) incremental deltas and the same decisions as :func:`two_opt_naive`.

    Reversing ``t[i..j]`` in an asymmetric tour replaces edges ``(t[i-1], t[i])`` and
    ``(t[j], t[j+1])`` by ``(t[i-1], t[j])`` and ``(t[i], t[j+1])`` and turns every internal
    edge ``(a, b)`` into ``(b, a)``; prefix sums of forward and backward edge costs price the
    internal part."""
    n = len(tour)
    t = np.asarray(tour, dtype=np.int64)
    best_cost = tour_cost(D, list(t))
    moves: list[tuple[int, int]] = []
    improved, sweeps = True, 0
    while improved and sweeps < max_sweeps:
        improved = False
        for i in range(1, n - 2):
            j0 = i + 2
            while j0 < n:
                fwd = D[t[:-1], t[1:]]
                bwd = D[t[1:], t[:-1]]
                cf = np.concatenate(([0.0], np.cumsum(fwd)))
                cb = np.concatenate(([0.0], np.cumsum(bwd)))
                js = np.arange(j0, n)
                a, ti = t[i - 1], t[i]
                tj = t[js]
                c = t[(js + 1) % n]
                delta = (
                    D[a, tj] + D[ti, c] - D[a, ti] - D[tj, c] + (cb[js] - cb[i]) - (cf[js] - cf[i])
                )
                cand = np.flatnonzero(delta < EXACT_BAND)
                accepted = -1
                for q in cand:
                    j = int(js[q])
                    if delta[q] <= -EXACT_BAND:
                        new = t.copy()
                        new[i : j + 1] = t[i : j + 1][::-1]
                        accepted = j
                        break
                    new = t.copy()
                    new[i : j + 1] = t[i : j + 1][::-1]
                    if tour_cost(D, list(new)) < best_cost:
                        accepted = j
                        break
                if accepted < 0:
                    break
                t = new
                best_cost = tour_cost(D, list(t))
                moves.append((i, accepted))
                improved = True
                j0 = accepted + 1
        sweeps += 1
    return [int(x) for x in t], float(best_cost), moves


def cut_cycle(tour: list[int], D: np.ndarray) -> list[int]:
    """Open the closed tour at its most expensive edge; the path starts after that edge."""
    n = len(tour)
    longest, idx = 0.0, 0
    for i in range(n):
        c = D[tour[i], tour[(i + 1) % n]]
        if c > longest:
            longest, idx = c, i
    s = (idx + 1) % n
    return [tour[(s + i) % n] for i in range(n)]


def _angles(E: np.ndarray, order: list[int]) -> np.ndarray:
    P = np.asarray(E, dtype=np.float64)[np.asarray(order, dtype=np.int64)]
    if len(P) < 3:
        return np.zeros(0)
    v1, v2 = P[1:-1] - P[:-2], P[2:] - P[1:-1]
    n1, n2 = np.linalg.norm(v1, axis=1), np.linalg.norm(v2, axis=1)
    ok = (n1 > 0) & (n2 > 0)
    cos = np.einsum("ij,ij->i", v1[ok], v2[ok]) / (n1[ok] * n2[ok])
    return np.arccos(np.clip(cos, -1.0, 1.0))


def path_curvature(E: np.ndarray, order: list[int]) -> float:
    """Mean turning angle (radians) over the path's interior nodes; 0 with fewer than 3 nodes."""
    a = _angles(E, order)
    return float(a.mean()) if a.size else 0.0


def path_score(E: np.ndarray, order: list[int]) -> float:
    """``1 / (1 + mean turning angle)``; 0 when no angle is defined (as the reference code)."""
    a = _angles(E, order)
    return float(1.0 / (1.0 + a.mean())) if a.size else 0.0


def cds_order(
    E: np.ndarray,
    strategy: Strategy = "cds",
    n_starts: int = 10,
    euclidean_weight: float = 0.2,
    curvature_weight: float = 1.0,
    max_sweeps: int = 500,
    naive: bool = False,
    return_all: bool = False,
) -> tuple[list[int], float] | tuple[list[int], float, list[tuple[list[int], float]]]:
    """CDS ordering of the rows of ``E`` (steps 1-5 of the method).

    ``strategy="cds"`` returns the path with the highest :func:`path_score` over the starts,
    ``"high_curvature"`` (gamma flipped) the lowest. ``naive=True`` uses the full-recompute
    2-opt. With ``return_all`` the per-start ``(path, score)`` list comes third. Fewer than 3
    points: the identity order (curvature is undefined) with a warning."""
    if strategy not in STRATEGIES:
        raise unknown_choice("strategy", strategy, STRATEGIES)
    X = check_embeddings(E)
    n = X.shape[0]
    if n_starts < 1:
        raise CDSInputError(f"n_starts must be >= 1, got {n_starts}")
    if n < 3:
        warnings.warn(
            f"CDS needs >= 3 demonstrations to define a turning angle, got {n}: identity order",
            stacklevel=2,
        )
        order = list(range(n))
        return (order, 0.0, [(order, 0.0)]) if return_all else (order, 0.0)
    if (_pairwise(X)[~np.eye(n, dtype=bool)] == 0).any():
        warnings.warn(
            "duplicate embeddings (zero-length steps): their turning angles count as 0",
            stacklevel=2,
        )
    D = cost_matrix(X, strategy, euclidean_weight, curvature_weight)
    opt = two_opt_naive if naive else two_opt
    runs: list[tuple[list[int], float]] = []
    best_path: list[int] = []
    best = -np.inf if strategy == "cds" else np.inf
    for s in range(min(n_starts, n)):
        tour, _, _ = opt(nearest_neighbor_tour(D, s), D, max_sweeps)
        path = cut_cycle(tour, D)
        sc = path_score(X, path)
        runs.append((path, sc))
        if (strategy == "cds" and sc > best) or (strategy == "high_curvature" and sc < best):
            best, best_path = sc, list(path)
    if return_all:
        return best_path, float(best), runs
    return best_path, float(best)
