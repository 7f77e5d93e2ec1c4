"""Bad input gets clear errors naming the value and the fix."""

from __future__ import annotations

import math

import pytest
import torch
from excess_dl import EDLConfig, compute_edl
from excess_dl.errors import EDLConfigError, EDLInputError, NumericalError


def test_empty_sets(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    with pytest.raises(EDLInputError, match="train set is empty"):
        compute_edl(model, [], test, EDLConfig(), tok)
    with pytest.raises(EDLInputError, match="test set is empty"):
        compute_edl(model, train, [], EDLConfig(), tok)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"checkpoints": [4, 2]}, "strictly increasing"),
        ({"checkpoints": [0, 2]}, "positive"),
        ({"block_fractions": [0.5, 0.9]}, "end at 1.0"),
        ({"block_fractions": [0.5, 0.25, 1.0]}, "strictly increasing"),
        ({"block_fractions": [0.0, 1.0]}, r"\(0, 1\]"),
        ({"lora": {"r": 0}}, "r must be >= 1"),
        ({"lora": {"rank": 2}}, "unknown lora option"),
        ({"mode": "offline"}, "mode='offline'"),
        ({"lr": -1.0}, "lr must be > 0"),
    ],
)
def test_bad_config(kw, match):
    with pytest.raises(EDLConfigError, match=match):
        EDLConfig(**kw)


def test_checkpoints_beyond_n(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    with pytest.raises(EDLConfigError, match="beyond the 8 training examples"):
        compute_edl(model, train, test, EDLConfig(checkpoints=[4, 16]), tok)
    with pytest.raises(EDLConfigError, match="fewer than the 9 requested checkpoints"):
        compute_edl(model, train, test, EDLConfig(checkpoints=list(range(1, 10))), tok)


def test_bad_rows(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    with pytest.raises(EDLInputError, match="example 1 has an empty completion"):
        compute_edl(model, [train[0], {"prompt": "a =", "completion": ""}], test, EDLConfig(), tok)
    with pytest.raises(EDLInputError, match="example 1: completion ' ' tokenizes to 0 tokens"):
        compute_edl(model, [train[0], {"prompt": "a =", "completion": " "}], test, EDLConfig(), tok)
    with pytest.raises(EDLInputError, match="only 'text'"):
        compute_edl(model, [{"text": "a b c"}], test, EDLConfig(), tok)
    with pytest.raises(EDLInputError, match="has no completion"):
        compute_edl(model, [{"prompt": "a"}], test, EDLConfig(), tok)
    with pytest.raises(EDLInputError, match="longer than the model's context"):
        compute_edl(model, [{"prompt": "a " * 40, "completion": "b ."}], test, EDLConfig(), tok)


def test_overlap(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    with pytest.raises(EDLInputError, match="also occur in the training set"):
        compute_edl(model, train, train[:4] + test, EDLConfig(), tok)
    compute_edl(model, train, train, EDLConfig(allow_overlap=True, accuracy=False), tok)


def test_tokenizer_mismatch(tiny, small_data):
    from llmcore import zoo

    model, _ = tiny
    train, test = small_data
    big = zoo.word_tokenizer([f"w{i}" for i in range(200)])
    with pytest.raises(EDLInputError, match="tokenizer/model mismatch"):
        compute_edl(model, train, test, EDLConfig(), big)


def test_lora_targets_and_k(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    cfg = EDLConfig(method="lora", lora={"target_modules": ["nope_proj"]})
    with pytest.raises(EDLConfigError, match="matches no module"):
        compute_edl(model, train, test, cfg, tok)
    n = sum(p.numel() for p in model.parameters())
    with pytest.raises(EDLConfigError, match=f"exceeds the model's {n} parameters"):
        compute_edl(
            model, train, test, EDLConfig(method="random_params", random_params_k=n + 1), tok
        )


def test_non_finite_loss_names_n_and_method(tiny, small_data):
    import copy

    model, tok = tiny
    train, test = small_data
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.lm_head.weight.fill_(math.inf)
    with pytest.raises(NumericalError, match=r"n=\d+ \(method full\)"):
        compute_edl(broken, train, test, EDLConfig(), tok)


def test_prompt_blockwise_warns(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    with pytest.warns(UserWarning, match="trains nothing"):
        compute_edl(
            model, train, test, EDLConfig(mode="blockwise", method="prompt", accuracy=False), tok
        )
