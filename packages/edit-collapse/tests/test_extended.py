"""Extended tier (``nox -s extended``): seeds 1 and 2, T = 100 and ``all``, generate mode.
Report-only numbers go to the README."""

from __future__ import annotations

import pytest
from edit_collapse.experiments import load_session, session_entry

pytestmark = pytest.mark.extended


@pytest.mark.parametrize("seed", [1, 2])
def test_claim_directions_other_seeds(world_entry, seed):
    s = {
        m: load_session(session_entry(m, seed=seed, world_entry=world_entry))
        for m in ("ft-m", "rome", "retrieval")
    }
    for m in ("ft-m", "rome"):
        rows = s[m]["rows"]
        assert rows[-1]["reasoning"] <= rows[0]["reasoning_pre"] - 0.05
    assert all(r["reasoning"] == r["reasoning_pre"] for r in s["retrieval"]["rows"])


def _memit_alphaedit(world_entry, seed):
    return {
        m: load_session(session_entry(m, seed=seed, world_entry=world_entry))
        for m in ("memit", "alphaedit")
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_memit_alphaedit_directions_other_seeds(world_entry, seed):
    """Seeds 1 and 2 of MEMIT: median R over the 5 % smallest-sigma directions at layer 2
    rises with T and rho(sigma_k, R_k) < 0 at T = 50 (measured 2026-12-02: 2.10 / 9.28 / 20.48
    and 2.59 / 8.06 / 22.22 at T = 1 / 10 / 50, rho -0.99 on both). AlphaEdit, with the world
    model's ``v_lr`` 0.5 and ``L2`` 0.36, must realise its first edit (Rel at T = 1 >= 0.5);
    under EasyEdit's v_lr 0.1 / L2 10 it realised none (Rel 0.00 at T = 50 on both seeds)."""
    s = _memit_alphaedit(world_entry, seed)
    assert s["alphaedit"]["rows"][0]["rel"] >= 0.5
    geo = [g for g in s["memit"]["geometry"] if g["layer"] == 2]
    r = [g["R_small"] for g in sorted(geo, key=lambda g: g["n_edits"])]
    assert r == sorted(r) and r[0] < r[-1]
    assert geo[-1]["rho_sigma_R"] < 0


@pytest.mark.xfail(
    strict=True,
    reason="AlphaEdit loses 4 / 4.5 reasoning points at T = 50 on seeds 1 / 2, MEMIT 0.5 / 0.5",
)
@pytest.mark.parametrize("seed", [1, 2])
def test_alphaedit_loses_less_than_memit_other_seeds(world_entry, seed):
    """The paper's "AlphaEdit loses less reasoning than MEMIT" on seeds 1 and 2 (on seed 0 it
    does not hold once AlphaEdit edits: 8 points lost vs MEMIT's 2). Measured 2026-12-02
    (reasoning pre 0.95; T = 1 / 10 / 50): seed 1 AlphaEdit Rel 1.00 / 1.00 / 0.96, reasoning
    0.950 / 0.945 / 0.910, MEMIT Rel 0.00 / 0.80 / 0.74, reasoning 0.950 / 0.950 / 0.945; seed 2
    AlphaEdit Rel 1.00 / 1.00 / 0.92, reasoning 0.950 / 0.930 / 0.905, MEMIT Rel 1.00 / 0.70 /
    0.74, reasoning 0.950 / 0.945 / 0.945."""
    s = _memit_alphaedit(world_entry, seed)
    assert s["alphaedit"]["rows"][0]["rel"] >= 0.5, "AlphaEdit realised no edit at T = 1"
    loss = {m: s[m]["rows"][0]["reasoning_pre"] - s[m]["rows"][-1]["reasoning"] for m in s}
    print(seed, loss, [(r["n_edits"], r["rel"], r["reasoning"]) for r in s["alphaedit"]["rows"]])
    assert loss["alphaedit"] < loss["memit"]


@pytest.mark.parametrize("method", ["ft-m", "rome", "memit", "alphaedit", "retrieval"])
def test_long_sequential_run_t100_all(world_entry, method):
    """T = 1, 10, 100 and ``all`` (150 sequential edits; the world's other 10 facts are the
    locality pool). FT-M and ROME keep losing reasoning accuracy; retrieval keeps it exactly;
    MEMIT and AlphaEdit are reported (README), their direction is not asserted."""
    s = load_session(
        session_entry(
            method, seed=0, n_edits=150, eval_at=(1, 10, 100, "all"), world_entry=world_entry
        )
    )
    rows = s["rows"]
    assert [r["n_edits"] for r in rows] == [1, 10, 100, 150]
    print({r["n_edits"]: {k: round(r[k], 3) for k in ("rel", "gen", "loc", "port", "avg", "reasoning")}
           for r in rows})  # fmt: skip
    if method == "retrieval":
        assert all(r["reasoning"] == r["reasoning_pre"] for r in rows)
    elif method in ("ft-m", "rome"):
        assert rows[-1]["reasoning"] <= rows[0]["reasoning_pre"] - 0.05
    else:
        assert all(0.0 <= r["reasoning"] <= 1.0 for r in rows)


def test_generate_mode_session(world_pair, world):
    from edit_collapse.experiments import world_editor
    from edit_collapse.requests import world_requests
    from edit_collapse.session import run_edit_session

    model, tok = world_pair
    res = run_edit_session(world_editor("retrieval", world), model, tok, world_requests(world, 10), eval_at=(10,),
                           mode="generate", matcher="em")  # fmt: skip
    row = res.rows[-1]
    # report-only: measured 2026-12-01 Rel/Gen/Loc/Port in generate mode, see the README
    assert all(0.0 <= row[k] <= 1.0 for k in ("rel", "gen", "loc", "port"))
    print({k: row[k] for k in ("rel", "gen", "loc", "port")})


ENCODER_ENV = "EDIT_COLLAPSE_SENTENCE_ENCODER"


@pytest.fixture(scope="module")
def embed_session(world_entry, world):
    """The seed-0 retrieval session (T = 1 / 10 / 50) with the sentence encoder in the folder
    ``$EDIT_COLLAPSE_SENTENCE_ENCODER`` (a local sentence-transformers model, loaded offline)."""
    import os

    from edit_collapse.experiments import run_world_session

    path = os.environ.get(ENCODER_ENV)
    if not path:
        pytest.skip(f"set {ENCODER_ENV} to a local sentence-transformers folder (all-MiniLM-L6-v2)")
    pytest.importorskip("sentence_transformers")
    return run_world_session("retrieval", world_entry, world, seed=0, n_edits=50, geometry=False,
                             encoder="embed", encoder_name=path)  # fmt: skip


def test_retrieval_with_sentence_encoder(embed_session, world):
    """Retrieval with all-MiniLM-L6-v2 (seed 0, T = 1 / 10 / 50; measured 2026-12-02, 30 CPU-s):
    Rel 1.00 / 0.20 / 0.28, Average 0.625 / 0.331 / 0.319 (BM25: 1.00 / 0.60 / 0.34, 0.625 /
    0.613 / 0.396); the encoder ranks each request's own fact first for 49 of the 50 queries
    (BM25 50) and within the top 3 for all 50. Asserted (calibrated on that measurement, for
    all-MiniLM-L6-v2): Rel at T = 1 >= 0.9, the own fact in the top 3 for all 50 queries and
    first for >= 49."""
    from edit_collapse.requests import world_requests

    rows = embed_session["rows"]
    print(
        [
            {k: r[k] for k in ("n_edits", "rel", "gen", "loc", "port", "avg", "reasoning")}
            for r in rows
        ]
    )
    assert rows[0]["rel"] >= 0.9
    reqs = world_requests(world, 50, seed=0)
    mem = [r.fact() for r in reqs]
    enc = embed_session["editor"]._enc
    tops = [enc.top_k(r.prompt, mem, 3) for r in reqs]
    assert all(i in t for i, t in enumerate(tops))
    assert sum(t[0] == i for i, t in enumerate(tops)) >= 49


@pytest.mark.xfail(strict=True, reason="with a sentence encoder the world model's gate keeps "
                   "facts for reasoning prompts: reasoning 0.36 / 0.29 / 0.29 against 0.95 (measured)")  # fmt: skip
def test_retrieval_with_sentence_encoder_keeps_reasoning(embed_session):
    """The claim "retrieval keeps reasoning accuracy exactly" with all-MiniLM-L6-v2: does not
    hold on the world model (measured 2026-12-02: reasoning 0.36 / 0.29 / 0.29 at T = 1 / 10 /
    50, pre-edit 0.95). Unlike BM25, which offers no candidate to a query sharing no word with
    a fact, the encoder offers its top 3 to every query (best cosine of a reasoning prompt to a
    stored fact 0.05-0.20, of a query to its own fact 0.65-0.96), and the world model's yes/no
    gate keeps at least one of them for 186 of the 200 reasoning prompts at T = 50."""
    assert all(r["reasoning"] == r["reasoning_pre"] for r in embed_session["rows"])
