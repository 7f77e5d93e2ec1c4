"""Adapters: activations from TransformerLens or nnsight in the layout of :mod:`sink_probe.metrics`.

Both return an :class:`Activations` whose fields feed :func:`~sink_probe.metrics.sink_rate`,
:func:`~sink_probe.metrics.sink_mass`, :func:`~sink_probe.metrics.mixing_metrics` and
:func:`~sink_probe.metrics.detect_massive` directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from sink_probe.errors import SinkProbeInputError


@dataclass
class Activations:
    """``attn [N,L,H,T,T]``, ``values [N,L,H,T,dh]``, ``w_o [L,d,H*dh]``, ``hidden [N,L+1,T,d]``
    (index 0 = the first block's input, then every block's output)."""

    attn: torch.Tensor
    values: torch.Tensor | None
    w_o: torch.Tensor | None
    hidden: torch.Tensor | None

    def mixing(self, sink_set=(0,)) -> dict[int, dict[str, float]]:
        """:func:`~sink_probe.metrics.mixing_metrics` on these activations."""
        from sink_probe.metrics import mixing_metrics

        return mixing_metrics(self.attn, self.values, self.w_o, self.hidden, sink_set)


def from_transformer_lens(cache: Any, model: Any | None = None) -> Activations:
    """From a TransformerLens ``ActivationCache`` (``run_with_cache``): hook names
    ``blocks.{l}.attn.hook_pattern``, ``hook_v``, ``hook_resid_pre``/``hook_resid_post``;
    ``W_O`` from ``model`` (a ``HookedTransformer``) when given."""
    keys = set(cache.keys())
    L = 0
    while f"blocks.{L}.attn.hook_pattern" in keys:
        L += 1
    if L == 0:
        raise SinkProbeInputError(
            "the cache has no blocks.{l}.attn.hook_pattern entries; run model.run_with_cache "
            "without a names_filter that drops them"
        )
    attn = torch.stack([cache[f"blocks.{i}.attn.hook_pattern"] for i in range(L)], 1)
    values = None
    if "blocks.0.attn.hook_v" in keys:
        v = [cache[f"blocks.{i}.attn.hook_v"] for i in range(L)]  # [N,T,Hkv,dh]
        H = attn.shape[2]
        values = torch.stack(
            [x.repeat_interleave(H // x.shape[2], 2).transpose(1, 2) for x in v], 1
        )
    hidden = None
    if "blocks.0.hook_resid_pre" in keys and f"blocks.{L - 1}.hook_resid_post" in keys:
        hidden = torch.stack(
            [cache["blocks.0.hook_resid_pre"]]
            + [cache[f"blocks.{i}.hook_resid_post"] for i in range(L)],
            1,
        )
    w_o = None
    if model is not None:
        W = model.W_O.detach()  # [L,H,dh,d]
        w_o = W.permute(0, 3, 1, 2).reshape(W.shape[0], W.shape[3], -1)
    return Activations(attn.detach(), values, w_o, hidden)


def from_nnsight(model: Any, input_ids: torch.Tensor) -> Activations:
    """Trace an nnsight ``LanguageModel`` wrapping a Llama-style HF model loaded with
    ``attn_implementation="eager"``; saves each layer's attention maps, values and the block
    inputs/outputs inside one ``model.trace``."""
    try:
        import nnsight  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SinkProbeInputError(
            "from_nnsight needs the nnsight extra: pip install 'sink-probe[nnsight]'"
        ) from exc
    layers = model.model.layers
    saved: list[tuple[Any, Any, Any]] = []
    with model.trace(input_ids):
        first_in = layers[0].input.save()
        for layer in layers:
            v = layer.self_attn.v_proj.output.save()  # nnsight wants execution order
            a = layer.self_attn.output[1].save()
            saved.append((a, v, layer.output.save()))

    def val(x):
        return getattr(x, "value", x)

    attn = torch.stack([val(a) for a, _, _ in saved], 1)
    H = attn.shape[2]
    vals = []
    for _, v, _ in saved:
        v = val(v)
        n, t, _ = v.shape
        dh = layers[0].self_attn.head_dim
        v = v.view(n, t, -1, dh).transpose(1, 2)
        vals.append(v.repeat_interleave(H // v.shape[1], 1))
    outs = [val(o) for _, _, o in saved]
    outs = [o[0] if isinstance(o, tuple) else o for o in outs]
    hidden = torch.stack([val(first_in), *outs], 1)
    w_o = torch.stack(
        [layer.self_attn.o_proj.weight.detach() for layer in model._module.model.layers]
    )
    return Activations(attn.detach(), torch.stack(vals, 1).detach(), w_o, hidden.detach())
