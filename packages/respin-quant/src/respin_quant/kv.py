"""KV-cache fake quantisation with the optional Q/K Hadamard (SpinQuant's R3).

transformers dispatches attention through ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``
after RoPE and the cache update; we register one wrapper implementation that rotates Q and K by
H (q k^T is unchanged), fake-quantises K and V per (token, head-group) and then calls the
original implementation. No modeling code is forked.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from respin_quant.errors import RespinConfigError
from respin_quant.hadamard import hadamard_transform, is_pow2
from respin_quant.quant import quantize_asym, quantize_sym_act, ste

IMPL_NAME = "respin_kv"


def _wrapper(
    module: nn.Module, query: Tensor, key: Tensor, value: Tensor, *args: Any, **kw: Any
) -> Any:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    cfg = getattr(module, "_respin_kv", None)
    base = module.config._respin_base_attn  # type: ignore[union-attr]
    if cfg is not None:
        k_bits, v_bits, group, sym, had, use_ste = cfg
        if had:
            query, key = hadamard_transform(query), hadamard_transform(key)
        f = quantize_sym_act if sym else quantize_asym

        def qk(x: Tensor, bits: int) -> Tensor:
            if bits >= 16:
                return x
            g = group if group < x.shape[-1] else -1
            fn = lambda t: f(t, bits, g, 1.0)  # noqa: E731
            return ste(fn, x) if use_ste else fn(x)

        key, value = qk(key, k_bits), qk(value, v_bits)
    if base == "eager":
        from transformers.models.llama.modeling_llama import eager_attention_forward

        return eager_attention_forward(module, query, key, value, *args, **kw)
    return ALL_ATTENTION_FUNCTIONS[base](module, query, key, value, *args, **kw)


def _register() -> None:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    ALL_ATTENTION_FUNCTIONS.register(IMPL_NAME, _wrapper)
    ALL_MASK_ATTENTION_FUNCTIONS.register(IMPL_NAME, sdpa_mask)


def attach_kv_quant(
    model: nn.Module,
    k_bits: int,
    v_bits: int,
    groupsize: int,
    sym: bool,
    had_qk: bool,
    *,
    use_ste: bool = False,
) -> None:
    """Route every attention layer through the KV fake-quant wrapper (idempotent)."""
    if k_bits >= 16 and v_bits >= 16 and not had_qk:
        return
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if had_qk and not is_pow2(head_dim):
        raise RespinConfigError(
            f"the Q/K Hadamard (needed when k_bits < 16) requires a power-of-two head dim, got "
            f"{head_dim}: keep k_bits=16 or set online_had_qk=False"
        )
    g = min(groupsize, head_dim) if groupsize != -1 else head_dim
    if head_dim % g:
        raise RespinConfigError(f"kv_groupsize {groupsize} does not divide head dim {head_dim}")
    _register()
    if cfg._attn_implementation != IMPL_NAME:
        cfg._respin_base_attn = cfg._attn_implementation or "sdpa"
        cfg._attn_implementation = IMPL_NAME
    for layer in model.model.layers:
        layer.self_attn._respin_kv = (k_bits, v_bits, g, sym, had_qk, use_ste)


def detach_kv_quant(model: nn.Module) -> None:
    cfg = model.config
    if cfg._attn_implementation == IMPL_NAME:
        cfg._attn_implementation = cfg._respin_base_attn
    for layer in model.model.layers:
        if hasattr(layer.self_attn, "_respin_kv"):
            del layer.self_attn._respin_kv


__all__ = ["attach_kv_quant", "detach_kv_quant", "torch"]
