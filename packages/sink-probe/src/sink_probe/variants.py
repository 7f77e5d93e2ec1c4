"""Trained tiny variants: zoo recipes over the synthetic streams, one per intervention set.

Each variant is a :func:`llmcore.zoo.build` recipe on a word tokenizer over the 256 stream
symbols, built with ``model_fn`` = a Llama patched by :func:`sink_probe.patch.patch_model`, keyed
by the variant and a digest of the patch code, so identical data, steps and seed differ only in
the architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sink_probe.data import SYMBOLS, StreamSpec, stream_texts
from sink_probe.errors import SinkProbeConfigError

VARIANTS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "kv_bias": {"kv_bias": True},
    "k_bias_only": {"k_bias_only": True},
    "gate": {"gate": True},
    "attn_out_norm": {"attn_out_norm": True},
    "qk_norm": {"qk_norm": True},
    "zero_sink_value": {"zero_sink_value": True},
    "suppress_massive": {"suppress_massive": "c"},
    "suppress_massive+zero_sink_value": {"suppress_massive": "c", "zero_sink_value": True},
}
"""Variant name -> :class:`~sink_probe.kv_bias.InterventionConfig` fields (``"c"``: the clamp
level of the run)."""


@dataclass(frozen=True)
class VariantSpec:
    """Architecture, data and optimisation of a trained variant (identical across variants)."""

    steps: int = 1000
    """Optimiser steps."""
    d_model: int = 64
    """Hidden size."""
    n_layers: int = 3
    """Decoder blocks."""
    n_heads: int = 4
    """Attention heads."""
    d_mlp: int = 256
    """MLP width."""
    batch_size: int = 32
    """Sequences per step."""
    lr: float = 3e-3
    """Peak AdamW learning rate (warm-up 50 steps, cosine to 10 %)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay on every parameter (0: none, the default-tier recipe).
    Gu et al. (2025, Sec. 5) report that stronger weight decay makes attention sinks emerge
    more."""
    clamp: float = 10.0
    """``suppress_massive`` level c (median units) in the variants that use it."""
    seed: int = 0
    """Model initialisation and batch order."""
    n_train: int = 3200
    """Training sequences of the synthetic stream (64 tokens each)."""
    n_eval: int = 128
    """Held-out sequences."""
    data_seed: int = 0
    """Seed of the stream generator."""
    stream: StreamSpec = field(default_factory=StreamSpec)
    """The synthetic task."""
    max_eval_loss: float = 4.5
    """Quality gate of the build (held-out nats/token; the Zipf filler alone has 3.52)."""


def intervention_for(variant: str, spec: VariantSpec):
    """The :class:`~sink_probe.kv_bias.InterventionConfig` of a named variant."""
    from sink_probe.kv_bias import InterventionConfig

    if variant not in VARIANTS:
        raise SinkProbeConfigError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")
    fields = {k: (spec.clamp if v == "c" else v) for k, v in VARIANTS[variant].items()}
    return InterventionConfig(**fields)


def variant_recipe(variant: str, spec: VariantSpec = VariantSpec()):
    """The zoo recipe of ``variant`` (corpus, word tokenizer, eager Llama, training)."""
    from llmcore import zoo

    intervention_for(variant, spec)
    if not spec.weight_decay >= 0:
        raise SinkProbeConfigError(
            f"weight_decay must be >= 0, got {spec.weight_decay!r}; 0 turns it off"
        )
    texts = stream_texts(spec.n_train + spec.n_eval, spec.stream, seed=spec.data_seed)
    corpus = zoo.Corpus("sink-stream", tuple(texts[: spec.n_train]), tuple(texts[spec.n_train :]))
    safe = variant.replace("+", "-plus-")
    return zoo.Recipe(
        f"sink-probe-{safe}",
        corpus,
        tokenizer=zoo.TokenizerSpec(kind="word", symbols=SYMBOLS),
        model=zoo.ModelSpec(
            arch="llama",
            hidden_size=spec.d_model,
            num_layers=spec.n_layers,
            num_heads=spec.n_heads,
            intermediate_size=spec.d_mlp,
            max_position_embeddings=max(128, spec.stream.seq_len),
            attn_implementation="eager",
        ),
        train=zoo.TrainSpec(
            steps=spec.steps,
            batch_size=spec.batch_size,
            lr=spec.lr,
            warmup_steps=50,
            weight_decay=spec.weight_decay,
            max_length=spec.stream.seq_len,
            seed=spec.seed,
        ),
        max_eval_loss=spec.max_eval_loss,
    )


def train_variant(variant: str, spec: VariantSpec = VariantSpec(), *, progress: bool = False):
    """Build (or load from the zoo cache) the trained ``variant``; returns the ``ZooEntry``.

    Its metrics add ``train_clip_fraction`` (share of sink-token residual entries the
    ``suppress_massive`` clamp bound during training)."""
    import sink_probe.kv_bias as kv_mod
    import sink_probe.patch as patch_mod
    from llmcore import zoo
    from llmcore.zoo.train import build_model

    cfg = intervention_for(variant, spec)
    kv_mod.register()
    # the bias-slot variants are built by their own module, keyed by its code as well; the
    # others go through sink_probe.patch alone, so their cache keys depend on that module only
    patcher = kv_mod if cfg.has_bias_slot else patch_mod
    key_cfg = cfg if cfg.has_bias_slot else cfg.base()

    def model_fn(mspec, tok, *, seed):
        model = build_model(mspec, tok, seed=seed)
        return patcher.patch_model(model, key_cfg, seed=seed + 1)

    def gate(model, tok):
        st = patch_mod.clip_stats(model)
        return {"train_clip_fraction": st["clip_fraction"], "train_clipped": float(st["clipped"])}

    return zoo.build(
        variant_recipe(variant, spec),
        progress=progress,
        model_fn=model_fn,
        gate=gate,
        key_extra={
            "variant": variant,
            "intervention": cfg.to_dict(),
            "code": zoo.code_digest(patch_mod),
            **({"bias_slot_code": zoo.code_digest(kv_mod)} if cfg.has_bias_slot else {}),
        },
    )


def with_steps(spec: VariantSpec, steps: int) -> VariantSpec:
    """``spec`` with another step count."""
    return replace(spec, steps=steps)


def train_tiny(
    variant: str = "baseline",
    *,
    steps: int = 1000,
    d_model: int = 64,
    n_layers: int = 3,
    n_heads: int = 4,
    seq_len: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    clamp: float = 10.0,
    progress: bool = False,
):
    """Train (or load) a tiny Llama ``variant`` on the synthetic streams; returns
    ``(model, tokenizer, entry)`` with the model patched and in eval mode."""
    spec = VariantSpec(
        steps=steps, d_model=d_model, n_layers=n_layers, n_heads=n_heads, lr=lr, seed=seed,
        clamp=clamp, stream=StreamSpec(seq_len=seq_len),
    )  # fmt: skip
    entry = train_variant(variant, spec, progress=progress)
    model, tok = entry.load()
    return model, tok, entry


CLAIM_SPEC = VariantSpec()
"""The default-tier claim's recipe (calibrated; see the claim test's docstring)."""
