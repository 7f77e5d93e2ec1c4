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
EXT_LR = 6e-3
EXT_WEIGHT_DECAY = 0.0
EXT_N_TRAIN = 48000
EXT_PAIRS = 6
EXT_QUERIES = 6
"""Recipe of the five-variant protocol: S6 of the baseline screen below (the first recipe, R1,
failed the gate in both seeds). Llama 4 layers x 64, 4 heads, MLP 256, AdamW lr 6e-3 (50
warm-up steps, cosine to 10 %), no weight decay, batch 16, 3,000 steps, seeds 0 and 1; the
synthetic streams with 6 key-value pairs and 6 recall queries per sequence (otherwise as in the
claim) and 48,000 training sequences, each seen once. Baseline measured at this recipe (128
held-out sequences): seed 0 passes the gate (SinkRate(0) 0.0 / 98.6 / 24.8 / 0.0 %, 30.9 % over
all layers, a thin 0.9-point margin; sink 134.7x in layer 3); seed 1 fails it on the sink rate
(0.0 / 75.6 / 35.5 / 0.0 %, 27.8 %; sink 157.5x), so the seed-1 case stops at its gate.

Seed 0, all five variants at this recipe (128 held-out sequences; SinkRate(0) L0 / L1 / L2 / L3,
all layers, sink mass, sink max/median per layer, training clip fraction, mean M_nn, last-layer
r, held-out loss):

- baseline: 0.0 / 98.6 / 24.8 / 0.0 %, 30.9 %, 0.202, 5.3 / 8.7 / 9.9 / 134.7x, 0, 0.738,
  0.905, 3.663 (gate passes).
- suppress_massive: 0.0 / 62.9 / 25.0 / 2.9 %, 22.7 %, 0.176, 4.6 / 7.1 / 7.0 / 10.0x, 0.014,
  0.768, 0.908, 3.697.
- suppress_massive+zero_sink_value: 67.4 / 24.8 / 76.6 / 22.5 %, 47.8 %, 0.287,
  7.1 / 4.5 / 4.2 / 10.0x, 0.015, 0.624, 0.892, 3.655.
- gate: 0.0 / 75.8 / 0.0 / 0.0 %, 18.9 %, 0.171, 7.7 / 7.0 / 6.5 / 132.4x, 0, 0.779, 0.894,
  3.685.
- kv_bias (slot counted as sink): 0.0 / 1.4 / 13.9 / 0.0 %, 3.8 %, 0.131,
  12.3 / 9.0 / 11.0 / 53.8x, 0, 0.808, 0.905, 3.687.

The test fails at its first comparison (kv_bias sink 53.8x against the baseline's 134.7x / 5 =
26.9x). The other checks, evaluated on these numbers: kv_bias sink mass 0.131 >= 0.101 (holds);
gate 132.4x <= 26.9x (fails: the gate leaves the massive entry in place), its sink mass 0.171
(holds); the clamp binds in both clamp variants (holds); suppress_massive has fewer sinks than
the baseline, 22.7 % < 30.9 % (holds); value removal 47.8 % >= 0.7 x 30.9 % (holds, above the
baseline itself) but its sink is 10.001x, not < 10x (fails by construction: the clamp holds the
sink exactly at c = 10 medians of the batch, measured with per-sequence medians); the
weakest-sink variant (kv_bias) mixes more, M_nn 0.808 > 0.738 (holds), and its last-layer r is
0.90480 against 0.90477 (fails: equal to 4 digits). Mean M_nn falls monotonically with the sink
rate over the five variants (3.8 % -> 0.808, 18.9 % -> 0.779, 22.7 % -> 0.768, 30.9 % -> 0.738,
47.8 % -> 0.624). Run: 25.4 CPU-min cold for the four variants and the cached baseline's probe
(59:50 wall at nice 5 on the shared 2-core machine).

R1, the first recipe (fixed before any variant was trained): as above but lr 3e-3, 3 pairs and
2 queries (the claim's streams), 3,200 training sequences (15 epochs). Why this size: 4 layers
and >= 3,000 steps at lr 3e-3 are the levers that moved the baseline towards the gate in the
prototypes (lr 3e-3 grew a fixed massive channel on the sink, 16x at 1,200 steps and 25x at
2,000 steps at 3 x 96 / batch 32; a 4th layer moved a sink into layer 1). The width and batch
fit ten trainings in about an hour of one CPU thread (training CPU per step 0.11 s at 4 x 64 /
batch 16, 0.16 s at 4 x 96 / batch 16, 0.25 s at 4 x 64 / batch 32). Measured: the gate fails
in both seeds. Seed 0: SinkRate(0) per layer 0.0 / 0.2 / 0.0 / 0.0 % (0.05 % over all layers),
sink max/median 8.8 / 7.2 / 6.5 / 13.8x, held-out loss 3.687; seed 1: 32.4 / 0.2 / 0.0 / 2.0 %
(8.6 %), 7.4 / 7.9 / 7.6 / 14.5x, 3.742 (every variant of R1 is in the README).

Baseline screen for a recipe that passes the gate (gate unchanged; baseline only; each recipe
written here before it was measured). As R1 (seed 0 unless said; the BOS token already sits at
position 0 of every training row), one lever at a time, later tries stacking the levers that
helped; learning-curve probe every 500 steps on the first 64 held-out sequences, final probe
on all 128 (``scripts/screen_baseline.py``; results in the README):

- S0 (reference): R1 itself, measured above.
- S1: AdamW weight decay 0.5 on every parameter (Gu et al. 2025 saw the most sinks at 0.5 in
  their LLaMA runs; 0 gave the fewest among small values). Measured: no sink at any probe
  (0.0 % in every layer, sink <= 10x), held-out loss 3.750.
- S2: weight decay 0.1. Not run (after S1).
- S3: sufficient data: 48,000 training sequences (3,000 x 16: each seen once), weight decay 0.
  Not run alone; folded into S6.
- S4 (written after S1 showed no sink at any probe): a denser recall task, so that heads have a
  job at a few positions and nothing to do at the rest: 6 key-value pairs and 6 recall queries
  per sequence instead of 3 and 2 (filler still about 55 % of positions), weight decay 0,
  3,200 training sequences. Measured: 0.0 / 60.5 / 0.0 / 0.0 % (15.1 %), sink 20.9x.
- S5 (written after S4's curve: a sink in layer 1 only, about 15 % over all layers and 22x at
  1,500 steps): S4's streams at peak lr 6e-3 (Gu et al.: a larger learning rate gives more
  sinks; here lr 1e-3 -> 3e-3 first grew a massive channel on the sink). Measured: 0.0 / 99.6 /
  0.0 / 0.0 % (24.9 %), sink 28.1x.
- S6 (written after S5's curve: 97 % sinks in layer 1, none elsewhere, 24 % over all layers,
  20x at 1,000 steps): S5 with sufficient data, 48,000 training sequences (each seen once).
  Measured: passes (30.9 %, 134.7x; numbers above).
- S7 (written after S6's curve: 39.8 % over all layers and 85x at 1,000 steps): S6 at seed 1,
  the protocol's second seed (same data; model initialisation and batch order differ).
  Measured: fails on the sink rate (27.8 %, 157.5x; numbers above).

Why layers 0 and 3 never sink (per-head look at the cached S6 baselines, 64 held-out
sequences): in both seeds no head of layer 0 or layer 3 has a sink (attention to BOS 0.01-0.20
per head), while layer 1 has 4 (seed 0) or 3 (seed 1) sinking heads of 4 and layer 2 one or
two. Layer-0 heads read raw embeddings and average broadly (seed 0: entropy 0.7-1.0 of
uniform) or focus on a few tokens; layer-3 heads focus on non-BOS tokens (entropy 0.1-0.4 of
uniform), as output retrieval would. Every head in the first and last layer has a job at most
positions, so with 4 heads per layer none is idle enough to park on BOS. The sink's massive
entry (134.7x, 157.5x) exists only at the output of the last block, which feeds no attention
layer; at the inputs of layers 1-3 the sink's largest entry is 5-13x the median and the BOS
residual has 0.4-0.9x the norm of the other tokens (whose residuals carry entries of 150-700).
So the gate's 20x part is met by an activation that cannot cause these sinks.

- S8 (written after that look; seed 1 first, then seed 0 if seed 1 passes): S6 with 8 heads
  of width 8 per layer instead of 4 of width 16 (same d_model, MLP and parameter count): if
  the number of per-position jobs per layer is fixed, more heads leave idle heads that park on
  BOS, in the first and last layer too. Measured (seed 1): fails, 0.0 / 76.9 / 35.9 / 0.0 %
  (28.2 %), sink 74.3x, held-out loss 3.651 (curve 31.4 / 29.8 / 31.0 / 29.7 / 28.4 %): the
  first and last layer still have no sink, so seed 0 was not run.
- S9 (written after S8): S6 (4 heads) with denser recall, 8 key-value pairs and 8 recall
  queries per sequence (filler about 27 % of positions): S4 showed that retrieval heads park
  on BOS where they have nothing to retrieve; more pairs may recruit one more head of layer 2
  into retrieval. Seed 1 first, then seed 0 if seed 1 passes. Measured (seed 1): fails far
  from the gate, 0.0 / 28.3 / 0.0 / 0.0 % (7.1 %), sink 154.0x, held-out loss 3.567 (curve
  5.0 / 2.9 / 10.6 / 8.6 / 7.0 %): with 8 queries the heads of layers 1-2 have retrieval work
  at more positions and park on BOS less; 6 pairs and 6 queries (S6) stays the recipe.
"""


def extended_spec(seed: int):
    """The :class:`~sink_probe.variants.VariantSpec` of the five-variant protocol."""
    from sink_probe.data import StreamSpec
    from sink_probe.variants import VariantSpec

    return VariantSpec(
        steps=EXT_STEPS, d_model=EXT_D_MODEL, n_layers=EXT_LAYERS, batch_size=EXT_BATCH,
        lr=EXT_LR, weight_decay=EXT_WEIGHT_DECAY, n_train=EXT_N_TRAIN, seed=seed,
        stream=StreamSpec(n_pairs=EXT_PAIRS, n_queries=EXT_QUERIES),
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
    suppress_massive + zero_sink_value) at the recipe above, zoo-cached (about 5 CPU-min per
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
