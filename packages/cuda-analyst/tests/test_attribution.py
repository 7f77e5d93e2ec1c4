"""Attribution maths on random value tables (exactness: efficiency, symmetry, null player,
additivity, Möbius decomposition, official synergy formulas, sampled vs exact)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from cuda_analyst.attribution import (
    attribute,
    banzhaf,
    label_stats,
    mobius,
    official_synergy,
    shapley,
    shapley_interaction,
    shapley_sampled,
    subsets,
)
from cuda_analyst.errors import FrozenDataError

P3 = ("d", "a", "p")


def rand_table(players, seed):
    rng = np.random.default_rng(seed)
    return {s: float(rng.random()) for s in subsets(players)}


@pytest.mark.parametrize("seed", range(5))
def test_efficiency_and_mobius_decomposition(seed):
    v = rand_table(P3, seed)
    phi = shapley(v, P3)
    total = v[frozenset(P3)] - v[frozenset()]
    assert sum(phi.values()) == pytest.approx(total, abs=1e-12)
    m = mobius(v, P3)
    singles = sum(m[frozenset({x})] for x in P3)
    pairs = sum(m[frozenset(c)] for c in itertools.combinations(P3, 2))
    assert singles + pairs + m[frozenset(P3)] == pytest.approx(total, abs=1e-12)
    # Shapley = each dividend split equally among its members
    for x in P3:
        assert phi[x] == pytest.approx(
            sum(val / len(t) for t, val in m.items() if x in t), abs=1e-12
        )


def test_symmetry_null_player_additivity():
    # p is a null player; d and a symmetric
    v = {s: (0.1 + 0.3 * len(s & {"d", "a"})) for s in subsets(P3)}
    phi = shapley(v, P3)
    assert phi["p"] == pytest.approx(0.0, abs=1e-12)
    assert phi["d"] == pytest.approx(phi["a"], abs=1e-12)
    assert banzhaf(v, P3)["p"] == pytest.approx(0.0, abs=1e-12)
    v1, v2 = rand_table(P3, 1), rand_table(P3, 2)
    s12 = shapley({k: v1[k] + v2[k] for k in v1}, P3)
    s1, s2 = shapley(v1, P3), shapley(v2, P3)
    for x in P3:
        assert s12[x] == pytest.approx(s1[x] + s2[x], abs=1e-12)


def test_official_synergy_formulas_and_interaction_index():
    v = rand_table(P3, 7)
    f = frozenset
    e = f()
    syn = official_synergy(v, P3)
    triple = (
        v[f(P3)] - v[f("da")] - v[f("dp")] - v[f("ap")] + v[f("d")] + v[f("a")] + v[f("p")] - v[e]
    )
    assert syn["triple"] == pytest.approx(triple, abs=1e-12)
    pair = v[f("da")] - v[f("d")] - v[f("a")] + v[e] - triple / 3
    assert syn["pairwise"]["d+a"] == pytest.approx(pair, abs=1e-12)
    # Grabisch-Roubens index for n = 3: pair dividend + half the triple dividend
    m = mobius(v, P3)
    sii = shapley_interaction(v, P3)
    assert sii["d+a"] == pytest.approx(m[f("da")] + triple / 2, abs=1e-12)


def test_sampled_shapley_within_0_01_for_six_players():
    players = ("d", "a", "p", "r", "x", "y")
    if True:
        rng = np.random.default_rng(3)
        w = rng.random(6)
        inter = rng.random((6, 6)) * 0.1

        def value(s):
            idx = [players.index(x) for x in s]
            return float(w[idx].sum() + sum(inter[i, j] for i in idx for j in idx if i < j))

        v = {s: value(s) for s in subsets(players)}
        exact = shapley(v, players)
        est = shapley_sampled(value, players, num_permutations=2000, seed=0)
    assert max(abs(exact[x] - est[x]) for x in players) < 0.01


def _results(v, runs=2):
    from cuda_analyst.masks import coalition_mask

    out = {}
    for s, val in v.items():
        k = round(val * 100)
        out[str(coalition_mask(sorted(s)))] = [
            {"1": {"total": 100, "fail": 100 - k, "compile": 0, "pass": k, "fast": 0}}
        ] * runs
    return out


def test_attribute_reads_mask_results_and_checks_them():
    v = {s: round(float(x), 2) for s, x in rand_table(P3, 4).items()}
    res = _results(v)
    att = attribute(res, metric="pass")
    assert att.per_gen["1"]["shapley"] == pytest.approx(shapley(v, P3), abs=1e-9)
    assert set(att.per_gen) == {"1", "all"}
    res.pop("p7-d3-a3-p0")
    with pytest.raises(FrozenDataError, match="p7-d3-a3-p0"):
        attribute(res)
    res = _results(v)
    res["p7-d3-a0-p0"] = [{"2": {"total": 1, "pass": 1}}] * 2
    with pytest.raises(FrozenDataError, match="different generations"):
        attribute(res)


def test_label_stats():
    runs = [{"1": {"total": 4, "fast": 1, "pass": 1}}, {"1": {"total": 4, "fast": 2, "pass": 2}}]
    st = label_stats(runs, ("fast", "pass"))
    assert st["1"]["mean"] == pytest.approx(0.75) and st["1"]["std"] == pytest.approx(0.25)
