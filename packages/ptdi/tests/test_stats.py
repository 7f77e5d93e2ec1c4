"""Property and exactness tests of the statistics: p-values, JKBB, Storey, BH, PTDI selection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ptdi.stats import (
    beta_kernel,
    bh_select,
    conformal_pvalues,
    estimate_pi0,
    evaluate,
    jkbb_auto_pi0,
    jkbb_pi0,
    jkbb_weights,
    ptdi_select,
    selection_metrics,
    split_protocol,
    storey_pi0,
)
from scipy import integrate


# ------------------------------------------------------------------ conformal p-values
def test_pvalues_superuniform_under_null_on_grid():
    rng = np.random.default_rng(0)
    reps, n, m = 4000, 19, 5
    cal = rng.standard_normal((reps, n))
    test = rng.standard_normal((reps, m))
    p = conformal_pvalues(cal, test, clip=0.0)
    grid = np.arange(1, n + 2) / (n + 1)
    # every p-value lies on {1/(n+1), ..., 1}
    assert np.allclose(np.min(np.abs(p.ravel()[:, None] - grid[None]), axis=1), 0.0)
    flat = p.ravel()
    for u in np.linspace(0.02, 1.0, 25):
        est = np.mean(flat <= u)
        se = math.sqrt(u * (1 - u) / reps)  # rows are independent experiments
        assert est <= u + 3 * se + 1e-12, (u, est)
    # with continuous scores the conservative p-value is exactly uniform on the grid
    assert abs(np.mean(flat <= 0.5) - math.floor(0.5 * (n + 1)) / (n + 1)) < 0.02


def test_pvalues_ties_and_formula():
    cal = np.array([0.0, 1.0, 1.0, 2.0])
    test = np.array([1.0, 3.0, -1.0])
    p = conformal_pvalues(cal, test, clip=0.0)
    # (1 + #{cal >= t}) / (n + 1)
    assert np.allclose(p, [(1 + 3) / 5, 1 / 5, 5 / 5])
    pr = conformal_pvalues(cal, test, ties="randomized", rng=0, clip=0.0)
    u = np.random.default_rng(0).random(3)
    assert np.allclose(pr, [(1 + u[0] * 3) / 5, u[1] / 5, (4 + u[2]) / 5])
    assert np.all(pr <= p + 1e-12)
    # default clip keeps values inside (0, 1)
    assert conformal_pvalues(cal, test).max() == 1 - 1e-10


def test_randomized_pvalues_uniform_under_null_with_ties():
    rng = np.random.default_rng(1)
    cal = rng.integers(0, 3, size=(20000, 9)).astype(float)
    test = rng.integers(0, 3, size=(20000, 1)).astype(float)
    p = conformal_pvalues(cal, test, ties="randomized", rng=2, clip=0.0).ravel()
    for u in (0.1, 0.3, 0.5, 0.8):
        se = math.sqrt(u * (1 - u) / p.size)
        assert abs(np.mean(p <= u) - u) < 4 * se


def test_pvalues_invariant_to_monotone_transform_and_orientation():
    rng = np.random.default_rng(3)
    cal, test = rng.standard_normal(50), rng.standard_normal(30)
    p = conformal_pvalues(cal, test)
    assert np.array_equal(p, conformal_pvalues(np.exp(3 * cal) + 1, np.exp(3 * test) + 1))
    assert np.array_equal(
        conformal_pvalues(cal, test, higher_is_member=False), conformal_pvalues(-cal, -test)
    )


def test_pvalues_matrix_equals_rows():
    rng = np.random.default_rng(4)
    cal, test = rng.standard_normal((5, 40)), rng.standard_normal((5, 30))
    p = conformal_pvalues(cal, test)
    for r in range(5):
        assert np.array_equal(p[r], conformal_pvalues(cal[r], test[r]))
    shared = conformal_pvalues(cal[0], test)
    assert np.array_equal(shared[2], conformal_pvalues(cal[0], test[2]))


# ------------------------------------------------------------------ BH
def test_bh_equals_statsmodels_with_ties_and_ones():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    for trial in range(300):
        m = int(rng.integers(1, 60))
        p = rng.choice(np.r_[rng.random(8) * 0.2, 0.01, 0.05, 1.0], size=m)
        if trial % 3 == 0:
            p = np.round(rng.random(m) ** 3, 2)
        for alpha in (0.05, 0.1, 0.3):
            ours = bh_select(p, alpha)
            ref = multipletests(p, alpha, method="fdr_bh")[0]
            assert np.array_equal(ours, ref), (p, alpha)


def test_bh_vector_alpha_equals_loop_and_matrix_rows():
    rng = np.random.default_rng(6)
    p = rng.random((7, 50)) ** 2
    alphas = [0.05, 0.1, 0.2, 0.5]
    sel = bh_select(p, alphas)
    assert sel.shape == (7, 4, 50)
    for r in range(7):
        for j, a in enumerate(alphas):
            assert np.array_equal(sel[r, j], bh_select(p[r], a))
    scale = rng.random(7)
    sel_s = bh_select(p, alphas, scale=scale)
    for r in range(7):
        assert np.array_equal(sel_s[r], bh_select(np.minimum(1, scale[r] * p[r]), alphas))


# ------------------------------------------------------------------ JKBB
@pytest.mark.parametrize("gamma", [1.5, 2.0, 3.0, 7.0])
def test_jkbb_weights(gamma):
    w0, w1, omega = jkbb_weights(gamma)
    assert math.isclose(w0 + w1, 1.0)
    assert math.isclose(w0 + gamma * w1, 0.0, abs_tol=1e-12)
    assert omega > 0
    if gamma == 3.0:
        assert (w0, w1) == (1.5, -0.5)
    assert jkbb_weights(0.5) == jkbb_weights(1.1)


@pytest.mark.parametrize("b", [0.001, 0.05, 0.3, 0.8])
def test_beta_kernel_integrates_to_one(b):
    val, _ = integrate.quad(lambda x: float(beta_kernel(np.array(x), b)), 0, 1, limit=200)
    assert abs(val - 1) < 1e-6


def test_jkbb_uniform_pvalues_near_one_and_bounded():
    rng = np.random.default_rng(7)
    p = rng.random(20000)
    assert abs(jkbb_pi0(p, z=0.0) - 1) < 0.05
    assert abs(jkbb_pi0(p) - 1) < 0.05
    mats = rng.random((50, 300)) ** rng.uniform(0.2, 3, size=(50, 1))
    for z in (0.0, 1.0, 3.0):
        est = jkbb_pi0(mats, z=z)
        assert est.shape == (50,) and np.all((est >= 0) & (est <= 1))
    assert np.all(jkbb_pi0(mats, z=1.0) >= jkbb_pi0(mats, z=0.0))


def _jkbb_transcription(p: np.ndarray, gamma: float) -> float:
    """Direct, loop-based transcription of the five JKBB steps (z = 0)."""
    if gamma <= 1:
        gamma = 1.1
    w1 = -1 / (gamma - 1)
    w0 = 1 - w1
    omega = w0**2 / 2 + w1**2 / (2 * gamma) + 2 * w0 * w1 / (gamma + 1)
    m = len(p)
    c = -m / (sum(math.log(x) for x in p) - 1e-15)
    if 0.95 < c < 1.05:
        c = 1.05
    c = max(c, 0.1)
    h = (omega / (4 * m * c * (c - 1) ** 4 * gamma**2 + 1e-12)) ** (1 / 5)
    h = min(max(h, 0.001), 0.8 / gamma)

    def f(b):
        a = 1 / b + 1
        return sum(math.exp(math.log(a) + (a - 1) * math.log(x)) for x in p) / m

    return min(max(w0 * f(h) + w1 * f(gamma * h), 0.0), 1.0)


@pytest.mark.parametrize("gamma", [0.5, 2.0, 3.0, 10.0])
def test_jkbb_z0_equals_transcription(gamma):
    rng = np.random.default_rng(8)
    for shape in (0.3, 1.0, 2.0):
        p = np.clip(rng.random(400) ** shape, 1e-10, 1 - 1e-10)
        assert math.isclose(jkbb_pi0(p, gamma=gamma, z=0.0), _jkbb_transcription(p, gamma),
                            rel_tol=1e-9, abs_tol=1e-12)  # fmt: skip


def test_jkbb_details_and_margin():
    rng = np.random.default_rng(9)
    p = np.clip(np.r_[rng.random(300), rng.random(300) ** 8], 1e-10, 1)
    est, det = jkbb_pi0(p, return_details=True)
    assert set(det) == {"c", "h", "f_h", "f_gh", "se", "pi0_raw"}
    assert math.isclose(est, min(1.0, max(0.0, det["pi0_raw"]) + det["se"]))
    assert 0.3 < jkbb_pi0(p, z=0) < 0.75


def test_storey_and_estimate_pi0_dispatch():
    p = np.array([0.1, 0.2, 0.6, 0.7, 0.9])
    assert math.isclose(storey_pi0(p), min(1, (1 + 3) / (5 * 0.5)))
    assert math.isclose(storey_pi0(p, lam=0.8), min(1, (1 + 1) / (5 * 0.2)))
    assert estimate_pi0(p, "bh") == 1.0
    assert estimate_pi0(p, "oracle", labels=[1, 1, 0, 0, 0]) == 0.6
    assert estimate_pi0(p, "storey") == storey_pi0(p)
    a = jkbb_auto_pi0(np.random.default_rng(0).random(200), rng=0)
    assert 0.05 <= a <= 1


# ------------------------------------------------------------------ PTDI selection
def test_ptdi_superset_of_bh_and_monotone_in_alpha():
    rng = np.random.default_rng(10)
    for _ in range(50):
        cal = rng.standard_normal(100)
        test = np.r_[rng.standard_normal(60), rng.normal(2.0, 1, 140)]
        alphas = [0.05, 0.1, 0.15, 0.2, 0.3]
        res = ptdi_select(cal, test, alphas)
        bh = bh_select(res.pvalues, alphas)
        assert np.all(res.selected >= bh)
        assert np.all(np.diff(res.selected.astype(int), axis=0) >= 0)  # nested in alpha
        assert res.pi0_hat <= 1
        assert np.array_equal(res.selected, bh_select(res.pvalues, alphas, scale=res.pi0_hat))


def test_ptdi_result_fields_and_labels():
    rng = np.random.default_rng(11)
    cal = rng.standard_normal(200)
    lab = np.r_[np.zeros(100, int), np.ones(300, int)]
    test = rng.standard_normal(400) + 3 * lab
    res = ptdi_select(cal, test, 0.1, labels=lab)
    assert res.selected.shape == (400,) and res.n_cal == 200 and res.m == 400
    assert math.isclose(res.pi_hat, 1 - res.pi0_hat)
    met = selection_metrics(res.selected, lab)
    assert res.fdp == met["FDP"] and res.power == met["Power"] > 0.8
    assert np.all(res.scaled_pvalues[res.selected] <= res.threshold)
    # storey and bh run through the same path
    for est in ("bh", "storey", "oracle", "jkbb_auto"):
        r = ptdi_select(cal, test, 0.1, pi_estimator=est, labels=lab, rng=0)
        assert r.selected.sum() > 0


def test_split_protocol_and_evaluate():
    rng = np.random.default_rng(12)
    mem, non = rng.normal(1.5, 1, 300), rng.standard_normal(400)
    cal, test, lab = split_protocol(mem, non, n_exp=20, seed=0)
    assert (
        cal.shape == (20, 376)
        and test.shape == (20, 264 + 24)
        and lab.sum(1).tolist() == [264] * 20
    )
    for r in range(20):  # calibration and test non-members are disjoint draws of the pool
        assert not set(cal[r]) & set(test[r][lab[r] == 0])
    out = evaluate(mem, non, alphas=[0.1, 0.3], n_exp=50, seed=0)
    assert set(out["results"]) == {"bh", "storey", "jkbb"}
    for row in out["results"].values():
        assert {"FDP", "Power", "FPR", "TPR", "Accuracy"} <= set(row)
        assert len(row["Power"]) == 2 and row["Power"][1] >= row["Power"][0]
    assert out["results"]["jkbb"]["Power"][0] >= out["results"]["bh"]["Power"][0]
