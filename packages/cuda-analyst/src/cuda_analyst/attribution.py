"""Coalitional attribution of feedback effects (paper Sec. 4, "Shapley-style attribution").

A value table maps each coalition (a ``frozenset`` of players) to ``v(S)``, the mean over
rollouts of a generation-level rate. From it: exact Shapley values, Banzhaf values, Möbius
dividends, the official "synergy" terms, the Shapley interaction index (Grabisch & Roubens),
and a permutation-sampling Shapley estimator with antithetic pairs for many players.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuda_analyst.errors import AnalystValueError, FrozenDataError
from cuda_analyst.masks import AnalysisMask, check_players, coalition_mask

Coalition = frozenset[str]
ValueTable = Mapping[Coalition, float]
STATUSES = ("fail", "compile", "pass", "fast")
METRICS = ("fail", "compile", "pass", "fast", "compile_or_better", "pass_or_better")


def _distinct(players: Sequence[str]) -> tuple[str, ...]:
    players = tuple(players)
    if not players or len(set(players)) != len(players):
        raise AnalystValueError(f"players must be distinct and non-empty, got {list(players)!r}")
    return players


def subsets(players: Sequence[str]) -> list[Coalition]:
    """All subsets of ``players`` (smallest first)."""
    return [
        frozenset(c) for k in range(len(players) + 1) for c in itertools.combinations(players, k)
    ]


def _check_table(v: ValueTable, players: Sequence[str]) -> None:
    missing = [sorted(s) for s in subsets(players) if s not in v]
    if missing:
        raise FrozenDataError(f"value table lacks coalitions {missing}; run every coalition mask")


def shapley(v: ValueTable, players: Sequence[str]) -> dict[str, float]:
    """Exact Shapley values ``φ_i = Σ_S |S|!(n-|S|-1)!/n! [v(S∪i) - v(S)]``."""
    players = _distinct(players)
    _check_table(v, players)
    n = len(players)
    out = {}
    for i in players:
        others = [x for x in players if x != i]
        tot = 0.0
        for s in subsets(others):
            w = math.factorial(len(s)) * math.factorial(n - len(s) - 1) / math.factorial(n)
            tot += w * (v[s | {i}] - v[s])
        out[i] = tot
    return out


def banzhaf(v: ValueTable, players: Sequence[str]) -> dict[str, float]:
    """Banzhaf values: the unweighted mean marginal contribution over ``2^(n-1)`` coalitions."""
    players = _distinct(players)
    _check_table(v, players)
    out = {}
    for i in players:
        subs = subsets([x for x in players if x != i])
        out[i] = float(np.mean([v[s | {i}] - v[s] for s in subs]))
    return out


def mobius(v: ValueTable, players: Sequence[str]) -> dict[Coalition, float]:
    """Möbius dividends (Harsanyi): ``m(T) = Σ_{S⊆T} (-1)^{|T|-|S|} v(S)``; they sum to v(N)."""
    players = _distinct(players)
    _check_table(v, players)
    out = {}
    for t in subsets(players):
        out[t] = sum((-1) ** (len(t) - len(s)) * v[s] for s in subsets(sorted(t)))
    return out


def official_synergy(v: ValueTable, players: Sequence[str] = ("d", "a", "p")) -> dict[str, Any]:
    """The official three-player synergy: the triple Möbius dividend ``I_dap`` and the pairwise
    terms ``I_ij = [v(ij) - v(i) - v(j) + v(∅)] - I_dap / 3``."""
    players = _distinct(players)
    if len(players) != 3:
        raise AnalystValueError(
            f"the official synergy is defined for 3 players, got {list(players)}; "
            f"use interactions='shapley' or 'mobius'"
        )
    _check_table(v, players)
    f = frozenset
    e = f()
    triple = mobius(v, players)[f(players)]
    pairwise = {}
    for i, j in itertools.combinations(players, 2):
        pairwise[f"{i}+{j}"] = v[f((i, j))] - v[f((i,))] - v[f((j,))] + v[e] - triple / 3
    return {"pairwise": pairwise, "triple": triple}


def shapley_interaction(v: ValueTable, players: Sequence[str]) -> dict[str, float]:
    """Shapley interaction index (Grabisch & Roubens 1999) for every pair:
    ``I_ij = Σ_{S⊆N∖ij} |S|!(n-|S|-2)!/(n-1)! Δ_ij(S)``. For n = 3 it equals the pair's
    Möbius dividend plus half the triple dividend (the official term subtracts a third)."""
    players = _distinct(players)
    _check_table(v, players)
    n = len(players)
    out = {}
    for i, j in itertools.combinations(players, 2):
        tot = 0.0
        for s in subsets([x for x in players if x not in (i, j)]):
            w = math.factorial(len(s)) * math.factorial(n - len(s) - 2) / math.factorial(n - 1)
            tot += w * (v[s | {i, j}] - v[s | {i}] - v[s | {j}] + v[s])
        out[f"{i}+{j}"] = tot
    return out


def shapley_sampled(
    value: Callable[[Coalition], float],
    players: Sequence[str],
    *,
    num_permutations: int = 200,
    seed: int = 0,
    antithetic: bool = True,
) -> dict[str, float]:
    """Permutation-sampling Shapley estimate (Castro et al. 2009): mean marginal contribution
    along random orderings; with ``antithetic`` each ordering is paired with its reverse.
    ``value`` is called once per distinct coalition (memoised)."""
    players = _distinct(players)
    if num_permutations < 1:
        raise AnalystValueError(f"num_permutations must be >= 1, got {num_permutations}")
    memo: dict[Coalition, float] = {}

    def val(s: Coalition) -> float:
        if s not in memo:
            memo[s] = float(value(s))
        return memo[s]

    rng = np.random.default_rng(seed)
    tot = dict.fromkeys(players, 0.0)
    count = 0
    while count < num_permutations:
        perm = [players[k] for k in rng.permutation(len(players))]
        for order in (perm, perm[::-1]) if antithetic else (perm,):
            prev, cur = val(frozenset()), frozenset()
            for x in order:
                cur = cur | {x}
                now = val(cur)
                tot[x] += now - prev
                prev = now
            count += 1
    return {x: tot[x] / count for x in players}


# ---------------------------------------------------------------------------------- rates


def _rate(counts: Mapping[str, int], metric: str) -> float:
    total = counts.get("total", 0)
    if total <= 0:
        return float("nan")
    if metric == "pass_or_better":
        return (counts.get("pass", 0) + counts.get("fast", 0)) / total
    if metric == "compile_or_better":
        return (counts.get("compile", 0) + counts.get("pass", 0) + counts.get("fast", 0)) / total
    return counts.get(metric, 0) / total


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise AnalystValueError(f"unknown metric {metric!r}: choose one of {list(METRICS)}")
    return metric


def pooled_counts(run: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Sum per-generation counts of one rollout over its generations."""
    out = dict.fromkeys(("total", *STATUSES), 0)
    for c in run.values():
        for k in out:
            out[k] += int(c.get(k, 0))
    return out


