"""Bad input gives clear errors from the via-sd hierarchy."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import make_llama
from via_sd import (
    PromptLookupDrafter,
    SlimVerifier,
    ViaSDConfig,
    autoregressive_generate,
    load_mask,
    speculative_generate,
)
from via_sd.errors import (
    NonFiniteLogitsError,
    UnsupportedModelError,
    ViaSDConfigError,
    ViaSDError,
    ViaSDInputError,
)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"gamma": 0}, "gamma"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"tau_accept": 0.5, "tau_escalate": 0.7}, "tau_escalate"),
        ({"tau_escalate": -0.1}, "tau_escalate"),
    ],
)
def test_config_errors(kw, match):
    with pytest.raises(ViaSDConfigError, match=match):
        ViaSDConfig(**kw)


def test_alphas():
    c = ViaSDConfig.from_alphas(0.5, 0.3)
    assert (c.tau_accept, c.tau_escalate) == pytest.approx((0.7, 0.5))
    with pytest.raises(ViaSDConfigError, match="alpha1"):
        ViaSDConfig.from_alphas(1.0, 0.3)
    with pytest.raises(ViaSDConfigError, match="alpha2"):
        ViaSDConfig.from_alphas(0.5, -0.1)
    assert ViaSDConfig.from_kwargs(num_assistant_tokens=7).gamma == 7
    with pytest.raises(ViaSDConfigError, match="unknown option"):
        ViaSDConfig.from_kwargs(gama=3)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"skip_layers": [6]}, "outside"),
        ({"skip_layers": [-1]}, "outside"),
        ({"skip_layers": [2, 2]}, "duplicate"),
        ({"skip_layers": [0, 1, 2, 3, 4, 5], "keep_first_last": False}, "every layer"),
        ({"skip_layers": [5]}, "first or last"),
        ({"skip_layers": [0]}, "first or last"),
        ({"skip_ratio": 1.0}, "skip_ratio"),
        ({"skip_ratio": -0.1}, "skip_ratio"),
    ],
)
def test_bad_masks(rand_pair, kw, match):
    q, _ = rand_pair
    with pytest.raises(ViaSDConfigError, match=match):
        SlimVerifier(q, **kw)


def test_mask_file_layer_count(rand_pair, tmp_path):
    q, _ = rand_pair
    f = tmp_path / "mask.json"
    f.write_text(json.dumps({"num_layers": 8, "skip_layers": [2, 3]}))
    with pytest.raises(ViaSDConfigError, match="8-layer"):
        load_mask(f, q)
    f.write_text(json.dumps({"num_layers": 6, "skip_layers": [2, 3]}))
    assert load_mask(f, q).skip_layers == [2, 3]
    with pytest.raises(ViaSDInputError, match="does not exist"):
        load_mask(tmp_path / "nope.json", q)


def test_input_errors(rand_pair):
    q, p = rand_pair
    c = ViaSDConfig(max_new_tokens=4)
    with pytest.raises(UnsupportedModelError, match="batch size"):
        autoregressive_generate(q, torch.ones(2, 3, dtype=torch.long), c)
    with pytest.raises(ViaSDInputError, match="empty"):
        speculative_generate(q, p, [], c)
    with pytest.raises(ViaSDConfigError, match="greedy"):
        speculative_generate(q, PromptLookupDrafter(2), [1, 2, 3], ViaSDConfig(temperature=1.0))
    with pytest.raises(TypeError):
        speculative_generate(q, "not a model", [1, 2], c)


def test_drafter_vocab_and_special_tokens(rand_pair):
    q, _ = rand_pair
    with pytest.raises(ViaSDInputError, match="vocab_size"):
        speculative_generate(q, make_llama(2, 32, vocab=64), [1, 2], ViaSDConfig())
    with pytest.raises(ViaSDInputError, match="eos_token_id"):
        speculative_generate(q, make_llama(2, 32, eos=3), [1, 2], ViaSDConfig())


def test_device_dtype_mismatch(rand_pair):
    q, _ = rand_pair
    d = make_llama(2, 32).to(torch.float64)
    with pytest.raises(ViaSDInputError, match="dtype"):
        speculative_generate(q, d, [1, 2], ViaSDConfig())


def test_encoder_decoder_and_unknown_layout():
    from transformers import T5Config, T5ForConditionalGeneration

    t5 = T5ForConditionalGeneration(
        T5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)
    )
    with pytest.raises(NotImplementedError, match="decoder-only"):
        autoregressive_generate(t5, [1, 2], ViaSDConfig())
    with pytest.raises(UnsupportedModelError, match="decoder layers"):
        SlimVerifier(torch.nn.Linear(2, 2))


def test_nan_logits():
    bad = make_llama(2, 32)
    with torch.no_grad():
        bad.lm_head.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteLogitsError, match=r"target model .* position"):
        autoregressive_generate(bad, [1, 2], ViaSDConfig(max_new_tokens=2))
    assert issubclass(NonFiniteLogitsError, FloatingPointError)
    assert issubclass(NonFiniteLogitsError, ViaSDError)
