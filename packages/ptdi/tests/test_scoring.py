"""Membership scores: closed forms on hand-built logits, agreement with llmcore's scorer,
batching invariance, the backend path and its Min-K%++ refusal."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch
from ptdi.errors import PTDIConfigError, PTDIInputError, UnsupportedBackendError
from ptdi.scoring import BackendScorer, MembershipScorer, score_logits

TEXTS = [
    "w1 w2 w3 w4 w5 w6",
    "w7 w7 w7",
    "w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20 w21",
    "w3 w9",
    "w30 w31 w32 w33 w34 w35 w36 w37",
]


def _log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    return (
        x
        - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - x.max(-1, keepdims=True)
    )


def test_closed_form_scores_on_hand_built_logits():
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.0, 9.0]])
    ids = [0, 2, 1, 0]  # logits at t predict ids[t + 1]; the last row is unused
    text = "abc def"
    lsm = _log_softmax(logits[:3])
    lp = np.array([lsm[0, 2], lsm[1, 1], lsm[2, 0]])
    p = np.exp(lsm)
    mu = (p * lsm).sum(-1)
    sd = np.sqrt(np.maximum((p * lsm**2).sum(-1) - mu**2, 1e-6))
    zt = (lp - mu) / sd
    s = score_logits(logits, ids, text, k=0.5)
    assert math.isclose(s["loss"], lp.mean(), rel_tol=1e-6)
    assert math.isclose(s["zlib"], lp.mean() / len(zlib.compress(text.encode())), rel_tol=1e-6)
    assert math.isclose(s["mink"], np.sort(lp)[:1].mean(), rel_tol=1e-6)  # floor(0.5*3) = 1
    assert math.isclose(s["minkpp"], np.sort(zt)[:1].mean(), rel_tol=1e-5)
    s1 = score_logits(logits, ids, text, k=1.0)
    assert math.isclose(s1["mink"], s1["loss"], rel_tol=1e-9)
    assert math.isclose(s1["minkpp"], zt.mean(), rel_tol=1e-5)
    # uniform next-token distribution: sigma is clamped, not zero
    flat = score_logits(np.zeros((3, 4)), [0, 1, 2], "x y", k=1.0)
    assert math.isfinite(flat["minkpp"])


def test_token_logprobs_equal_llmcore_and_batching(tiny_pair):
    from llmcore.metrics import completion_logprobs

    model, tok = tiny_pair
    sc = MembershipScorer(model, tok, batch_size=2)
    ours = sc.token_logprobs(TEXTS)
    ref = completion_logprobs(model, tok, [("", t) for t in TEXTS])
    for a, b in zip(ours, ref, strict=True):
        assert np.allclose(a, b.numpy(), atol=1e-5)
    all1 = MembershipScorer(model, tok, batch_size=1, vocab_chunk=2).score(TEXTS)
    all5 = MembershipScorer(model, tok, batch_size=5).score(TEXTS)
    for k in all1:
        assert np.allclose(all1[k], all5[k], atol=1e-5), k


def test_scorer_scores_match_token_formulas(tiny_pair):
    model, tok = tiny_pair
    sc = MembershipScorer(model, tok, scores=("loss", "zlib", "mink", "lowercase"), k=0.2)
    out = sc.score(TEXTS)
    lps = sc.token_logprobs(TEXTS)
    for i, (t, lp) in enumerate(zip(TEXTS, lps, strict=True)):
        assert math.isclose(out["loss"][i], lp.mean(), rel_tol=1e-6)
        kk = max(1, int(0.2 * lp.size))
        assert math.isclose(out["mink"][i], np.sort(lp)[:kk].mean(), rel_tol=1e-6)
        assert math.isclose(
            out["zlib"][i], lp.mean() / len(zlib.compress(t.encode())), rel_tol=1e-6
        )
        assert math.isclose(out["lowercase"][i], 1.0, rel_tol=1e-6)  # texts already lowercase
    k1 = MembershipScorer(model, tok, k=1.0, scores=("mink", "loss")).score(TEXTS)
    assert np.array_equal(k1["mink"], k1["loss"])


def test_reference_score(tiny_pair):
    from conftest import make_llama

    model, tok = tiny_pair
    other = make_llama(vocab=len(tok), seed=5)
    sc = MembershipScorer(model, tok, scores=("loss", "ref"), reference_model=other)
    out = sc.score(TEXTS)
    ref_loss = MembershipScorer(other, tok, scores=("loss",)).score(TEXTS)["loss"]
    assert np.allclose(out["ref"], out["loss"] - ref_loss)  # NLL_ref - NLL_target
    with pytest.raises(PTDIConfigError, match="reference model"):
        MembershipScorer(model, tok, scores=("ref",))


def test_backend_scorer_equals_hf_and_refuses_minkpp(tiny_pair):
    from llmcore.generation import HFBackend
    from llmcore.generation.vllm_backend import VLLMBackend

    model, tok = tiny_pair
    backend = HFBackend(model, tok, device="cpu", progress=False)
    via = BackendScorer(backend, scores=("loss", "zlib", "mink")).score(TEXTS)
    direct = MembershipScorer(model, tok, scores=("loss", "zlib", "mink")).score(TEXTS)
    for k in via:
        assert np.allclose(via[k], direct[k], atol=1e-5)
    # Min-K%++ needs the full next-token distribution: refused before any engine is touched
    engine_free = VLLMBackend.__new__(VLLMBackend)
    with pytest.raises(UnsupportedBackendError, match="Min-K%\\+\\+"):
        BackendScorer(engine_free, scores=("loss", "minkpp"))
    assert callable(VLLMBackend.score)


def test_scorer_bad_inputs(tiny_pair):
    model, tok = tiny_pair
    with pytest.raises(PTDIInputError, match=r"ids \['b'\]"):
        MembershipScorer(model, tok).score(["w1 w2 w3", "w4"], ids=["a", "b"])
    for k in (0.0, 1.5, float("nan")):
        with pytest.raises(PTDIConfigError, match="k must lie"):
            MembershipScorer(model, tok, k=k)
    with pytest.raises(PTDIConfigError, match="unknown score"):
        MembershipScorer(model, tok, scores=("perplexity",))
    from conftest import make_llama

    small = make_llama(vocab=8)
    with pytest.raises(PTDIInputError, match="vocabulary"):
        MembershipScorer(small, tok).score(TEXTS)
    torch.manual_seed(0)


def test_streamed_projection_equals_full_logits():
    """The online (vocabulary-blocked) log-sum-exp and moments equal a float64 log-softmax of
    the full logits, for blocks that do and do not divide the vocabulary."""
    from ptdi.scoring import row_stats, streamed_stats

    g = torch.Generator().manual_seed(0)
    h, w = torch.randn(37, 16, generator=g), torch.randn(101, 16, generator=g)
    b, tgt = torch.randn(101, generator=g), torch.randint(0, 101, (37,), generator=g)
    lsm = torch.nn.functional.linear(h, w, b).double().log_softmax(-1)
    p = lsm.exp()
    lp = lsm.gather(1, tgt[:, None])[:, 0]
    mu = (p * lsm).sum(-1)
    z = (lp - mu) / ((p * (lsm - mu[:, None]) ** 2).sum(-1)).clamp_min(1e-6).sqrt()
    for block in (1, 7, 50, 101, 4096):
        a, za = streamed_stats(h, w, b, tgt, want_stats=True, vocab_chunk=block)
        a2, none = streamed_stats(h, w, b, tgt, want_stats=False, vocab_chunk=block)
        assert none is None
        assert torch.allclose(a.double(), lp, atol=1e-5) and torch.allclose(a2, a, atol=1e-6)
        assert torch.allclose(za.double(), z, atol=1e-4)
    r, zr = row_stats(torch.nn.functional.linear(h, w, b), tgt, want_stats=True)
    assert torch.allclose(r.double(), lp, atol=1e-5) and torch.allclose(zr.double(), z, atol=1e-4)


def test_fallback_to_model_logits_gives_the_same_scores(tiny_pair):
    """A config with logit scaling makes the scorer use the model's own logits; on a Llama
    (which ignores that field) both paths agree, and the output head is left untouched."""
    from ptdi.scoring import plain_output_head

    model, tok = tiny_pair
    head = plain_output_head(model)
    assert head is not None
    fast = MembershipScorer(model, tok, row_chunk=3, vocab_chunk=7).score(TEXTS)
    assert "forward" not in head.__dict__
    model.config.final_logit_softcapping = 30.0
    try:
        assert plain_output_head(model) is None
        slow = MembershipScorer(model, tok, row_chunk=3).score(TEXTS)
    finally:
        model.config.final_logit_softcapping = None
    for k in fast:
        assert np.allclose(fast[k], slow[k], atol=1e-5), k
