"""Simulation claims (numpy only): FIR control and the power gain of JKBB scaling.

Calibration (seed 0, 500 repetitions per cell, the full 270-cell grid, 11.6 s measured under
load): no cell violates FIR <= alpha + 3 SE for bh / storey / jkbb (z = 1); the closest are
storey at (500, 1000, 0.8, 3, 0.05) (FIR 0.0499, SE 0.0005: exact conformal Storey sits at
alpha) and jkbb at (500, 1000, 0.8, 2, 0.05) (0.0467, 2.6 SE below alpha). JKBB z = 0 exceeds
alpha + 3 SE in 18 of 270 cells (worst 0.062 at n = 100, m = 200, pi = 0.8, mu = 2,
alpha = 0.05), hence the margin. Power: jkbb >= bh in every repetition (min difference 0.0);
mean power over pi >= 0.5, mu >= 2 cells: jkbb / bh = 1.38 (>= 1.2 asserted); over pi >= 0.9:
jkbb 0.865 vs storey 0.800.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ptdi.stats import simulate

ALPHAS = (0.05, 0.1, 0.2)
GRID = list(itertools.product((20, 100, 500), (200, 1000), (0.0, 0.2, 0.5, 0.8, 0.95), (1, 2, 3)))


@pytest.fixture(scope="module")
def grid_rows():
    rows = []
    superset_min = np.inf
    for n, m, pi, mu in GRID:
        res = simulate(n, m, pi, mu, ALPHAS, reps=500, seed=0, return_reps=True)["results"]
        diff = res["jkbb"]["power_reps"] - res["bh"]["power_reps"]
        superset_min = min(superset_min, float(diff.min()))
        for j, a in enumerate(ALPHAS):
            row = {"n": n, "m": m, "pi": pi, "mu": mu, "alpha": a}
            for est, r in res.items():
                row[f"{est}_fir"] = r["fir"][j]
                row[f"{est}_se"] = r["fir_se"][j]
                row[f"{est}_power"] = r["power"][j]
            rows.append(row)
    return rows, superset_min


@pytest.mark.claim
@pytest.mark.slow
def test_claim_fir_control_every_cell(grid_rows):
    rows, _ = grid_rows
    assert len(rows) == 270
    for est in ("bh", "storey", "jkbb"):
        bad = [r for r in rows if r[f"{est}_fir"] > r["alpha"] + 3 * r[f"{est}_se"]]
        assert not bad, (est, bad[:3])
    z0 = sum(r["jkbb_z0_fir"] > r["alpha"] + 3 * r["jkbb_z0_se"] for r in rows)
    print(f"\njkbb z=0 cells above alpha + 3 SE (reported, not asserted): {z0}/270")


@pytest.mark.claim
@pytest.mark.slow
def test_claim_power_gain(grid_rows):
    rows, superset_min = grid_rows
    assert superset_min >= 0.0  # power(jkbb) >= power(bh) in every repetition
    sel = [r for r in rows if r["pi"] >= 0.5 and r["mu"] >= 2]
    jk = np.mean([r["jkbb_power"] for r in sel])
    bh = np.mean([r["bh_power"] for r in sel])
    print(f"\nmean power over pi>=0.5, mu>=2: jkbb {jk:.3f} bh {bh:.3f} ratio {jk / bh:.3f}")
    for r in sel:
        ratio = r["jkbb_power"] / r["bh_power"] if r["bh_power"] > 0 else float("inf")
        print(
            f"  n={r['n']} m={r['m']} pi={r['pi']} mu={r['mu']} a={r['alpha']}: "
            f"jkbb {r['jkbb_power']:.3f} bh {r['bh_power']:.3f} x{ratio:.2f}"
        )
    assert jk >= 1.2 * bh
    hi = [r for r in rows if r["pi"] >= 0.9]
    jk_hi = np.mean([r["jkbb_power"] for r in hi])
    st_hi = np.mean([r["storey_power"] for r in hi])
    print(f"mean power over pi>=0.9: jkbb {jk_hi:.3f} storey {st_hi:.3f}")
    assert jk_hi >= st_hi


# Reference table: (n, m, pi, mu, alpha) -> {estimator: (FIR, power)}, 400 repetitions each.
TABLE = {
    (200, 400, 0.5, 2.0, 0.10): {
        "bh": (0.044, 0.481), "storey": (0.092, 0.687), "jkbb_z0": (0.098, 0.703),
        "jkbb": (0.086, 0.665)},
    (100, 400, 0.8, 2.0, 0.10): {
        "bh": (0.018, 0.593), "storey": (0.085, 0.935), "jkbb_z0": (0.110, 0.960),
        "jkbb": (0.090, 0.938)},
    (200, 400, 0.95, 1.5, 0.10): {
        "bh": (0.004, 0.359), "storey": (0.027, 0.919), "jkbb_z0": (0.047, 0.995),
        "jkbb": (0.042, 0.984)},
    (300, 600, 0.94, 1.0, 0.10): {
        "bh": (0.005, 0.067), "storey": (0.017, 0.406), "jkbb_z0": (0.032, 0.743),
        "jkbb": (0.027, 0.658)},
    (100, 100, 0.5, 2.0, 0.20): {
        "bh": (0.098, 0.693), "storey": (0.185, 0.852), "jkbb_z0": (0.213, 0.870),
        "jkbb": (0.170, 0.822)},
    (20, 200, 0.8, 3.0, 0.10): {
        "bh": (0.012, 0.799), "storey": (0.092, 0.991), "jkbb_z0": (0.114, 0.992),
        "jkbb": (0.091, 0.984)},
}  # fmt: skip


@pytest.mark.claim
def test_claim_reference_table_within_002():
    """2,000 repetitions (seed 0) against the 400-repetition reference table, +-0.02.

    Calibration: the largest gap is BH's power in the first row, 0.4925 (SE 0.0032 here, so the
    table's own 400-repetition SE is about 0.0071) against 0.481: 0.012. Every printed SE pair is
    (ours, the table's ~ ours x sqrt(5)).
    """
    worst = 0.0
    for (n, m, pi, mu, a), ref in TABLE.items():
        res = simulate(n, m, pi, mu, a, reps=2000, seed=0)["results"]
        for est, (fir, power) in ref.items():
            r = res[est]
            for name, ours, theirs, se in (
                ("FIR", r["fir"][0], fir, r["fir_se"][0]),
                ("power", r["power"][0], power, r["power_se"][0]),
            ):
                gap = abs(ours - theirs)
                worst = max(worst, gap)
                print(
                    f"{(n, m, pi, mu, a)} {est} {name}: {ours:.3f} vs {theirs:.3f} "
                    f"(SE {se:.4f} / table ~{se * 5**0.5:.4f})"
                )
                assert gap <= 0.02, ((n, m, pi, mu, a), est, name, ours, theirs)
    print(f"largest gap {worst:.4f}")
