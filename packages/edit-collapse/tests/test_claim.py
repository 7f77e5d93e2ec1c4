"""The paper's headline directions on the world model, read from the cached seed-0 sequential
sessions (T = 1, 10, 50; fixture ``edit-collapse-sessions``).

Calibration. Prototype (40 x 4 world, 900 steps: recall 0.89, strict reasoning 0.625): FT-M
0.61 / 0.59 / 0.46, ROME 0.61 / 0.34 / 0.00, MEMIT 0.625 / 0.61 / 0.61, AlphaEdit 0.62 /
0.615 / 0.635 at T = 1 / 10 / 50; keys at the subject's last token left ROME/MEMIT at Rel 0
(the tiny model reads facts at the prompt's last token), hence ``fact_token="last"``.
Fixture (1,500 steps: recall 1.00, strict reasoning 0.95 on 200 held-out problems, one
problem = 0.005):
- reasoning at T = 1 / 10 / 50: FT-M 0.950 / 0.935 / 0.705 (margin 19.5 points over the
  5-point drop), ROME 0.940 / 0.425 / 0.110 (margin 79); MEMIT 0.950 / 0.950 / 0.930 (2 points:
  the 5-point drop does NOT hold for MEMIT, reported in the README, not asserted);
  AlphaEdit under EasyEdit's v_lr 0.1 and L2 10 0.950 / 0.950 / 0.940, but with Rel 0.00 at
  every T (no edit realised; see below).
- retrieval: reasoning 0.950 at every T (exact), but Rel 0.34 and Average 0.396 at T = 50
  (MEMIT 0.561): Rel >= 0.8 and "Average >= every parametric method" do NOT hold; not asserted.
- MEMIT, layer 2: median R over the 5 % smallest-sigma directions 2.35 / 8.02 / 21.02;
  rho(sigma_k, R_k) = -0.993 at T = 50.
AlphaEdit re-calibrated 2026-12-02 (the values above are of the old settings, under which it
realised no edit: Rel 0.00 at every T, so "loses less than MEMIT" compared MEMIT with an
unedited model). Diagnosis on 12 single edits: with EasyEdit's Llama-3-8B ``v_lr`` 0.1, v*
moved ||z|| (about 127) by only 27 (Adam's cap 0.1 x 25 steps x sqrt(128)), and MEMIT's solve
given that z* also reached Rel 0.00; given MEMIT's z*, the projected solve with ``L2`` 10
realised 44 % of the residual (Rel 0.00), with ``L2`` 1 or 0.1 98-106 % (Rel 0.92, as MEMIT).
Recipe of the new try, written before measuring: ``v_lr`` 0.5 and ``L2`` = 10 x 512 / 14336
(about 0.36, MEMIT's width scaling of lambda), threshold 2e-2 kept (null space 335 / 252 of 512
directions at layers 1 / 2), everything else as before; the comparison with MEMIT is asserted
only if AlphaEdit's Rel at T = 1 is at least 0.5 (it edits at all).
Measured (fixture, seed 0): AlphaEdit Rel 1.00 / 0.80 / 0.90, Loc 1.00 / 1.00 / 0.775,
reasoning 0.950 / 0.920 / 0.870 at T = 1 / 10 / 50: it loses 8 points, MEMIT 2, so "AlphaEdit
loses less than MEMIT" does NOT hold on this model (strict xfail below). Sensitivity, the same
session without geometry (report only): threshold 2e-2 with L2 1 Rel 1.00 / 0.60 / 0.84,
reasoning 0.950 / 0.925 / 0.910; threshold 0.2 with L2 10 Rel 1.00 / 0.50 / 0.76, reasoning
0.950 / 0.950 / 0.910: AlphaEdit loses 4 points at T = 50 in both, still more than MEMIT.
Re-run 2026-12-02 after the evaluator scored each dimension in one batched call and the gate
became one forward: the same reasoning, Rel/Gen/Port and Average values; MEMIT's Loc at T = 50
0.865 (was 0.875) and its R values above moved in the third digit (batching changes float sums).
Retrieval Rel (0.34 at T = 50): the world model copies a retrieved distractor's value when shown
the top-3 facts (it was trained on one target fact plus at most one random true fact). Try,
recipe written before the run: a separately named world model trained with 1-3-fact contexts
whose distractors are TRUE facts sharing the target's subject or relation (as retrieval shows
them), the target contradicting memory half the time, everything else (recipe, gates) as the
fixture; if it passes its gates, retrieval Rel at T = 50 and every editor's rows on it.
Result (torch's default AVX512 kernels, see below): recall 1.00, reasoning 0.645 < 0.70:
failed its gate. Second try (the same kernels) (written before it
ran): the same documents with 2,000 steps instead of 1,500, same gates. Measured: recall 1.00,
reasoning 0.96 (gates passed), but retrieval Rel at T = 50 fell: own fact alone 0.50 (fixture
0.98; the model answers the unedited value in 24 of 25 misses), behind the gate 0.50, top-3
0.24 (fixture 0.34). FT-M / ROME reasoning 0.960 -> 0.105 / 0.200 at T = 50, MEMIT 0.950,
AlphaEdit 0.890, MEMIT rho(sigma_k, R_k) -0.99: the asserted directions hold there too, Rel
>= 0.8 does not, so the fixture stays the 1,500-step model.
Third try (written before it ran): the first try's 1,500 steps with the fixture's AVX2 kernels.
Measured: recall 1.00, reasoning 0.73 (gates passed), retrieval Rel at T = 50 0.12 (top-3; own
fact alone 0.66); FT-M reasoning 0.725 / 0.750 / 0.650 (rises 2.5 points from T = 1 to 10,
beyond the tolerance), ROME 0.715 / 0.705 / 0.000, MEMIT 0.710 / 0.730 / 0.735, AlphaEdit
0.710 / 0.730 / 0.660. Not switched.
The fixture recipe with torch's default AVX512 kernels (AMD EPYC, without the AVX2 pin of the
nox sessions; one thread): recall 1.00 but reasoning 0.61, so the 1,500-step world fails its
gate there (with AVX2 kernels it is the fixture, 0.95). With the AVX512 kernels and 2,000 steps
(separate key, not the fixture; the two world tries above used these kernels too): recall
1.00, reasoning 0.915; reasoning at T = 1 / 10 / 50 FT-M 0.915 / 0.915 / 0.860 (5.5 points:
holds by half a point), ROME 0.915 / 0.725 / 0.000, MEMIT 0.915 / 0.910 / 0.895, AlphaEdit
0.915 / 0.905 / 0.845 (Rel 1.00 at T = 1), retrieval 0.915 at every T (Rel 0.38 at T = 50);
MEMIT R_small 1.74 / 6.53 / 16.0, rho -0.99: every asserted direction holds there too.
Retrieval-side levers on the shipped world (no world rebuild; recipe written 2026-12-02 before
any run): k = 3, BM25, the yes/no gate and the direct answer when nothing is kept all stay; the
retrieval session of the fixture protocol (seed 0, T = 1 / 10 / 50, teacher-forced, reasoning on
the 200 held-out problems) is re-run with (1) ``order="best_last"``: the gate-kept facts composed
in reverse retrieval rank, the best-ranked one nearest the question (today: best first); (2)
``order="gate"``: the kept facts sorted by the gate's log P(yes) - log P(no), highest last;
(3) best_last with ``gate_margin`` -1 (the margin with the best Youden index on the held-out
edit seeds 21 and 22, chosen there, not on seed 0). Each also on held-out edit seed 21 (report
only). Rule: a variant with Rel >= 0.8 at T = 50 and reasoning exact becomes the default and
the retrieval part of the claim is asserted; otherwise a variant becomes the default only if
its Average at T = 10 and 50 is higher on seed 0 and on seed 21 and its Rel is not lower. Upper
bound noted beforehand: at margin 0 the gate keeps the own fact for 68 % of the T = 50 queries,
so no ordering alone can reach 0.8 unless the gate changes.
Measured (seed 0, T = 1 / 10 / 50; reasoning 0.950 at every T in every variant): today's order
Rel 1.00 / 0.60 / 0.34, Average 0.625 / 0.613 / 0.396 (the fixture's row); (1) best_last Rel
1.00 / 0.60 / 0.28, Port at T = 50 0.80 (was 0.40), Average 0.625 / 0.613 / 0.473; (2) gate order
Rel 1.00 / 0.70 / 0.30, Average 0.625 / 0.631 / 0.448; (3) best_last at margin -1: the gate keeps
the own fact for 50 / 50 queries (34 at margin 0) and 2.2 facts a query (1.6), Rel 1.00 / 0.70 /
0.40, Gen 1.00 / 0.70 / 0.75, Loc 0.50 / 0.575 / 0.19, Average 0.875 / 0.694 / 0.535. The
distractors, not the order, cost Rel. Next tries (written before running): a per-fact relative
gate, ``gate_rel``: keep a fact only when its gate score is above ``gate_margin`` AND within
``gate_rel`` of the best score among the k retrieved (4) ``gate_rel`` 1 at margins 0 and -1; (5)
``gate_rel`` 0, i.e. only the best-scored fact when it passes: this composes one fact, so it is a
diagnostic of the distractor effect, not a candidate default (it would be k = 1 in effect);
each with best_last, seeds 0 and 21, same rule as above.
Measured (Rel and Average at T = 1 / 10 / 50; reasoning 0.950 at every T in every variant and seed;
58 CPU-s for the 16 sessions): seed 0: (4) gate_rel 1, margin 0: Rel 1.00 / 0.60 / 0.30, Average
0.625 / 0.613 / 0.448; gate_rel 1, margin -1: Rel 1.00 / 0.70 / 0.42, Loc at T = 50 0.19, Average
0.875 / 0.694 / 0.510; (5) one fact, margin 0: Rel 1.00 / 0.70 / 0.46, Average 0.625 / 0.631 /
0.427; one fact, margin -1: Rel 1.00 / 0.80 / 0.60, Loc 0.21, Average 0.875 / 0.712 / 0.502.
Held-out seed 21 (today's order: Rel 1.00 / 0.50 / 0.46, Average 0.75 / 0.419 / 0.434): best_last
Rel 0.52 at T = 50, Average 0.75 / 0.456 / 0.529; gate order Rel 0.46, Average 0.75 / 0.419 /
0.436; best_last at margin -1 Rel 1.00 / 0.60 / 0.64, Loc 1.00 / 0.15 / 0.255, Average 0.875 /
0.537 / 0.584; gate_rel 1 at margin 0 / -1 Rel 0.54 / 0.66, Average at T = 50 0.514 / 0.571; one
fact at margin 0 / -1 Rel 0.48 / 0.66. No variant reaches Rel 0.8 at T = 50: even one fact chosen
by the gate at margin -1 (the own fact always passes the gate there) gives 0.60 on seed 0 against
0.98 for the own fact alone: the gate scores a distractor above the own fact for 24 of the 50
queries (seed 21: 18; measured separately at T = 50); the limit is the world model's relevance
judgement and its multi-fact context-following, not the composition. The rule above is met by
best_last at margin -1 (and gate_rel 1 at margin -1) on Average, but it buys Rel, Gen and Port by
answering unrelated questions from retrieved facts: Loc at T = 50 falls from 0.455 to 0.19 (seed
21: 0.435 to 0.255), below every parametric method's, and its Average at T = 50 (0.535) stays below
MEMIT's (0.56) and AlphaEdit's (0.64). The rule should have guarded Loc; judged worse for users on
that account, the default is not changed (nothing in the package changed) and the retrieval part of
the claim stays unasserted.
"""

