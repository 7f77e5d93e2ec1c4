"""Which Hugging Face architectures respin-quant can rotate, and where their modules are."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from torch import nn

from respin_quant.errors import RotationError, UnsupportedModelError

log = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")


@dataclass(frozen=True)
class Dims:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int


def check_model(model: nn.Module) -> Dims:
    """Validate a pre-norm RMSNorm decoder (Llama, Mistral, Qwen2) and return its sizes."""
    cfg = getattr(model, "config", None)
    mt = getattr(cfg, "model_type", None)
    if mt not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModelError(
            f"model_type {mt!r} is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)} "
            "(pre-norm RMSNorm decoders with separate q/k/v/o and gate/up/down projections)"
        )
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(model, "lm_head"):
        raise UnsupportedModelError(
            f"{type(model).__name__} has no .model.layers/.lm_head: load it with "
            "AutoModelForCausalLM (supported: " + ", ".join(SUPPORTED_MODEL_TYPES) + ")"
        )
    for i, layer in enumerate(inner.layers):
        for nm in ("input_layernorm", "post_attention_layernorm"):
            if "RMSNorm" not in type(getattr(layer, nm, None)).__name__:
                raise UnsupportedModelError(f"layer {i}: {nm} is not an RMSNorm")
        mlp = getattr(layer, "mlp", None)
        if not all(hasattr(mlp, p) for p in ("gate_proj", "up_proj", "down_proj")):
            raise UnsupportedModelError(f"layer {i}: MLP is not a gated gate/up/down MLP (MoE?)")
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return Dims(
        hidden=cfg.hidden_size,
        layers=cfg.num_hidden_layers,
        heads=heads,
        kv_heads=getattr(cfg, "num_key_value_heads", None) or heads,
        head_dim=head_dim,
        intermediate=cfg.intermediate_size,
    )


def layers(model: nn.Module) -> Any:
    return model.model.layers  # type: ignore[union-attr]


def get_state(model: nn.Module) -> dict[str, Any]:
    """The ``config.respin`` marker dict (created empty)."""
    st = getattr(model.config, "respin", None)
    if not isinstance(st, dict):
        st = {}
        model.config.respin = st
    return st


def require_fresh(model: nn.Module, action: str) -> None:
    st = get_state(model)
    if st.get("rotated"):
        raise RotationError(
            f"cannot {action}: rotations were already applied to this model "
            f"(method {st.get('method')!r}); start from a fresh copy of the model"
        )
    if st.get("quantized"):
        raise RotationError(
            f"cannot {action}: the model is already quantised; rotations must be fused before "
            "quantisation (apply_rotations, then quantize)"
        )


def untie_lm_head(model: nn.Module) -> None:
    """Give lm_head its own weight when it is tied to embed_tokens (LLaMA-3.2)."""
    emb = model.model.embed_tokens.weight
    if model.lm_head.weight is emb or model.lm_head.weight.data_ptr() == emb.data_ptr():
        log.info("untying lm_head from embed_tokens before rotating")
        model.lm_head.weight = nn.Parameter(emb.detach().clone(), requires_grad=emb.requires_grad)
    model.config.tie_word_embeddings = False
    if hasattr(model, "_tied_weights_keys"):
        import contextlib

        with contextlib.suppress(Exception):  # the attribute's form differs across versions
            model._tied_weights_keys = {}


def exact_norms(model: nn.Module) -> nn.Module:
    """Make every RMSNorm compute in its input dtype (for float64 exactness checks).

    transformers' Llama/Qwen2 RMSNorm up/down-casts through float32, which caps a float64
    model at ~1e-7 agreement; this swaps in the same formula without the float32 round trip.
    """
    import types

    import torch

    def fwd(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, "variance_epsilon", getattr(self, "eps", 1e-6))
        return self.weight.to(x.dtype) * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    for mod in model.modules():
        if "RMSNorm" in type(mod).__name__:
            mod.forward = types.MethodType(fwd, mod)
    return model
