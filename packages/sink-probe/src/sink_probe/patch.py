"""Training-time architectural variants (attention-side interventions) for Llama and Qwen2.

:func:`patch_model` adds the variant's modules and hooks to a ``LlamaForCausalLM`` /
``Qwen2ForCausalLM`` in place and turns it into a registered subclass whose config carries a
``sink_probe_config`` field; ``save_pretrained`` writes it to ``config.json`` and, after
:func:`register`, ``AutoModelForCausalLM.from_pretrained`` rebuilds the same patched model.

Variants (all off by default):

* ``gate``: elementwise sigmoid output gate on each head's attention output before ``W_O``,
  ``Y' = Y * sigmoid(x W_g)`` with ``x`` the normalised block input (Qiu et al. 2025's SDPA-output
  gate), ``W_g`` initialised N(0, 0.02^2).
* ``attn_out_norm``: head-wise RMSNorm on the attention output before ``W_O``.
* ``qk_norm``: RMSNorm on queries and keys per head (before the rotary embedding).
* ``zero_sink_value``: the value vectors of the sink positions are set to zero in every layer.
* ``suppress_massive``: after every block, the residual-stream entries of the sink positions are
  clamped to ``[-c, c]`` with ``c = suppress_massive * median |x|`` of that block output (per
  batch); the number of clamped entries is counted (:func:`clip_stats`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
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

from sink_probe.errors import SinkProbeConfigError, UnsupportedArchitecture

CONFIG_FIELD = "sink_probe_config"


@dataclass(frozen=True)
class InterventionConfig:
    """Which training-time interventions a patched model carries (all off by default)."""

    gate: bool = False
    """Sigmoid output gate per head before ``W_O``, from the normalised block input."""
    attn_out_norm: bool = False
    """Head-wise RMSNorm on the attention output before ``W_O``."""
    qk_norm: bool = False
    """RMSNorm on queries and keys per head."""
    zero_sink_value: bool = False
    """Value vectors of the sink positions set to zero in every layer."""
    suppress_massive: float | None = None
    """Clamp level ``c`` in units of the block output's median ``|x|`` for the sink positions'
    residual entries after every block (None: off; the paper's operationalisation uses 10)."""
    sink_set: tuple[int, ...] = (0,)
    """Absolute positions of the sink tokens."""

    def __post_init__(self) -> None:
        s = tuple(int(i) for i in self.sink_set)
        if not s or any(i < 0 for i in s) or len(set(s)) != len(s):
            raise SinkProbeConfigError(
                f"sink_set must be distinct non-negative positions, got {self.sink_set!r}"
            )
        object.__setattr__(self, "sink_set", s)
        c = self.suppress_massive
        if c is not None and not (math.isfinite(c) and c > 0):
            raise SinkProbeConfigError(
                f"suppress_massive is a clamp level in medians and must be > 0 (e.g. 10), got {c!r}"
            )

    @property
    def active(self) -> bool:
        """Whether any intervention is on."""
        return any((self.gate, self.attn_out_norm, self.qk_norm, self.zero_sink_value)) or (
            self.suppress_massive is not None
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["sink_set"] = list(self.sink_set)
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


class SinkProbeLlamaConfig(LlamaConfig):
    """``LlamaConfig`` with a ``sink_probe_config`` field (the patch to rebuild on load)."""

    model_type = "sink_probe_llama"


class SinkProbeQwen2Config(Qwen2Config):
    """``Qwen2Config`` with a ``sink_probe_config`` field (the patch to rebuild on load)."""

    model_type = "sink_probe_qwen2"


class SinkProbeLlamaForCausalLM(LlamaForCausalLM):
    """A Llama with the interventions named in ``config.sink_probe_config``."""

    config_class = SinkProbeLlamaConfig

    def __init__(self, config: SinkProbeLlamaConfig) -> None:
        super().__init__(config)
        _install(self, InterventionConfig.from_dict(getattr(config, CONFIG_FIELD, {}) or {}))


class SinkProbeQwen2ForCausalLM(Qwen2ForCausalLM):
    """A Qwen2 with the interventions named in ``config.sink_probe_config``."""

    config_class = SinkProbeQwen2Config

    def __init__(self, config: SinkProbeQwen2Config) -> None:
        super().__init__(config)
        _install(self, InterventionConfig.from_dict(getattr(config, CONFIG_FIELD, {}) or {}))


_PATCHED = {
    LlamaForCausalLM: (SinkProbeLlamaForCausalLM, SinkProbeLlamaConfig),
    Qwen2ForCausalLM: (SinkProbeQwen2ForCausalLM, SinkProbeQwen2Config),
}
SUPPORTED = tuple(c.__name__ for c in _PATCHED)


def register() -> None:
    """Register the patched classes with ``AutoConfig``/``AutoModelForCausalLM`` so that
    ``from_pretrained`` (and :func:`llmcore.load_causal_lm`) restores saved variants."""
    for model_cls, cfg_cls in _PATCHED.values():
        AutoConfig.register(cfg_cls.model_type, cfg_cls, exist_ok=True)
        AutoModelForCausalLM.register(cfg_cls, model_cls, exist_ok=True)


def patch_model(model: nn.Module, cfg: InterventionConfig, *, seed: int = 0) -> nn.Module:
    """Add ``cfg``'s training-time interventions to a Llama/Qwen2 causal LM in place (new
    parameters drawn with ``seed``); returns the same object, now a patched subclass."""
    return convert_model(model, cfg, _PATCHED, register, _install, seed=seed)


def convert_model(
    model: nn.Module,
    cfg: Any,
    patched: dict[type, tuple[type, type]],
    register_fn: Callable[[], None],
    install: Callable[[nn.Module, Any], None],
    *,
    seed: int,
) -> nn.Module:
    """Turn ``model`` into its patched class from ``patched`` (model class -> (patched model
    class, patched config class)), record ``cfg`` in the config and run ``install`` with the RNG
    seeded by ``seed``; shared by every training-time patch module."""
    if getattr(model.config, CONFIG_FIELD, None):
        raise SinkProbeConfigError(
            "model is already patched with "
            f"{getattr(model.config, CONFIG_FIELD)}; patch a fresh model instead"
        )
    target = next((v for k, v in patched.items() if type(model) is k), None)
    if target is None:
        raise UnsupportedArchitecture(
            f"patch_model supports {', '.join(SUPPORTED)}; got {type(model).__name__}. "
            "Inference-time hooks (sink_probe.intervene) work on any HF model."
        )
    register_fn()
    model_cls, cfg_cls = target
    model.config.__class__ = cfg_cls
    setattr(model.config, CONFIG_FIELD, cfg.to_dict())
    model.__class__ = model_cls
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        install(model, cfg)
    return model


def config_of(model: nn.Module) -> InterventionConfig:
    """The training-time interventions of ``model`` (all off for an unpatched model)."""
    return InterventionConfig.from_dict(getattr(model.config, CONFIG_FIELD, None) or {})


def clip_stats(model: nn.Module) -> dict[str, Any]:
    """Clamp counts of ``suppress_massive`` since the last :func:`reset_clip_stats`:
    ``{"clip_fraction": float, "per_layer": [...], "clipped": int, "seen": int}``."""
    st = getattr(model, "_sink_probe_state", None)
    if st is None or not st["seen"]:
        return {"clip_fraction": 0.0, "per_layer": [], "clipped": 0, "seen": 0}
    clipped, seen = st["clipped"], st["seen"]
    return {
        "clip_fraction": sum(clipped) / max(1, sum(seen)),
        "per_layer": [c / max(1, s) for c, s in zip(clipped, seen, strict=True)],
        "clipped": int(sum(clipped)),
        "seen": int(sum(seen)),
    }


def reset_clip_stats(model: nn.Module) -> None:
    """Zero the ``suppress_massive`` clamp counters."""
    st = getattr(model, "_sink_probe_state", None)
    if st is not None:
        n = len(st["clipped"])
        st["clipped"], st["seen"] = [0] * n, [0] * n


def sink_positions(sink_set: tuple[int, ...], offset: int, T: int) -> torch.Tensor:
    """Boolean mask over the ``T`` positions of the current forward (absolute start
    ``offset``, e.g. the KV-cache length) that belong to the sink set."""
    m = torch.zeros(T, dtype=torch.bool)
    for s in sink_set:
        if offset <= s < offset + T:
            m[s - offset] = True
    return m


def cache_offset(layer_idx: int, kwargs: dict[str, Any]) -> int:
    """Absolute position of the first token of this forward (the KV-cache length)."""
    cache = kwargs.get("past_key_values")
    if cache is None:
        return 0
    try:
        return int(cache.get_seq_length(layer_idx))
    except Exception:
        return 0


def _install(model: nn.Module, cfg: InterventionConfig) -> None:
    layers = model.model.layers
    model._sink_probe_state = {"clipped": [0] * len(layers), "seen": [0] * len(layers)}
    if not cfg.active:
        return
    state = model._sink_probe_state
    conf = model.config
    H = conf.num_attention_heads
    dh = getattr(conf, "head_dim", None) or conf.hidden_size // H
    for li, layer in enumerate(layers):
        attn = layer.self_attn
        ctx: dict[str, Any] = {"offset": 0, "x": None}

        def pre_attn(mod, args, kwargs, ctx=ctx, li=li):
            ctx["offset"] = cache_offset(li, kwargs)
            ctx["x"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

        attn.register_forward_pre_hook(pre_attn, with_kwargs=True)
        if cfg.gate:
            attn.sink_gate = nn.Linear(conf.hidden_size, H * dh, bias=False)
            nn.init.normal_(attn.sink_gate.weight, std=0.02)
        if cfg.attn_out_norm:
            attn.sink_out_norm = nn.RMSNorm(dh, eps=conf.rms_norm_eps)
        if cfg.qk_norm:
            attn.sink_q_norm = nn.RMSNorm(dh, eps=conf.rms_norm_eps)
            attn.sink_k_norm = nn.RMSNorm(dh, eps=conf.rms_norm_eps)

            def q_hook(mod, args, out, attn=attn):
                return _head_norm(attn.sink_q_norm, out, dh)

            def k_hook(mod, args, out, attn=attn):
                return _head_norm(attn.sink_k_norm, out, dh)

            attn.q_proj.register_forward_hook(q_hook)
            attn.k_proj.register_forward_hook(k_hook)
        if cfg.gate or cfg.attn_out_norm:

            def o_pre(mod, args, attn=attn, ctx=ctx):
                y = args[0]
                if cfg.attn_out_norm:
                    y = _head_norm(attn.sink_out_norm, y, dh)
                if cfg.gate:
                    y = y * torch.sigmoid(attn.sink_gate(ctx["x"]))
                return (y, *args[1:])

            attn.o_proj.register_forward_pre_hook(o_pre)
        if cfg.zero_sink_value:

            def v_hook(mod, args, out, ctx=ctx):
                m = sink_positions(cfg.sink_set, ctx["offset"], out.shape[1]).to(out.device)
                return out.masked_fill(m[None, :, None], 0.0)

            attn.v_proj.register_forward_hook(v_hook)
        if cfg.suppress_massive is not None:
            level = float(cfg.suppress_massive)

            def clamp_hook(mod, args, out, ctx=ctx, li=li, level=level):
                x = out[0] if isinstance(out, tuple) else out
                m = sink_positions(cfg.sink_set, ctx["offset"], x.shape[1]).to(x.device)
                if not bool(m.any()):
                    return None
                c = level * x.detach().abs().median()
                mask = m[None, :, None]
                over = (x.detach().abs() > c) & mask
                state["clipped"][li] += int(over.sum())
                state["seen"][li] += int(m.sum()) * x.shape[0] * x.shape[2]
                y = torch.where(mask, x.clamp(-c, c), x)
                return (y, *out[1:]) if isinstance(out, tuple) else y

            layer.register_forward_hook(clamp_hook)


def _head_norm(norm: nn.Module, y: torch.Tensor, dh: int) -> torch.Tensor:
    shape = y.shape
    return norm(y.view(*shape[:-1], shape[-1] // dh, dh)).view(shape)
