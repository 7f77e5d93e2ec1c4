"""The learned key/value bias slot (``kv_bias``, ``k_bias_only``): exactness, save/load, errors."""

from __future__ import annotations

import pytest
import torch
from conftest import make_model
from sink_probe import kv_bias
from sink_probe.errors import SinkProbeConfigError
from sink_probe.kv_bias import InterventionConfig, attend_with_bias, config_of, patch_model

IDS = torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(0))


def test_conflicting_bias_flags_raise():
    with pytest.raises(SinkProbeConfigError, match="kv_bias=True and k_bias_only=True"):
        InterventionConfig(kv_bias=True, k_bias_only=True)


def test_flags_off_keep_the_config_form_of_the_other_variants():
    from sink_probe import patch

    cfg = InterventionConfig(zero_sink_value=True, suppress_massive=10.0)
    assert cfg.to_dict() == patch.InterventionConfig(**cfg.base().__dict__).to_dict()
    assert InterventionConfig(kv_bias=True).to_dict()["kv_bias"] is True


def test_attend_with_bias_equals_concatenated_slot_reference():
    """The slot is one extra key/value column that every query sees (Sun et al. 2024)."""
    g = torch.Generator().manual_seed(1)
    N, H, T, dh = 2, 3, 7, 4
    q, k, v = (torch.randn(N, H, T, dh, generator=g) for _ in range(3))
    kb, vb = torch.randn(H, dh, generator=g), torch.randn(H, dh, generator=g)
    s = dh**-0.5
    out, pt, pb = attend_with_bias(q, k, v, None, s, (q * kb[None, :, None]).sum(-1, True) * s, vb)
    kk = torch.cat([kb[None, :, None].expand(N, H, 1, dh), k], 2)
    vv = torch.cat([vb[None, :, None].expand(N, H, 1, dh), v], 2)
    sc = q @ kk.transpose(2, 3) * s
    causal = torch.ones(T, T).tril().bool()
    visible = torch.cat([torch.ones(T, 1, dtype=torch.bool), causal], 1)
    p = sc.masked_fill(~visible, float("-inf")).softmax(-1)
    assert torch.allclose(out, (p @ vv).transpose(1, 2), atol=1e-6)
    assert torch.allclose(torch.cat([pb, pt], -1), p, atol=1e-6)
    # additive HF mask gives the same result
    add = torch.zeros(N, 1, T, T).masked_fill(~causal, torch.finfo(torch.float32).min)
    out2, *_ = attend_with_bias(q, k, v, add, s, (q * kb[None, :, None]).sum(-1, True) * s, vb)
    assert torch.allclose(out, out2, atol=1e-6)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("flag", ["kv_bias", "k_bias_only"])
def test_slot_at_minus_inf_equals_unpatched(arch, flag, monkeypatch):
    ref = make_model(arch, kv_heads=2)
    model = patch_model(make_model(arch, kv_heads=2), InterventionConfig(**{flag: True}), seed=4)
    with torch.no_grad():
        base = ref(input_ids=IDS).logits
        on = model(input_ids=IDS).logits
        monkeypatch.setattr(
            kv_bias, "_bias_logits", lambda attn, q: torch.full((*q.shape[:-1], 1), -torch.inf)
        )
        off = model(input_ids=IDS).logits
    assert (on - base).abs().max() > 1e-4  # the slot is live at initialisation
    assert torch.allclose(off, base, atol=1e-5)


def test_k_bias_only_slot_has_zero_value_and_absorbs_mass():
    """With ``v' = 0`` each head's pre-``W_O`` output is the unpatched one times ``1 - p'_i``
    (one factor per head and query, in (0, 1))."""
    ref = make_model(layers=1)
    model = patch_model(make_model(layers=1), InterventionConfig(k_bias_only=True), seed=2)
    assert model.model.layers[0].self_attn.sink_v_bias is None
    assert not any("sink_v_bias" in k for k in model.state_dict())
    seen = []

    def grab(mod, args):
        seen.append(args[0].view(*args[0].shape[:-1], 4, -1))

    for m in (ref, model):
        h = m.model.layers[0].self_attn.o_proj.register_forward_pre_hook(grab)
        with torch.no_grad():
            out = m(input_ids=IDS, output_attentions=True)
        h.remove()
    plain, patched = seen
    factor = (patched * plain).sum(-1, keepdim=True) / (plain * plain).sum(-1, keepdim=True)
    assert torch.allclose(patched, factor * plain, atol=1e-6)
    assert bool((factor > 0).all() and (factor < 1).all())
    # the slot's weight is folded into the sink column: rows still sum to 1
    w = out.attentions[0]
    assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-6)


