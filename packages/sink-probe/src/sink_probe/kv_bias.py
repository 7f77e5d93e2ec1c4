"""Learned key/value bias slot (``kv_bias``, ``k_bias_only``) for Llama and Qwen2, and the full
:class:`InterventionConfig`.

Sun et al. (2024, the attention-bias GPT-2) prepend, in every layer and head, a learned key
``k'`` and value ``v'`` (``d_h`` each, initialised N(0, 0.02^2)) that every query can attend to:
the causal mask gains one always-visible column, and head ``h``'s output becomes
``p'_i v'_h + sum_j p_ij v_j`` with ``p' = softmax([q_i.k'_h * s, q_i.k_j * s])[0]``. The slot has
no position (no rotary embedding) and never enters the KV cache. ``k_bias_only`` keeps
``v' = 0``: the slot only absorbs attention mass.

Attention maps handed back to a caller (``output_attentions`` or the probe's hooks) fold the
slot's weight into the first sink position's column, so sink rate and sink mass count the bias
slot as part of the sink set (rows still sum to 1).

The other variants live in :mod:`sink_probe.patch`; a model with the bias slot is a separate
registered subclass (``sink_probe_kv_llama`` / ``sink_probe_kv_qwen2``), so saved variants
without it load exactly as before.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from sink_probe import patch as _base
from sink_probe.errors import SinkProbeConfigError, UnsupportedArchitecture

CONFIG_FIELD = _base.CONFIG_FIELD
_KV_FIELDS = ("kv_bias", "k_bias_only")


@dataclass(frozen=True)
class InterventionConfig(_base.InterventionConfig):
    """Which training-time interventions a patched model carries (all off by default)."""

    kv_bias: bool = False
    """Learned key and value bias slot per layer and head, visible to every query."""
    k_bias_only: bool = False
    """Learned key bias slot with its value fixed at zero (excludes ``kv_bias``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kv_bias and self.k_bias_only:
            raise SinkProbeConfigError(
                "kv_bias=True and k_bias_only=True conflict (k_bias_only is the bias slot with "
                "its value fixed at zero); set only one of them"
            )

    @property
    def active(self) -> bool:
        """Whether any intervention is on."""
        return super().active or self.has_bias_slot

    @property
    def has_bias_slot(self) -> bool:
        """Whether the model gets a bias key/value slot."""
        return self.kv_bias or self.k_bias_only

    def base(self) -> _base.InterventionConfig:
        """The interventions other than the bias slot."""
        d = dataclasses.asdict(self)
        for k in _KV_FIELDS:
            d.pop(k)
        return _base.InterventionConfig(**d)

    def to_dict(self) -> dict[str, Any]:
        """JSON form; the bias-slot flags appear only when set, so configs without them keep
        the form (and cache keys) they had before the flags existed."""
        d = self.base().to_dict()
        d.update({k: True for k in _KV_FIELDS if getattr(self, k)})
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InterventionConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise SinkProbeConfigError(
                f"unknown sink_probe_config keys {bad}; known: {sorted(known)}"
            )
        return cls(**{**d, "sink_set": tuple(d.get("sink_set", (0,)))})


class SinkProbeKVLlamaConfig(LlamaConfig):
    """``LlamaConfig`` of a Llama with the bias slot (``sink_probe_config`` field)."""

    model_type = "sink_probe_kv_llama"


class SinkProbeKVQwen2Config(Qwen2Config):
    """``Qwen2Config`` of a Qwen2 with the bias slot (``sink_probe_config`` field)."""

    model_type = "sink_probe_kv_qwen2"


def _from_config(config: Any) -> InterventionConfig:
    return InterventionConfig.from_dict(getattr(config, CONFIG_FIELD, {}) or {})


class SinkProbeKVLlamaForCausalLM(LlamaForCausalLM):
    """A Llama with the bias slot and the other interventions of ``config.sink_probe_config``."""

    config_class = SinkProbeKVLlamaConfig

    def __init__(self, config: SinkProbeKVLlamaConfig) -> None:
        super().__init__(config)
        _install_all(self, _from_config(config))


class SinkProbeKVQwen2ForCausalLM(Qwen2ForCausalLM):
    """A Qwen2 with the bias slot and the other interventions of ``config.sink_probe_config``."""

    config_class = SinkProbeKVQwen2Config

    def __init__(self, config: SinkProbeKVQwen2Config) -> None:
        super().__init__(config)
        _install_all(self, _from_config(config))


_PATCHED = {
    LlamaForCausalLM: (SinkProbeKVLlamaForCausalLM, SinkProbeKVLlamaConfig),
    Qwen2ForCausalLM: (SinkProbeKVQwen2ForCausalLM, SinkProbeKVQwen2Config),
}


def register() -> None:
    """Register every patched class (with and without the bias slot) with ``AutoConfig`` /
    ``AutoModelForCausalLM`` so that ``from_pretrained`` restores saved variants."""
    _base.register()
    for model_cls, cfg_cls in _PATCHED.values():
        AutoConfig.register(cfg_cls.model_type, cfg_cls, exist_ok=True)
        AutoModelForCausalLM.register(cfg_cls, model_cls, exist_ok=True)


def patch_model(model: nn.Module, cfg: _base.InterventionConfig, *, seed: int = 0) -> nn.Module:
    """Add ``cfg``'s training-time interventions to a Llama/Qwen2 causal LM in place (new
    parameters drawn with ``seed``); returns the same object, now a patched subclass."""
    if not isinstance(cfg, InterventionConfig) or not cfg.has_bias_slot:
        base = cfg.base() if isinstance(cfg, InterventionConfig) else cfg
        return _base.patch_model(model, base, seed=seed)
    return _base.convert_model(model, cfg, _PATCHED, register, _install_all, seed=seed)


def config_of(model: nn.Module) -> InterventionConfig:
    """The training-time interventions of ``model`` (all off for an unpatched model)."""
    return InterventionConfig.from_dict(getattr(model.config, CONFIG_FIELD, None) or {})


def _install_all(model: nn.Module, cfg: InterventionConfig) -> None:
    _base._install(model, cfg.base())
    conf = model.config
    H = conf.num_attention_heads
    dh = getattr(conf, "head_dim", None) or conf.hidden_size // H
    for li, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        if getattr(attn, "sliding_window", None):
            raise UnsupportedArchitecture(
                f"layer {li} uses sliding-window attention, which the bias slot does not "
                "support; use full attention (use_sliding_window=False)"
            )
        attn.sink_k_bias = nn.Parameter(torch.randn(H, dh) * 0.02)
        if cfg.kv_bias:
            attn.sink_v_bias = nn.Parameter(torch.randn(H, dh) * 0.02)
        else:  # k_bias_only: v' = 0, so the slot contributes nothing to the output
            attn.sink_v_bias = None
        attn._sink_probe_fold = cfg.sink_set[0]
        attn.__class__ = _bias_class(type(attn))


_CLASSES: dict[type, type] = {}


def _bias_class(cls: type) -> type:
    if getattr(cls, "_sink_probe_bias_slot", False):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(
            f"SinkProbeBias{cls.__name__}",
            (cls,),
            {"forward": _bias_forward, "_sink_probe_bias_slot": True, "__module__": __name__},
        )
    return _CLASSES[cls]


def _bias_logits(attn: nn.Module, query: torch.Tensor) -> torch.Tensor:
    """``q_i . k'_h * scaling`` for every query, ``[N, H, Tq, 1]``."""
    return (query * attn.sink_k_bias[None, :, None, :]).sum(-1, keepdim=True) * attn.scaling


def attend_with_bias(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    bias_logit: torch.Tensor,
    v_bias: torch.Tensor | None,
    *,
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Causal softmax attention with one extra always-visible slot.

    ``query [N,H,Tq,dh]``, ``key``/``value [N,H,Tk,dh]`` (heads already repeated),
    ``attention_mask`` additive ``[N,1,Tq,>=Tk]``, boolean (True = visible) or None (causal,
    queries at the last ``Tq`` positions), ``bias_logit [N,H,Tq,1]``, ``v_bias [H,dh]`` (None: zero).
    Returns ``(output [N,Tq,H,dh], token weights [N,H,Tq,Tk], slot weight [N,H,Tq,1])``."""
    Tq, Tk = query.shape[-2], key.shape[-2]
    sc = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is None:
        rows = torch.arange(Tq, device=sc.device).view(-1, 1) + (Tk - Tq)
        sc = sc.masked_fill(torch.arange(Tk, device=sc.device).view(1, -1) > rows, float("-inf"))
    elif attention_mask.dtype == torch.bool:
        sc = sc.masked_fill(~attention_mask[..., :Tk], float("-inf"))
    else:
        sc = sc + attention_mask[..., :Tk]
    p = torch.softmax(torch.cat([bias_logit.to(sc.dtype), sc], -1), dim=-1, dtype=torch.float32)
    p = nn.functional.dropout(p.to(query.dtype), p=dropout, training=training)
    pb, pt = p[..., :1], p[..., 1:]
    out = torch.matmul(pt, value)
    if v_bias is not None:
        out = out + pb * v_bias[None, :, None, :].to(value.dtype)
    return out.transpose(1, 2).contiguous(), pt, pb


def _bias_forward(
    self: Any,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    attention_mask: torch.Tensor | None = None,
    past_key_values: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    cos, sin = position_embeddings
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    if past_key_values is not None:
        k, v = past_key_values.update(k, v, self.layer_idx)
    k = repeat_kv(k, self.num_key_value_groups)
    v = repeat_kv(v, self.num_key_value_groups)
    out, pt, pb = attend_with_bias(
        q,
        k,
        v,
        attention_mask,
        self.scaling,
        _bias_logits(self, q),
        self.sink_v_bias,
        dropout=self.attention_dropout if self.training else 0.0,
        training=self.training,
    )
    out = self.o_proj(out.reshape(*input_shape, -1).contiguous())
    col = self._sink_probe_fold
    weights = pt
    if col < pt.shape[-1]:
        weights = pt.clone()
        weights[..., col : col + 1] += pb
    return out, weights
