"""leak@k estimators: the unbiased pass@k form and the expected-max form."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from llmcore.errors import ConfigError
from llmcore.metrics import pass_at_k
from unlearn_leakk.errors import LeakConfigError


def _check(n: int, c: int, k: int) -> None:
    for name, v in (("n", n), ("c", c), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise LeakConfigError(f"leak@k: {name}={v!r} must be an integer")
    if n < 1:
        raise LeakConfigError(f"leak@k: n={n} must be >= 1 (samples per query)")
    if k < 1:
        raise LeakConfigError(f"leak@k: k={k} must be >= 1")
    if k > n:
        raise LeakConfigError(
            f"leak@k: k={k} > n={n}; draw at least k samples per query (the official code "
            "silently returns 0 here)"
        )
    if not 0 <= c <= n:
        raise LeakConfigError(f"leak@k: c={c} leaking samples must be in [0, n={n}]")


def leak_at_k(n: int, c: int, k: int) -> float:
    """``1 - C(n-c, k) / C(n, k)`` for one query with ``c`` of ``n`` samples leaking
    (the pass@k estimator of Chen et al. 2021, via ``llmcore.metrics``)."""
    _check(n, c, k)
    try:
        return pass_at_k(int(n), int(c), int(k))
    except ConfigError as exc:  # pragma: no cover - _check covers the same ranges
        raise LeakConfigError(str(exc)) from exc


def leak_at_k_comb(n: int, c: int, k: int) -> float:
    """The same quantity with exact big-integer binomials (reference for tests)."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    from fractions import Fraction

    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def _ks(ks: Iterable[int]) -> list[int]:
    ks = list(ks)
    if not ks:
        raise LeakConfigError("empty k list: pass e.g. ks=(1, 2, 4, 8, 16)")
    return ks


def leak_at_k_curve(
    counts: Sequence[int] | np.ndarray, n: int | Sequence[int], ks: Iterable[int]
) -> dict[int, float]:
    """Mean leak@k over queries for every k (``counts[i]`` leaks of ``n`` (or ``n[i]``)).

    Vectorised: per k, ``1 - prod_{j=n-c+1}^{n} (1 - k/j)`` as a cumulative log-sum, so 80k
    responses take milliseconds. Mixed per-query n warns; a k above some query's n raises.
    """
    ks = _ks(ks)
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim != 1 or c.size == 0:
        raise LeakConfigError("leak_at_k_curve needs a non-empty 1-D list of leak counts")
    ns = np.broadcast_to(np.asarray(n, dtype=np.int64), c.shape).copy()
    if (ns < 1).any():
        raise LeakConfigError(f"n must be >= 1 for every query, got min n={int(ns.min())}")
    if ((c < 0) | (c > ns)).any():
        bad = int(np.argmax((c < 0) | (c > ns)))
        raise LeakConfigError(f"query {bad}: c={int(c[bad])} not in [0, n={int(ns[bad])}]")
    if np.unique(ns).size > 1:
        warnings.warn(
            f"queries have different sample counts n in [{ns.min()}, {ns.max()}]; "
            "using each query's own n",
            stacklevel=2,
        )
    out: dict[int, float] = {}
    nmax = int(ns.max())
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise LeakConfigError(f"k={k!r} must be an int >= 1")
        if k > ns.min():
            raise LeakConfigError(f"k={k} > n={int(ns.min())} for some query; lower k or raise n")
        j = np.arange(1, nmax + 1, dtype=np.float64)
        # cum[m] = sum_{k<j<=m} log(1 - k/j). Terms j <= k are never needed: when n - c >= k
        # the product runs over j > n - c >= k (and n - c < k gives leak@k = 1 directly).
        terms = np.log1p(-np.where(j > k, k / j, 0.0))
        cum = np.concatenate([[0.0], np.cumsum(terms)])
        log_ratio = cum[ns] - cum[np.maximum(ns - c, 0)]
        vals = np.where(ns - c < k, 1.0, -np.expm1(log_ratio))
        out[int(k)] = float(vals.mean())
    return out


def expected_max_at_k(scores: Sequence[float] | np.ndarray, k: int) -> float:
    """E[max of a uniform random k-subset of the n scores] (continuous judges):
    ``sum_{j=k}^{n} s_(j) C(j-1, k-1) / C(n, k)`` with scores sorted ascending."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    n = int(s.size)
    if n < 1:
        raise LeakConfigError("expected_max_at_k needs at least one score")
    _check(n, 0, k)
    if not np.isfinite(s).all():
        raise LeakConfigError("expected_max_at_k: scores must be finite")
    # weights w_j = C(j-1, k-1)/C(n, k) for j = k..n, via a stable log-gamma difference
    j = np.arange(k, n + 1, dtype=np.float64)
    logw = (
        _lgamma(j)
        - _lgamma(np.full_like(j, k))
        - _lgamma(j - k + 1)
        - (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1))
    )
    w = np.exp(logw)
    return float(np.dot(s[k - 1 :], w / w.sum()))


def _lgamma(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def expected_max_curve(
    per_query_scores: Sequence[Sequence[float]], ks: Iterable[int]
) -> dict[int, float]:
    """Mean over queries of :func:`expected_max_at_k` for every k."""
    ks = _ks(ks)
    if not per_query_scores:
        raise LeakConfigError("expected_max_curve needs at least one query")
    return {int(k): float(np.mean([expected_max_at_k(s, k) for s in per_query_scores])) for k in ks}


def chance_at_k(n_choices: int, k: int) -> float:
    """MCQ chance curve ``1 - (1 - 1/|choices|)^k``."""
    if n_choices < 1 or k < 1:
        raise LeakConfigError(f"chance_at_k needs n_choices >= 1 and k >= 1, got {n_choices}, {k}")
    return 1.0 - (1.0 - 1.0 / n_choices) ** k


def curve_from_counts(
    counts: Mapping[str, int], n: int | Mapping[str, int], ks: Iterable[int]
) -> dict[int, float]:
    """:func:`leak_at_k_curve` on ``{item_id: count}`` (ids sorted for a fixed order)."""
    ids = sorted(counts)
    ns = [n[i] for i in ids] if isinstance(n, Mapping) else n
    return leak_at_k_curve([counts[i] for i in ids], ns, ks)