@pytest.mark.parametrize(
    ("arch", "cfg"),
    [
        ("llama", InterventionConfig(kv_bias=True, gate=True, zero_sink_value=True)),
        ("qwen2", InterventionConfig(kv_bias=True, qk_norm=True)),
        ("llama", InterventionConfig(k_bias_only=True, suppress_massive=10.0)),
    ],
)
def test_bias_slot_save_load_round_trip(arch, cfg, tmp_path):
    from sink_probe import register

    from llmcore.models import load_causal_lm

    model = patch_model(make_model(arch, kv_heads=2), cfg, seed=3)
    model.save_pretrained(tmp_path)
    register()
    again = load_causal_lm(str(tmp_path), attn_implementation="eager").eval()
    assert type(again).__name__ == type(model).__name__
    assert config_of(again) == cfg
    with torch.no_grad():
        assert torch.allclose(model(input_ids=IDS).logits, again(input_ids=IDS).logits, atol=1e-6)


def test_bias_slot_with_kv_cache_matches_full_forward():
    model = patch_model(make_model(kv_heads=2), InterventionConfig(kv_bias=True), seed=5)
    with torch.no_grad():
        full = model(input_ids=IDS).logits[:, -1]
        out = model(input_ids=IDS[:, :15], use_cache=True)
        step = model(input_ids=IDS[:, 15:], past_key_values=out.past_key_values).logits[:, -1]
    assert torch.allclose(full, step, atol=1e-5)


def test_bias_slot_variants_are_in_the_variant_table():
    from sink_probe.variants import CLAIM_SPEC, VARIANTS, intervention_for

    assert intervention_for("kv_bias", CLAIM_SPEC).kv_bias
    assert intervention_for("k_bias_only", CLAIM_SPEC).k_bias_only
    from sink_probe.cli import VARIANT_NAMES

    assert {"kv_bias", "k_bias_only"} <= set(VARIANTS) and set(VARIANT_NAMES) == set(VARIANTS)
    assert "kv_bias" not in intervention_for("suppress_massive", CLAIM_SPEC).to_dict()


def test_probe_counts_the_bias_slot_as_sink(stream_tok, stream_texts_small, monkeypatch):
    """Streamed and naive probes agree on a bias-slot model, and the slot's weight (folded into
    position 0) is in the sink mass: at logit -inf the mass falls back to the plain model's."""
    from sink_probe.probe import probe

    model = patch_model(make_model(layers=2), InterventionConfig(k_bias_only=True), seed=1)
    kw = dict(T=64, tau_abs=None, tau_ratio=50.0)
    naive = probe(model, stream_tok, stream_texts_small, stream=False, batch_size=12, **kw)
    streamed = probe(model, stream_tok, stream_texts_small, batch_size=5, **kw)
    assert torch.allclose(
        torch.tensor(naive.sink_mass), torch.tensor(streamed.sink_mass), atol=1e-5
    )
    plain = probe(make_model(layers=2), stream_tok, stream_texts_small, **kw)
    assert torch.tensor(streamed.sink_mass).mean() > torch.tensor(plain.sink_mass).mean()
    monkeypatch.setattr(
        kv_bias, "_bias_logits", lambda attn, q: torch.full((*q.shape[:-1], 1), -torch.inf)
    )
    off = probe(model, stream_tok, stream_texts_small, **kw)
    assert torch.allclose(torch.tensor(off.sink_mass), torch.tensor(plain.sink_mass), atol=1e-5)


def test_bias_slot_is_trained():
    model = patch_model(make_model(), InterventionConfig(kv_bias=True), seed=6).train()
    model(input_ids=IDS, labels=IDS).loss.backward()
    attn = model.model.layers[1].self_attn
    assert attn.sink_k_bias.grad.abs().sum() > 0 and attn.sink_v_bias.grad.abs().sum() > 0