from __future__ import annotations

import itertools

import pytest
from edit_collapse.experiments import load_session, session_entry
from scipy.stats import spearmanr

pytestmark = pytest.mark.claim

PARAMETRIC = ("ft-m", "rome", "memit", "alphaedit")


@pytest.fixture(scope="module")
def sessions(world_entry):
    return {
        m: load_session(session_entry(m, seed=0, world_entry=world_entry))
        for m in (*PARAMETRIC, "retrieval")
    }


def _reason(rows):
    return [r["reasoning"] for r in rows]


@pytest.mark.parametrize("method", ["ft-m", "rome"])
def test_parametric_editing_damages_reasoning(sessions, method):
    rows = sessions[method]["rows"]
    pre = rows[0]["reasoning_pre"]
    acc = _reason(rows)
    assert [r["n_edits"] for r in rows] == [1, 10, 50]
    assert acc[-1] <= pre - 0.05
    assert all(b <= a + 0.02 for a, b in itertools.pairwise(acc))


def test_alphaedit_edits_before_comparison(sessions):
    """Guard: the reasoning comparison below means nothing for an editor that does not edit."""
    assert sessions["alphaedit"]["rows"][0]["rel"] >= 0.5


@pytest.mark.xfail(
    strict=True,
    reason="once AlphaEdit realises its edits (Rel 0.90 at T = 50) it loses 8 reasoning points at "
    "T = 50 on the world model, MEMIT 2 (MEMIT realises fewer: Rel 0.70)",
)
def test_alphaedit_loses_less_than_memit(sessions):
    assert sessions["alphaedit"]["rows"][0]["rel"] >= 0.5, "AlphaEdit realised no edit at T = 1"
    pre = sessions["memit"]["rows"][0]["reasoning_pre"]
    loss_alpha = pre - sessions["alphaedit"]["rows"][-1]["reasoning"]
    loss_memit = pre - sessions["memit"]["rows"][-1]["reasoning"]
    assert loss_alpha < loss_memit


def test_retrieval_keeps_reasoning_exactly(sessions):
    for r in sessions["retrieval"]["rows"]:
        assert r["reasoning"] == r["reasoning_pre"]


def test_memit_collapse_diagnostics(sessions):
    geo = [g for g in sessions["memit"]["geometry"] if g["layer"] == 2]
    ts = [g["n_edits"] for g in geo]
    small = [g["R_small"] for g in geo]
    assert ts == [1, 10, 50]
    assert spearmanr(ts, small).statistic > 0
    assert geo[-1]["rho_sigma_R"] < 0
