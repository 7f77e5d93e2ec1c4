"""The paper's qualitative claim with a planted confounder: correlational learnability analysis
underestimates the causal effect of frequency; the intervention recovers it.

Learner: the add-α (α = 0.5) oracle-state learner; L_τ = its decision KL at the targeted arc
against the training reference, taken as the *expected* decision KL given the realised visits of
the source state (exact binomial sum). Suite: 30 random PDFAs (8 states, |Σ| = 6, out-degree 3,
mean length 20), one targeted arc each with ``p_τ ~ LogUniform[0.03, 0.5]`` and source states
chosen so their expected visits vary little; N = 5000 strings per corpus, one corpus seed per cell;
interventions ``do(visits = f × natural)`` by tilting entries into the source state,
f ∈ {0.25, 0.5, 1, 2, 4}; the natural (f = 1) corpora are the correlational cells.

Calibration (seeded numpy only, so bit-identical on every machine; measured 2026-12-01):
- try 1 (this recipe, control visits LogUniform[0.5, 8]): Var(log p_τ) = 0.855, Var(log visits)
  = 0.050; slope_int = -0.9974, CI [-1.0002, -0.9946]; slope_corr = -0.0437, CI [-0.119, 0.045]
  (disjoint; |corr| = 0.044 < 0.5·|int|); adjusted -0.962. Control (p_τ = 0.15): slope_corr
  -0.9917, CI [-1.0020, -0.9805], NOT inside the interventional CI [-1.0000, -0.9943]: the
  realised visit spread was narrow (Var(log n) ≈ 0.5) so the Binomial noise of the measured
  frequency attenuated the slope by ~0.8 %.
- try 2 (lever: more visit spread in the control, visits LogUniform[0.25, 16], Var(log visits)
  = 0.742): control slope_corr = -0.99596, CI [-1.0104, -0.9813]; interventional CI
  [-1.00097, -0.99359]: inside, margin 0.0024 to the upper end. The main suite is unchanged.
Margins of the asserted claim: interventional CI is 0.30 inside [-1.3, -0.7] on each side;
|slope_corr| / |slope_int| = 0.044 (bound 0.5); CI gap 0.87. (A single corpus's realised
decision KL is χ²-like noise with sd ≈ 1 in log units, which is why the expectation given the
realised visits is used.)
"""

from __future__ import annotations

import numpy as np
import pytest
from pfa_learnability.analysis import compare, planted_suite, run_interventional

pytestmark = [pytest.mark.claim, pytest.mark.slow]


def _run(suite):
    rows = run_interventional(suite, n_strings=5000, seeds=(0,), alpha=0.5, expected=True)
    return compare([r for r in rows if r["factor"] == 1.0], rows)


def test_claim_interventional_vs_correlational_slope():
    suite = planted_suite(30, seed=0)
    lp = np.log([t.pfa.next_symbol_table()[t.decision] for t in suite])
    lv = np.log([t.pfa.expected_visits()[t.arc.q] for t in suite])
    assert lp.var() >= 2 * lv.var()  # the planted confounder dominates F
    res = _run(suite)
    print("\nplanted confounder:", res)
    lo, hi = res["ci_int"]
    assert lo >= -1.3 and hi <= -0.7
    assert abs(res["slope_corr"]) < 0.5 * abs(res["slope_int"])
    assert res["cis_disjoint"]
    assert res["n_cells_int"] == 150 and res["n_automata"] == 30


def test_claim_control_without_confounding():
    suite = planted_suite(30, seed=1, constant_p_tau=0.15, visits_range=(0.25, 16.0))
    res = _run(suite)
    print("\ncontrol (constant p_tau):", res)
    lo, hi = res["ci_int"]
    assert lo <= res["slope_corr"] <= hi
