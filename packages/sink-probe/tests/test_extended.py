"""Extended tier: framework adapters (optional extras) and the five-variant protocol."""

from __future__ import annotations

import pytest
import torch
from conftest import make_model

pytestmark = pytest.mark.extended


def test_transformer_lens_cache_feeds_the_metrics(stream_tok, tmp_path):
    tl = pytest.importorskip("transformer_lens")
    from sink_probe.adapters import from_transformer_lens
    from sink_probe.metrics import mixing_metrics, sink_rate
    from transformers import AutoTokenizer

    hf = make_model(layers=2)
    ids = torch.randint(3, 300, (3, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # before the bridge wraps the model's modules
        ref = torch.stack(hf(input_ids=ids, output_attentions=True).attentions, 1)
    stream_tok.save_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    bridge = tl.TransformerBridge.boot_transformers(
        "meta-llama/Llama-3.2-1B", hf_model=hf, tokenizer=tok
    )  # the name only selects the Llama adapter; nothing is downloaded
    _, cache = bridge.run_with_cache(ids)
    acts = from_transformer_lens(cache, bridge)
    assert acts.attn.shape == (3, 2, 4, 16, 16) and acts.hidden.shape == (3, 3, 16, 32)
    assert torch.allclose(acts.attn, ref, atol=1e-5)
    assert torch.allclose(sink_rate(acts.attn), sink_rate(ref))
    mix, mref = acts.mixing((0,)), mixing_metrics(ref)
    for li in (0, 1):
        assert abs(mix[li]["m_S"] + mix[li]["M_nn"] + mix[li]["M_self"] - 1) < 1e-5
        assert abs(mix[li]["M_nn"] - mref[li]["M_nn"]) < 1e-5
    # layouts line up: A V W_O reproduces the bridge's attention output
    ctx = torch.einsum("nhqt,nhtk->nqhk", acts.attn[:, 0], acts.values[:, 0]).flatten(2)
    assert torch.allclose(ctx @ acts.w_o[0].T, cache["blocks.0.hook_attn_out"], atol=1e-5)


def test_nnsight_trace_matches_output_attentions(stream_tok):
    nnsight = pytest.importorskip("nnsight")
    from sink_probe.adapters import from_nnsight
    from sink_probe.metrics import mixing_metrics

    hf = make_model(layers=2)
    lm = nnsight.LanguageModel(hf, tokenizer=stream_tok)
    ids = torch.randint(3, 300, (2, 12), generator=torch.Generator().manual_seed(0))
    acts = from_nnsight(lm, ids)
    with torch.no_grad():
        ref = torch.stack(hf(input_ids=ids, output_attentions=True).attentions, 1)
    assert torch.allclose(acts.attn, ref, atol=1e-6)
    assert acts.hidden.shape == (2, 3, 12, 32)
    m = acts.mixing((0,))
    assert abs(m[1]["M_nn"] - mixing_metrics(ref)[1]["M_nn"]) < 1e-6


EXT_VARIANTS = (
    "baseline", "suppress_massive", "suppress_massive+zero_sink_value", "gate", "kv_bias",
)  # fmt: skip
GATE_SINK_RATE = 30.0
"""Baseline gate, fixed before any variant is measured: SinkRate_0.3(0) over *all* layers
>= 30 % (at this scale the baseline's sink sits in layer 0: 60 % there, 0 % in layers >= 1 at
lr 3e-3, 3 layers, 1,200 steps), and ..."""
GATE_SINK_MASSIVE = 20.0
"""... the sink token's largest residual entry >= 20x the median (25x was measured at 2,000
steps; the spec's 50x is its own scale adaptation of a 1000x definition, out of reach here)."""
EXT_SEEDS = (0, 1)
EXT_STEPS = 3000
EXT_D_MODEL = 64
EXT_LAYERS = 4
EXT_BATCH = 16
"""Recipe of the five-variant protocol, fixed before any variant was trained: Llama 4 layers x
64, 4 heads, MLP 256, lr 3e-3 (50 warm-up steps, cosine to 10 %), batch 16, 3,000 steps, seeds 0
and 1, the claim's synthetic streams. Why this size: 4 layers and >= 3,000 steps at lr 3e-3 are
the levers that moved the baseline towards the gate in the prototypes (lr 3e-3 grew a fixed
massive channel on the sink, 16x at 1,200 steps and 25x at 2,000 steps at 3 x 96 / batch 32; a
4th layer moved a sink into layer 1). The width and batch are the ones that fit ten trainings
in about an hour of one CPU thread: measured training CPU time per step (machine shared with
two other builds) 0.11 s at 4 x 64 / batch 16, 0.16 s at 4 x 96 / batch 16, 0.25 s at 4 x 64 /
batch 32, so 4 x 64 / batch 16 costs about 5.5-6 CPU-min per variant and seed (about 58
CPU-min for all ten) where 4 x 96 / batch 16 would cost about 78. The price: the narrower model
saw smaller sink ratios in the default-tier recipe (3 x 64: sink <= 5x at 1,000 steps), so the
baseline gate may fail; if it does the test fails and reports the baseline's numbers.

Measured (after the recipe and gate above were fixed; 128 held-out sequences): the gate fails
in both seeds. Baseline seed 0: SinkRate(0) per layer 0.0 / 0.2 / 0.0 / 0.0 % (0.05 % over all
layers), sink max/median 8.8 / 7.2 / 6.5 / 13.8x, held-out loss 3.687; seed 1: 32.4 / 0.2 /
0.0 / 2.0 % (8.6 %), 7.4 / 7.9 / 7.6 / 14.5x, 3.742. The other variants' numbers are in the
README (table of every variant and seed)."""


def extended_spec(seed: int):
    """The :class:`~sink_probe.variants.VariantSpec` of the five-variant protocol."""
    from sink_probe.variants import VariantSpec

    return VariantSpec(
        steps=EXT_STEPS, d_model=EXT_D_MODEL, n_layers=EXT_LAYERS, batch_size=EXT_BATCH,
        seed=seed,
    )  # fmt: skip


def measure_variant(variant: str, seed: int) -> dict:
    """Train (or load from the zoo) ``variant`` at ``extended_spec(seed)`` and probe its 128
    held-out sequences (eps 0.3, sink ratio = the sink token's largest |x| / median |x|)."""
    from sink_probe.probe import probe
    from sink_probe.variants import train_variant, variant_recipe

    spec = extended_spec(seed)
    e = train_variant(variant, spec)
    model, tok = e.load()
    texts = list(variant_recipe(variant, spec).corpus.eval)
    rep = probe(model, tok, texts, T=64, tau_abs=None, tau_ratio=50.0)
    L = len(rep.layers)
    return {
        "rate_L0": rep.sink_rate_per_layer[0],
        "rate_ge1": sum(rep.sink_rate_per_layer[1:]) / (L - 1),
        "rate_all": sum(rep.sink_rate_per_layer) / L,
        "rate_per_layer": list(rep.sink_rate_per_layer),
        "mass": sum(sum(r) / len(r) for r in rep.sink_mass) / L,
        "sink_ratio": max(m["sink_ratio"] for m in rep.massive_layers.values()),
        "sink_ratio_per_layer": [rep.massive_layers[i]["sink_ratio"] for i in rep.layers],
        "M_nn": sum(rep.mixing[i]["M_nn"] for i in rep.layers) / L,
        "r_last": rep.mixing[rep.layers[-1]]["r"],
        "clip": e.metrics["train_clip_fraction"],
        "eval_loss": e.metrics["eval_loss"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("seed", EXT_SEEDS)
def test_five_variant_protocol(seed):
    """The direction experiment on the five variants (baseline, kv_bias, gate, suppress_massive,
    suppress_massive + zero_sink_value) at the recipe above, zoo-cached (about 6 CPU-min per
    variant cold, seconds warm). The baseline gate is asserted first; the variants are compared
    to the baseline only after it passed."""
    base = measure_variant("baseline", seed)
    print("baseline", base)
    assert base["rate_all"] >= GATE_SINK_RATE and base["sink_ratio"] >= GATE_SINK_MASSIVE, (
        f"baseline gate failed, no variant compared: {base}"
    )
    res = {v: measure_variant(v, seed) for v in EXT_VARIANTS[1:]}
    print(res)
    for v in ("kv_bias", "gate"):  # sink mass of kv_bias counts the bias slot (folded into 0)
        g = res[v]
        assert g["sink_ratio"] <= base["sink_ratio"] / 5 and g["mass"] >= 0.5 * base["mass"], v
    sm, smz = res["suppress_massive"], res["suppress_massive+zero_sink_value"]
    assert sm["clip"] > 0 and smz["clip"] > 0
    assert sm["rate_all"] < base["rate_all"]
    assert smz["rate_all"] >= 0.7 * base["rate_all"] and smz["sink_ratio"] < 10
    weakest = min(res.values(), key=lambda m: m["rate_all"])
    assert weakest["M_nn"] > base["M_nn"] and weakest["r_last"] < base["r_last"]
