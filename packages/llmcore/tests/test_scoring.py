"""Tests of llmcore.metrics.completion_logprobs and the backends' ``score``.

A tiny random Llama (and GPT-2) built in code; the reference is the model run on each
``bos + prompt + completion`` sequence alone, without padding.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from llmcore.errors import BackendError, ConfigError
from llmcore.generation import HFBackend
from llmcore.generation.vllm_backend import logprobs_from_prompt_output
from llmcore.metrics import completion_logprobs, completion_token_ids

PAIRS = [
    ("the cat sat on", " the mat."),
    ("a dog", " ran to the big red tree and the cat sat on a mat."),
    ("", "the cat"),  # empty prompt: the first token is conditioned on BOS alone
    ("big red house and the small blue tree by the river", " ran"),
    ("ran", " to"),
    ("the", " dog sat"),
]


@pytest.fixture(scope="module")
def tokenizer():
    from tinymodels import toy_tokenizer

    return toy_tokenizer()


def llama(tokenizer):
    from tinymodels import random_llama

    return random_llama(tokenizer, initializer_range=0.2)


def gpt2(tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=32, n_layer=2, n_head=4)
    return GPT2LMHeadModel(config).eval()


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request, tokenizer):
    return {"llama": llama, "gpt2": gpt2}[request.param](tokenizer)


def reference(model, tokenizer, prompt: str, completion: str, bos: bool = True) -> torch.Tensor:
    """Unbatched, unpadded: run the model on bos + prompt + completion and read the completion."""
    ctx = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    tgt = tokenizer(completion, add_special_tokens=False)["input_ids"]
    ids = ([tokenizer.bos_token_id] if bos else []) + ctx + tgt
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    start = len(ids) - len(tgt)
    return torch.stack([lp[start - 1 + t, tok] for t, tok in enumerate(tgt)])


@pytest.mark.parametrize("padding_side", ["left", "right"])
@pytest.mark.parametrize("batch_size", [1, 4, 16])
def test_batched_equals_unbatched_loop(model, tokenizer, padding_side, batch_size) -> None:
    tokenizer.padding_side = padding_side
    got = completion_logprobs(model, tokenizer, PAIRS, batch_size=batch_size)
    assert len(got) == len(PAIRS)
    for (prompt, completion), lp in zip(PAIRS, got, strict=True):
        want = reference(model, tokenizer, prompt, completion)
        assert lp.dtype == torch.float32 and lp.ndim == 1
        assert lp.shape == want.shape == (len(tokenizer(completion)["input_ids"]),)
        torch.testing.assert_close(lp, want, atol=1e-5, rtol=0)
        assert bool((lp <= 0).all())


def test_reductions_and_order(tokenizer) -> None:
    model = llama(tokenizer)
    per_token = completion_logprobs(model, tokenizer, PAIRS, batch_size=3)
    sums = completion_logprobs(model, tokenizer, PAIRS, batch_size=3, reduce="sum")
    means = completion_logprobs(model, tokenizer, PAIRS, batch_size=3, reduce="mean")
    assert sums == pytest.approx([float(t.sum()) for t in per_token], abs=1e-5)
    assert means == pytest.approx([float(t.mean()) for t in per_token], abs=1e-5)
    # Reversed input: reversed output (length bucketing restores the caller's order).
    rev = completion_logprobs(model, tokenizer, PAIRS[::-1], batch_size=3, reduce="sum")
    assert rev == pytest.approx(sums[::-1], abs=1e-5)
    assert completion_logprobs(model, tokenizer, []) == []


def test_bos_rule(tokenizer) -> None:
    bos = tokenizer.bos_token_id
    (ctx, tgt), (ctx0, _) = completion_token_ids(tokenizer, [("the cat", " sat"), ("", "a")])
    assert ctx == [bos, *tokenizer("the cat", add_special_tokens=False)["input_ids"]]
    assert tgt == tokenizer(" sat", add_special_tokens=False)["input_ids"]
    assert ctx0 == [bos]
    # A prompt that already spells out the BOS does not get a second one.
    ((ctx_b, _),) = completion_token_ids(tokenizer, [(tokenizer.bos_token + "the cat", " sat")])
    assert ctx_b == ctx
    ((ctx_f, _),) = completion_token_ids(tokenizer, [("the cat", " sat")], add_bos=False)
    assert ctx_f == ctx[1:]
    model = llama(tokenizer)
    no_bos = completion_logprobs(model, tokenizer, [("the cat", " sat")], add_bos=False)[0]
    torch.testing.assert_close(
        no_bos, reference(model, tokenizer, "the cat", " sat", bos=False), atol=1e-5, rtol=0
    )
    with_bos = completion_logprobs(model, tokenizer, [("the cat", " sat")])[0]
    assert not torch.allclose(no_bos, with_bos)


def test_errors(tokenizer) -> None:
    model = llama(tokenizer)
    with pytest.raises(ConfigError, match="empty completion"):
        completion_logprobs(model, tokenizer, [("the cat", " sat"), ("a dog", "")])
    with pytest.raises(ConfigError, match="empty prompt"):
        completion_logprobs(model, tokenizer, [("", "the cat")], add_bos=False)
    with pytest.raises(ConfigError, match="reduce"):
        completion_logprobs(model, tokenizer, PAIRS, reduce="max")
    with pytest.raises(ConfigError, match="batch_size"):
        completion_logprobs(model, tokenizer, PAIRS, batch_size=0)
    with pytest.raises(ConfigError, match="one pair"):
        completion_logprobs(model, tokenizer, ("the cat", " sat"))
    tokenizer_without_bos = SimpleNamespace(bos_token_id=None)
    with pytest.raises(ConfigError, match="no bos_token_id"):
        completion_token_ids(tokenizer_without_bos, [("a", "b")], add_bos=True)


def test_model_left_in_training_mode_is_restored(tokenizer) -> None:
    model = llama(tokenizer).train()
    completion_logprobs(model, tokenizer, PAIRS[:2])
    assert model.training


# ---------------------------------------------------------------- backends' score


def test_hf_backend_score_matches_reference(tokenizer) -> None:
    model = llama(tokenizer)
    backend = HFBackend(model, tokenizer, batch_size=4, device="cpu", progress=False)
    got = backend.score(PAIRS)
    assert all(isinstance(row, list) for row in got)
    for (prompt, completion), row in zip(PAIRS, got, strict=True):
        want = reference(model, tokenizer, prompt, completion)
        assert row == pytest.approx(want.tolist(), abs=1e-5)
    assert backend.score([]) == []


def test_vllm_prompt_logprobs_helper() -> None:
    # Shaped like vllm.RequestOutput.prompt_logprobs: None first, then {token_id: Logprob}
    # holding the prompt token (and, with prompt_logprobs=k > 0, k alternatives).
    ctx, tgt = [1, 7, 8], [9, 4]
    entries = [None] + [
        {t: SimpleNamespace(logprob=-0.1 * t), 99: SimpleNamespace(logprob=-9.0)}
        for t in ctx[1:] + tgt
    ]
    out = SimpleNamespace(prompt_logprobs=entries)
    assert logprobs_from_prompt_output(out, len(ctx), tgt) == pytest.approx([-0.9, -0.4])
    with pytest.raises(BackendError, match="no prompt_logprobs"):
        logprobs_from_prompt_output(SimpleNamespace(prompt_logprobs=None), 3, tgt)
    with pytest.raises(BackendError, match="4 prompt log-probs"):
        logprobs_from_prompt_output(SimpleNamespace(prompt_logprobs=entries[:4]), 3, tgt)
    entries[-1] = {5: SimpleNamespace(logprob=-1.0)}
    with pytest.raises(BackendError, match="lack the prompt token 4"):
        logprobs_from_prompt_output(out, len(ctx), tgt)


def test_openai_backend_cannot_score() -> None:
    pytest.importorskip("openai")
    from llmcore.generation import OpenAIBackend

    backend = OpenAIBackend("http://127.0.0.1:9/v1", "m")
    with pytest.raises(BackendError, match="cannot score"):
        backend.score([("a", "b")])