def label_stats(
    runs: Sequence[Mapping[str, Mapping[str, int]]], labels: Sequence[str] = ("fast", "pass")
) -> dict[str, dict[str, float]]:
    """Per generation, ``rate = Σ_{ℓ∈labels} count_ℓ / total``: mean and std over rollouts (and
    the pooled ``"all"`` generation)."""
    bad = [x for x in labels if x not in STATUSES]
    if bad:
        raise AnalystValueError(f"unknown labels {bad}: choose among {list(STATUSES)}")
    gens = sorted({g for r in runs for g in r}, key=_gen_key)
    out = {}
    for g in [*gens, "all"]:
        vals = []
        for r in runs:
            c = pooled_counts(r) if g == "all" else r.get(g)
            if c and c.get("total", 0):
                vals.append(sum(c.get(x, 0) for x in labels) / c["total"])
        if vals:
            out[str(g)] = {"mean": float(np.mean(vals)), "std": float(np.std(vals)), "n": len(vals)}
    return out


def _gen_key(g: Any) -> tuple[int, str]:
    s = str(g)
    return (int(s), s) if s.isdigit() else (10**9, s)


@dataclass
class Attribution:
    """Attribution per generation (and ``"all"``: generations pooled)."""

    players: tuple[str, ...]
    metric: str
    method: str
    interactions: str
    per_gen: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{gen: {shapley: {...}, synergy: {pairwise, triple}, values: {mask: mean}, ...}}``."""
        return self.per_gen


def value_tables(
    results: Mapping[str, Sequence[Mapping[str, Mapping[str, int]]]],
    players: Sequence[str] = ("d", "a", "p"),
    metric: str = "pass_or_better",
    *,
    plan: int | None = None,
) -> dict[str, dict[Coalition, list[float]]]:
    """Per generation, each coalition's per-rollout rates (the raw material of ``v(S)``).

    ``results`` maps mask strings to a list over rollouts of ``{gen: counts}``. Masks are matched
    to coalitions by their non-absent players among ``players``; every coalition must be present
    and all masks must cover the same generations."""
    players = check_players(players)
    _check_metric(metric)
    by_coal: dict[Coalition, Sequence[Mapping[str, Mapping[str, int]]]] = {}
    for key, runs in results.items():
        m = AnalysisMask.parse(key)
        if plan is not None and m.plan != plan:
            continue
        coal = m.players()
        if not coal <= set(players):
            continue
        by_coal[frozenset(coal)] = runs
    missing = [
        str(coalition_mask(sorted(s), plan=plan or 7)) for s in subsets(players) if s not in by_coal
    ]
    if missing:
        raise FrozenDataError(f"missing coalition masks {missing}; run them with `intervene` first")
    gensets = {c: frozenset(g for r in runs for g in r) for c, runs in by_coal.items()}
    ref = gensets[frozenset()]
    bad = {str(coalition_mask(sorted(c))): sorted(g ^ ref) for c, g in gensets.items() if g != ref}
    if bad:
        raise FrozenDataError(f"masks cover different generations (symmetric difference): {bad}")
    out: dict[str, dict[Coalition, list[float]]] = {}
    for g in [*sorted(ref, key=_gen_key), "all"]:
        out[str(g)] = {
            c: [
                _rate(pooled_counts(r) if g == "all" else r[g], metric)
                for r in runs
                if g == "all" or g in r
            ]
            for c, runs in by_coal.items()
        }
    return out


def attribute(
    results: Mapping[str, Sequence[Mapping[str, Mapping[str, int]]]],
    players: Sequence[str] = ("d", "a", "p"),
    metric: str = "pass_or_better",
    method: str = "shapley",
    interactions: str = "official",
    *,
    plan: int | None = None,
) -> Attribution:
    """Attribute ``v(S)`` (mean rate over rollouts) to players, per generation (Sec. 4).

    ``method``: ``"shapley"`` (exact), ``"banzhaf"`` or ``"sampled"`` (antithetic permutation
    sampling, for many players). ``interactions``: ``"official"`` (triple dividend and pairwise
    terms minus a third of it), ``"shapley"`` (Grabisch-Roubens index), ``"mobius"`` or
    ``"none"``."""
    if method not in ("shapley", "banzhaf", "sampled"):
        raise AnalystValueError(f"unknown method {method!r}: use shapley, banzhaf or sampled")
    if interactions not in ("official", "shapley", "mobius", "none"):
        raise AnalystValueError(
            f"unknown interactions {interactions!r}: use official, shapley, mobius or none"
        )
    players = check_players(players)
    if len(players) > 4 and method != "sampled":
        warnings.warn(
            f"exact attribution over {len(players)} players needs {2 ** len(players)} mask runs",
            stacklevel=2,
        )
    tables = value_tables(results, players, metric, plan=plan)
    att = Attribution(players, metric, method, interactions)
    for g, table in tables.items():
        v = {c: float(np.nanmean(x)) if x else float("nan") for c, x in table.items()}
        if method == "shapley":
            phi = shapley(v, players)
        elif method == "banzhaf":
            phi = banzhaf(v, players)
        else:
            phi = shapley_sampled(v.__getitem__, players, num_permutations=200)
        entry: dict[str, Any] = {
            "shapley" if method != "banzhaf" else "banzhaf": phi,
            "values": {
                str(coalition_mask(sorted(c), plan=plan or 7)): v[c] for c in subsets(players)
            },
        }
        if interactions == "official" and len(players) == 3:
            entry["synergy"] = official_synergy(v, players)
        elif interactions == "shapley":
            entry["synergy"] = {"pairwise": shapley_interaction(v, players)}
        elif interactions == "mobius":
            entry["synergy"] = {"+".join(sorted(k)): x for k, x in mobius(v, players).items() if k}
        att.per_gen[g] = entry
    return att


def bootstrap_interaction(
    per_unit: Mapping[Coalition, np.ndarray],
    pair: tuple[str, str],
    *,
    num_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float, float]:
    """Percentile bootstrap CI of the pair's Möbius interaction
    ``v(ij) - v(i) - v(j) + v(∅)`` (no other players present), resampling units (parents):
    ``per_unit[S]`` is an array over the same units in the same order."""
    i, j = pair
    cols = [frozenset({i, j}), frozenset({i}), frozenset({j}), frozenset()]
    arr = np.stack([np.asarray(per_unit[c], dtype=float) for c in cols])
    signs = np.array([1.0, -1.0, -1.0, 1.0])
    point = float(signs @ arr.mean(axis=1))
    rng = np.random.default_rng(seed)
    n = arr.shape[1]
    idx = rng.integers(0, n, size=(num_boot, n))
    boots = np.einsum("k,kbn->b", signs, arr[:, idx]) / n
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return point, float(lo), float(hi)
