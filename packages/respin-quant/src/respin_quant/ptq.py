"""Post-training quantisation of a (rotated) model: RTN or GPTQ weights, per-token activations,
KV cache. Every decoder linear becomes a :class:`FakeQuantLinear`; embeddings and
lm_head stay FP unless ``quantize_lm_head``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from respin_quant.arch import check_model, get_state, layers
from respin_quant.config import QuantConfig
from respin_quant.errors import CalibrationDataError, RotationError
from respin_quant.kv import attach_kv_quant
from respin_quant.quant import (
    ActQuantizer,
    FakeQuantLinear,
    gptq_quantize_weight,
    packed_weight_bytes,
    rtn_quantize_weight,
)

LINEAR_GROUPS = (
    ("self_attn", ("q_proj", "k_proj", "v_proj")),
    ("self_attn", ("o_proj",)),
    ("mlp", ("gate_proj", "up_proj")),
    ("mlp", ("down_proj",)),
)


class _Stop(Exception):
    pass


def _check_groups(model: nn.Module, q: QuantConfig) -> None:
    for layer in layers(model):
        for blk, names in LINEAR_GROUPS:
            for n in names:
                lin = getattr(getattr(layer, blk), n)
                cols = lin.in_features
                for nm, g in (("w_groupsize", q.w_groupsize), ("a_groupsize", q.a_groupsize)):
                    if g != -1 and cols % g:
                        _group_error(nm, g, n, cols)


def _group_error(nm: str, g: int, n: str, cols: int) -> None:
    from respin_quant.errors import RespinConfigError

    raise RespinConfigError(
        f"{nm}={g} does not divide the {cols} input channels of {n}: use a divisor or -1"
    )


def _wq(w: Tensor, q: QuantConfig) -> tuple[Tensor, Tensor]:
    return rtn_quantize_weight(  # type: ignore[return-value]
        w,
        q.w_bits,
        q.w_groupsize,
        clip=q.w_clip,
        clip_min=q.w_clip_min,
        grid=q.w_clip_grid,
        return_scale=True,
    )


@torch.no_grad()
def _hessians(
    model: nn.Module, layer_idx: int, blk: str, name: str, calib_ids: Tensor, batch: int = 8
) -> Tensor:
    """X^T X / n of the FP input to ``layers[layer_idx].blk.name`` (forward stops right there)."""
    lin = getattr(getattr(layers(model)[layer_idx], blk), name)
    acc: dict[str, Any] = {"H": None, "n": 0}

    def hook(_m: nn.Module, args: tuple[Any, ...]) -> None:
        x = args[0].detach().double().reshape(-1, args[0].shape[-1])
        h = x.T @ x
        acc["H"] = h if acc["H"] is None else acc["H"] + h
        acc["n"] += x.shape[0]
        raise _Stop

    # capture before the activation quantiser (FakeQuantLinear applies it inside forward)
    handle = lin.register_forward_pre_hook(hook)
    dev = next(model.parameters()).device
    try:
        for s in range(0, calib_ids.shape[0], batch):
            with contextlib.suppress(_Stop):
                model(calib_ids[s : s + batch].to(dev))
    finally:
        handle.remove()
    return acc["H"] / max(acc["n"], 1)


@torch.no_grad()
def quantize(
    model: nn.Module, q: QuantConfig, calib_ids: Tensor | None = None, *, progress: bool = False
) -> nn.Module:
    """Replace decoder linears by fake-quant linears, in place.

    RTN needs no data; GPTQ quantises layer by layer in order (q/k/v, o, gate/up, down), each
    group's Hessian taken from ``calib_ids`` [N, T] flowing through the already-quantised prefix.
    """
    check_model(model)
    st = get_state(model)
    if st.get("quantized"):
        raise RotationError("the model is already quantised; start from a fresh copy")
    _check_groups(model, q)
    if q.weight_quantizer == "gptq" and q.w_bits < 16:
        if calib_ids is None:
            raise CalibrationDataError("GPTQ needs calibration token ids (calib_ids [N, T])")
        if calib_ids.ndim != 2 or calib_ids.shape[0] < q.gptq_nsamples:
            raise CalibrationDataError(
                f"GPTQ needs at least gptq_nsamples={q.gptq_nsamples} calibration sequences, got "
                f"{calib_ids.shape[0] if calib_ids.ndim == 2 else 'a tensor of shape ' + str(tuple(calib_ids.shape))}"
                ": pass more data or lower gptq_nsamples"
            )
        calib_ids = calib_ids[: q.gptq_nsamples]
    act = ActQuantizer(q.a_bits, q.a_groupsize, q.a_sym, q.a_clip_ratio)
    it = list(enumerate(layers(model)))
    for i, layer in tqdm(it, desc="quantize", disable=not progress):
        for blk, names in LINEAR_GROUPS:
            parent = getattr(layer, blk)
            H = None
            if q.weight_quantizer == "gptq" and q.w_bits < 16:
                H = _hessians(model, i, blk, names[0], calib_ids)  # type: ignore[arg-type]
            for n in names:
                lin = getattr(parent, n)
                scale: Tensor | None
                if H is not None:
                    w, scale = gptq_quantize_weight(
                        lin.weight.data,
                        H,
                        q.w_bits,
                        q.w_groupsize,
                        percdamp=q.gptq_percdamp,
                        blocksize=q.gptq_blocksize,
                        act_order=q.gptq_act_order,
                        clip=q.w_clip,
                        clip_min=q.w_clip_min,
                        grid=q.w_clip_grid,
                        return_scale=True,
                    )
                else:
                    w, scale = _wq(lin.weight.data, q)
                lin.weight.data.copy_(w.to(lin.weight.dtype))
                fq = FakeQuantLinear(lin, act, q.w_bits)
                if q.w_bits < 16:
                    fq.w_scale = scale
                # keep hooks registered on the original module (H_down pre-hook) working
                fq._forward_pre_hooks = lin._forward_pre_hooks
                setattr(parent, n, fq)
    if q.quantize_lm_head:
        lin = model.lm_head
        w, scale = _wq(lin.weight.data, q)
        lin.weight.data.copy_(w)
        lin.w_scale = scale
    _attach_kv(model, q)
    st.update(quantized=True, quant=q.to_dict())
    return model


def _attach_kv(model: nn.Module, q: QuantConfig) -> None:
    st = get_state(model)
    had_qk = st.get("online_had_qk")
    if had_qk is None:
        had_qk = q.k_bits < 16 and bool(st.get("rotated"))
    attach_kv_quant(model, q.k_bits, q.v_bits, q.kv_groupsize, q.kv_sym, bool(had_qk))


def reattach_quantizers(model: nn.Module, q: QuantConfig) -> nn.Module:
    """Wrap linears again around weights that are already on the grid (for loading)."""
    act = ActQuantizer(q.a_bits, q.a_groupsize, q.a_sym, q.a_clip_ratio)
    for layer in layers(model):
        for blk, names in LINEAR_GROUPS:
            parent = getattr(layer, blk)
            for n in names:
                lin = getattr(parent, n)
                fq = FakeQuantLinear(lin, act, q.w_bits)
                fq._forward_pre_hooks = lin._forward_pre_hooks
                setattr(parent, n, fq)
    _attach_kv(model, q)
    get_state(model).update(quantized=True, quant=q.to_dict())
    return model


def weight_bytes(model: nn.Module, q: QuantConfig | None) -> dict[str, int]:
    """Bytes of the decoder linears: fp16 and packed at ``q.w_bits`` (+ FP embeddings/head)."""
    fp16 = packed = 0
    for layer in layers(model):
        for blk, names in LINEAR_GROUPS:
            for n in names:
                lin = getattr(getattr(layer, blk), n)
                rows, cols = lin.weight.shape
                fp16 += rows * cols * 2
                if q is None or q.w_bits >= 16:
                    packed += rows * cols * 2
                else:
                    packed += packed_weight_bytes(rows, cols, q.w_bits, q.w_groupsize)
    other = 2 * (model.model.embed_tokens.weight.numel() + model.lm_head.weight.numel())
    return {"linear_fp16": fp16, "linear_packed": packed, "embed_head_fp16": other}
