"""Bad input gets clear errors naming the value and the fix."""

from __future__ import annotations

import logging

import pytest
import torch
from conftest import make_model
from sink_probe.errors import (
    AttentionMapsUnavailable,
    SinkProbeConfigError,
    SinkProbeInputError,
    UnsupportedArchitecture,
)
from sink_probe.intervene import intervene
from sink_probe.metrics import check_sink_set, detect_massive, sink_rate
from sink_probe.patch import InterventionConfig, patch_model
from sink_probe.probe import check_bos, probe


def test_non_eager_model_says_how_to_reload(stream_tok, stream_texts_small):
    model = make_model(attn="sdpa")
    with pytest.raises(AttentionMapsUnavailable, match="attn_implementation='eager'"):
        probe(model, stream_tok, stream_texts_small, T=16)
    with pytest.raises(AttentionMapsUnavailable, match="eager"):
        probe(model, stream_tok, stream_texts_small, T=16, stream=False)
    # the chunked kernel needs no eager maps from the model
    rep = probe(model, stream_tok, stream_texts_small[:2], T=16, chunk_above=8, query_chunk=4)
    assert rep.n_sequences == 2


def test_unsupported_architecture_lists_supported_classes(stream_tok, stream_texts_small):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=300)).eval()
    with pytest.raises(UnsupportedArchitecture, match="LlamaForCausalLM"):
        probe(gpt2, stream_tok, stream_texts_small, T=16)
    with pytest.raises(UnsupportedArchitecture, match="Qwen2ForCausalLM"):
        patch_model(gpt2, InterventionConfig(zero_sink_value=True))


def test_short_texts_are_skipped_and_all_short_is_an_error(stream_tok, stream_texts_small, caplog):
    with caplog.at_level(logging.WARNING):
        rep = probe(make_model(), stream_tok, [*stream_texts_small[:3], "f1 f2"], T=32)
    assert rep.n_skipped == 1 and rep.n_sequences == 3 and "skipped 1 of 4" in caplog.text
    with pytest.raises(SinkProbeInputError, match="shorter than T=32"):
        probe(make_model(), stream_tok, ["f1 f2", "f3"], T=32)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"T": 1}, "T must be an integer >= 2"),
        ({"sink_set": (40,)}, r"sink_set \(40,\) must hold distinct positions in \[0, 32\)"),
        ({"sink_set": (-1,)}, "distinct positions"),
        ({"eps": 1.5}, r"eps must be in \(0, 1\)"),
        ({"eps": 0.0}, "eps must be"),
        ({"tau_ratio": 1.0}, "tau_ratio must be a finite number > 1"),
        ({"metrics": ("sinks",)}, "unknown metrics"),
        ({"layers": [5]}, "out of range"),
    ],
)
def test_bad_parameters(kw, match, stream_tok, stream_texts_small):
    args = {"T": 32, **kw}
    with pytest.raises(SinkProbeConfigError, match=match):
        probe(make_model(), stream_tok, stream_texts_small[:2], **args)


def test_pure_functions_validate_too():
    with pytest.raises(SinkProbeConfigError, match="eps"):
        sink_rate(torch.ones(1, 1, 1, 4, 4) / 4, eps=-0.1)
    with pytest.raises(SinkProbeConfigError, match="tau_ratio"):
        detect_massive(torch.ones(2, 4, 4), tau_ratio=0.5)
    with pytest.raises(SinkProbeConfigError, match="no query after the sinks"):
        check_sink_set((3,), 4)


def test_conflicting_intervention_options():
    model = make_model()
    with (
        pytest.raises(SinkProbeConfigError, match="choose one"),
        intervene(model, drop_sink_attention=True, scale_sink_logits=2.0),
    ):
        pass
    with (
        pytest.raises(SinkProbeConfigError, match="needs massive_means"),
        intervene(model, massive="set_mean"),
    ):
        pass
    with (
        pytest.raises(SinkProbeConfigError, match="only used with massive='set_mean'"),
        intervene(model, massive="set_zero", massive_means={0: {(0, 1): 1.0}}),
    ):
        pass
    with pytest.raises(SinkProbeConfigError, match="suppress_massive"):
        InterventionConfig(suppress_massive=0)
    with pytest.raises(SinkProbeConfigError, match="already patched"):
        patch_model(patch_model(make_model(), InterventionConfig(gate=True)), InterventionConfig())


def test_moving_sink_set_warns_and_require_bos_errors(caplog):
    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer(["a", "b"])
    tok.bos_token = None
    with caplog.at_level(logging.WARNING):
        check_bos(tok)
    assert "moving sink set" in caplog.text
    with pytest.raises(SinkProbeInputError, match="--require-bos"):
        check_bos(tok, require_bos=True)


def test_non_finite_values_name_layer_and_head(stream_tok, stream_texts_small):
    model = make_model()
    with torch.no_grad():
        model.model.layers[1].self_attn.q_proj.weight[8:16] = float("nan")  # head 1
    with pytest.raises(SinkProbeInputError, match="layer 1, head 1"):
        probe(model, stream_tok, stream_texts_small[:2], T=16)


def test_bench_train_throughput_rejects_bad_step_counts():
    from sink_probe.bench import train_throughput
    from sink_probe.errors import SinkProbeConfigError

    with pytest.raises(SinkProbeConfigError, match="steps >= 1"):
        train_throughput(steps=0)


def test_variant_recipe_rejects_negative_weight_decay():
    from sink_probe.variants import VariantSpec, variant_recipe

    with pytest.raises(SinkProbeConfigError, match="weight_decay must be >= 0"):
        variant_recipe("baseline", VariantSpec(weight_decay=-0.1))
