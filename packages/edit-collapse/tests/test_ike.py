"""IKE (in-context knowledge editing): the exact prompt it builds, ``k`` demonstrations, and
weights untouched.

Whether the model answers the new fact is not asserted: the world model was trained on the
retrieval baseline's context format, not on IKE's ``New Fact: ... / Prompt: ...``. Measured on
2026-12-01 (world model, 10 world edits, teacher-forced, BM25 over 20 other requests as the
pool): Rel 0.0 / 0.1 / 0.1 and Loc 0.95 / 0.425 / 0.425 for k = 0 / 4 / 16 demonstrations."""

from __future__ import annotations

import pytest
from edit_collapse.requests import EditRequest, world_requests
from edit_collapse.retrieval import IKEEditor


def _req(prompt: str, subject: str, new: str) -> EditRequest:
    return EditRequest(prompt=prompt, subject=subject, target_new=new, ground_truth="x")


def test_ike_prompt_is_demonstrations_then_fact_then_query():
    """BM25 ranks the demonstrations sharing query terms; the most similar is written last,
    right before the retrieved new fact and the query; demonstrations with no shared term are
    dropped, so fewer than ``k`` may be written."""
    pytest.importorskip("rank_bm25")
    pool = [
        _req("the capital of france is", "france", "lyon"),
        _req("the river of paris is", "paris", "loire"),
        _req("the capital city of spain is", "spain", "madrid"),
        _req("the color of grass is", "grass", "green"),
        _req("the mayor of oslo is", "oslo", "bob"),
        _req("the language of peru is", "peru", "quechua"),
    ]
    ed = IKEEditor(k=3, pool=pool, encoder="bm25")
    ed.apply(None, None, [_req("the capital of spain is", "spain", "seville"),
                          _req("the river of rome is", "rome", "tiber"),
                          _req("the color of sky is", "sky", "blue")])  # fmt: skip
    got = ed.transform(None, None, "the capital of spain is")
    assert got == (
        "New Fact: the capital of france is lyon\nPrompt: the capital of france is lyon"
        "\n\n"
        "New Fact: the capital city of spain is madrid\nPrompt: the capital city of spain is madrid"
        "\n\n"
        "New Fact: the capital of spain is seville"
        "\n\n"
        "Prompt: the capital of spain is"
    )
    # no edit stored: the query goes through unchanged
    assert IKEEditor(k=2, pool=pool, encoder="bm25").transform(None, None, "q") == "q"


def test_bm25_retrieves_from_a_one_fact_memory():
    """BM25 gives every term of a one- or two-fact memory idf <= 0: there, the facts sharing a
    query term are the candidates (most shared first), so the first edits are retrievable."""
    pytest.importorskip("rank_bm25")
    from edit_collapse.retrieval import RetrievalEditor

    ed = RetrievalEditor(encoder="bm25", gate="none")
    ed.apply(None, None, [_req("the capital of spain is", "spain", "seville")])
    assert ed.retrieve(None, None, "the capital of spain is") == ["the capital of spain is seville"]
    ed.apply(None, None, [_req("the capital of france is", "france", "lyon")])
    got = ed.retrieve(None, None, "the capital of france is")
    assert got[0] == "the capital of france is lyon"
    assert ed.retrieve(None, None, "the river of egypt is") == []


@pytest.mark.parametrize("k", [16, 3])
def test_ike_respects_k_and_leaves_weights(k, world_pair, world):
    """With a 20-request pool, exactly ``k`` demonstrations (default 16) plus the new fact precede
    the query; applying, generating through the wrapper and restoring leave the weights'
    digest unchanged and the memory empty."""
    import torch
    from edit_collapse import core

    from llmcore.zoo import weights_digest

    model, tok = world_pair
    before = weights_digest(model)
    reqs = world_requests(world, 22, seed=3)
    ed = (
        IKEEditor(pool=reqs[2:], encoder="hidden")
        if k == 16
        else IKEEditor(k=k, pool=reqs[2:], encoder="hidden")
    )
    assert ed.k_demos == k
    h = ed.apply(model, tok, reqs[:2])
    prompt = ed.transform(model, tok, reqs[0].prompt)
    blocks = prompt.split("\n\n")
    assert len(blocks) == k + 2 and blocks[-1] == f"Prompt: {reqs[0].prompt}"
    assert blocks[-2].startswith("New Fact: ") and blocks[-2][len("New Fact: ") :] in ed.memory
    assert all(b in ed.pool for b in blocks[:k]) and len(set(blocks[:k])) == k
    gen = ed.wrap(model, tok)
    ids = torch.tensor([core.encode(tok, reqs[0].prompt)])
    out = gen.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=2, do_sample=False
    )
    assert out.shape[1] == ids.shape[1] + 2 and torch.equal(out[0, : ids.shape[1]], ids[0])
    assert weights_digest(model) == before
    h.restore()
    assert ed.memory == [] and weights_digest(model) == before
