"""Streaming probe vs the naive all-layer maps; hooks off = bit-identical; patch round trips."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import make_model
from sink_probe.intervene import intervene
from sink_probe.metrics import mixing_metrics, sink_mass, sink_rate
from sink_probe.patch import InterventionConfig, patch_model, register
from sink_probe.probe import probe


def _close(a, b, tol=1e-5):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    return a == b


@pytest.mark.parametrize("arch,kv", [("llama", None), ("qwen2", 2)])
def test_streamed_metrics_equal_naive_all_layer_maps(arch, kv, stream_tok, stream_texts_small):
    model = make_model(arch, kv_heads=kv, layers=3)
    kw = dict(T=64, tau_abs=None, tau_ratio=4.0)
    naive = probe(model, stream_tok, stream_texts_small, stream=False, batch_size=12, **kw)
    streamed = probe(model, stream_tok, stream_texts_small, batch_size=5, **kw)
    chunked = probe(
        model, stream_tok, stream_texts_small, batch_size=12, chunk_above=16, query_chunk=7, **kw
    )
    for rep in (streamed, chunked):
        a, b = rep.to_dict(), naive.to_dict()
        for key in (
            "sink_rate_by_pos",
            "sink_rate_per_layer_head",
            "sink_mass",
            "mixing",
            "massive",
            "massive_layers",
            "auto_sinks",
        ):
            assert _close(a[key], b[key]), key
    assert naive.n_massive > 0  # the low tau_ratio makes the comparison non-trivial


@pytest.mark.parametrize("sinks", [(0, 5), (2,)])
def test_streamed_equals_naive_for_non_prefix_sink_sets(sinks, stream_tok, stream_texts_small):
    """Sink sets that are not a prefix take the masked (not sliced) reduction path."""
    model = make_model(layers=2)
    kw = dict(T=64, tau_abs=None, tau_ratio=4.0, sink_set=sinks)
    naive = probe(model, stream_tok, stream_texts_small, stream=False, batch_size=12, **kw)
    streamed = probe(model, stream_tok, stream_texts_small, batch_size=5, **kw)
    chunked = probe(
        model, stream_tok, stream_texts_small, batch_size=12, chunk_above=16, query_chunk=3, **kw
    )
    for rep in (streamed, chunked):
        a, b = rep.to_dict(), naive.to_dict()
        for key in ("sink_rate_by_pos", "sink_mass", "mixing", "massive", "massive_layers"):
            assert _close(a[key], b[key]), key


def test_probe_matches_pure_functions_on_output_attentions(stream_tok, stream_texts_small):
    model = make_model(layers=2)
    rep = probe(model, stream_tok, stream_texts_small, T=64, batch_size=4)
    ids = torch.tensor(
        [[stream_tok.bos_token_id, *stream_tok(t)["input_ids"][:63]] for t in stream_texts_small]
    )
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    A = torch.stack(out.attentions, 1)
    assert torch.allclose(torch.tensor(rep.sink_rate_by_pos).float(), sink_rate(A, 0.3))
    assert torch.allclose(torch.tensor(rep.sink_mass).float(), sink_mass(A, (0,)), atol=1e-6)
    mm = mixing_metrics(A)
    for li in range(2):
        for k in ("m_S", "M_nn", "M_self"):
            assert abs(rep.mixing[li][k] - mm[li][k]) < 1e-6


def test_report_json_round_trip_and_table(stream_tok, stream_texts_small, tmp_path):
    from sink_probe.probe import ProbeReport

    rep = probe(make_model(), stream_tok, stream_texts_small, T=32, layers=[1])
    back = ProbeReport.from_dict(
        __import__("json").loads(rep.save(tmp_path / "r.json").read_text())
    )
    assert back == rep and back.layers == [1]
    assert rep.table().splitlines()[0].startswith("| layer | sink_rate")


def test_hooks_off_are_bit_identical():
    model = make_model()
    ids = torch.randint(3, 300, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        with intervene(model):
            off = model(input_ids=ids).logits
        patched = patch_model(make_model(), InterventionConfig())
        same = patched(input_ids=ids).logits
    assert torch.equal(ref, off) and torch.equal(ref, same)
    assert not model._forward_hooks and not model.model.layers[0].self_attn._forward_pre_hooks


def test_zero_sink_value_with_all_attention_on_sink_gives_zero_attention_output():
    from llmcore.hooks import capture_activations

    model = make_model(layers=1)
    T = 12
    mask = torch.full((1, 1, T, T), torch.finfo(torch.float32).min)
    mask[..., 0] = 0  # every query sees only the sink
    ids = torch.randint(3, 300, (1, T), generator=torch.Generator().manual_seed(1))
    name = "model.layers.0.self_attn"
    with torch.no_grad(), capture_activations(model, [name]) as base:
        model(input_ids=ids, attention_mask=mask)
    assert base[name][0].abs().max() > 0
    with (
        torch.no_grad(),
        intervene(model, zero_sink_value=True),
        capture_activations(model, [name]) as acts,
    ):
        model(input_ids=ids, attention_mask=mask)
    assert torch.equal(acts[name][0], torch.zeros_like(acts[name][0]))


def test_zero_sink_value_keeps_absolute_positions_with_kv_cache():
    model = make_model()
    ids = torch.randint(3, 300, (1, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), intervene(model, zero_sink_value=True):
        full = model(input_ids=ids).logits[:, -1]
        out = model(input_ids=ids[:, :9], use_cache=True)
        step = model(input_ids=ids[:, 9:], past_key_values=out.past_key_values).logits[:, -1]
    assert torch.allclose(full, step, atol=1e-5)


def test_drop_sink_attention_moves_mass_off_the_sink(stream_tok, stream_texts_small):
    model = make_model()
    base = probe(model, stream_tok, stream_texts_small, T=32)
    with intervene(model, drop_sink_attention=True):
        dropped = probe(model, stream_tok, stream_texts_small, T=32)
    assert max(max(r) for r in dropped.sink_mass) < 1e-6 < min(min(r) for r in base.sink_mass)
    assert all(dropped.mixing[li]["M_nn"] > base.mixing[li]["M_nn"] for li in (0, 1))


ALL_ON = InterventionConfig(
    gate=True, attn_out_norm=True, qk_norm=True, zero_sink_value=True, suppress_massive=2.0
)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_patched_model_save_load_round_trip_and_sdpa_agrees(arch, tmp_path):
    from llmcore.models import load_causal_lm

    model = patch_model(make_model(arch, kv_heads=2), ALL_ON, seed=3)
    ids = torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    model.save_pretrained(tmp_path)
    register()
    for impl in ("eager", "sdpa"):
        back = load_causal_lm(str(tmp_path), attn_implementation=impl)
        assert type(back) is type(model)
        with torch.no_grad():
            got = back(input_ids=ids).logits
        assert torch.allclose(got, ref, atol=1e-5), impl
    # the patch changes the function (not a no-op)
    plain = make_model(arch, kv_heads=2)
    with torch.no_grad():
        assert not torch.allclose(plain(input_ids=ids).logits, ref, atol=1e-3)


def test_clamp_counts_clip_fraction():
    from sink_probe.patch import clip_stats

    model = patch_model(make_model(), InterventionConfig(suppress_massive=0.5))
    with torch.no_grad():
        model(input_ids=torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(0)))
    st = clip_stats(model)
    assert st["seen"] == 2 * 2 * 32 and 0 < st["clip_fraction"] <= 1


def test_intervene_set_zero_zeroes_exactly_the_massive_entries():
    """``massive="set_zero"``: a planted spike (5000 at token 3, channel 5 of block 0's output)
    is zeroed, a planted 90 (below ``tau_abs = 100``) is kept, and everything downstream equals
    a forward in which the spike was planted as 0."""
    from llmcore.hooks import capture_activations

    model = make_model()
    ids = torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(0))
    name = "model.layers.0"

    def plant(value):
        def hook(mod, args, out):
            x = (out[0] if isinstance(out, tuple) else out).clone()
            x[:, 3, 5] = value
            x[:, 6, 2] = 90.0
            return (x, *out[1:]) if isinstance(out, tuple) else x

        return model.model.layers[0].register_forward_hook(hook)

    h = plant(5000.0)
    with torch.no_grad(), capture_activations(model, [name]) as raw:
        model(input_ids=ids)
    x = raw[name][0]
    assert x.abs().flatten(1).median(-1).values.max() * 1000 < 5000  # the spike is massive
    with (
        torch.no_grad(),
        intervene(model, massive="set_zero", layers=[0]),
        capture_activations(model, [name]) as acts,
    ):
        edited = model(input_ids=ids).logits
    h.remove()
    expect = x.clone()
    expect[:, 3, 5] = 0.0
    assert torch.equal(acts[name][0], expect)  # only the spike changed; 90 < tau_abs kept
    h = plant(0.0)
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    h.remove()
    assert torch.equal(edited, ref)
