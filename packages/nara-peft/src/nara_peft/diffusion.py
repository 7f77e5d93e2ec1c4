"""Masked-diffusion fine-tuning loss and the LLaDA sampler with a per-step noise level.

``diffusion_sft_loss`` is LLaDA's SFT objective as in the reference trainer (spec §2.3);
``generate`` is low-confidence remasking (spec §2.4) passing lambda to NaRA at every step.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F

from llmcore.diffusion import bidirectional_mask
from nara_peft.errors import NaraConfigError, NaraDataError
from nara_peft.noise import compute_noise_level

NATIVE_BIDIRECTIONAL = ("llada",)  # remote-code models that attend bidirectionally themselves


def _forward(model: Any, x: torch.Tensor, lam: torch.Tensor | None, **kw: Any) -> torch.Tensor:
    """Bidirectional logits: a 4-D all-zero additive mask for HF decoders (llmcore), plain
    ``input_ids`` for natively bidirectional models (LLaDA)."""
    if lam is not None:
        kw["noise_level"] = lam
    mtype = getattr(getattr(model, "config", None), "model_type", "")
    if mtype in NATIVE_BIDIRECTIONAL:
        return model(input_ids=x, **kw).logits
    attn = bidirectional_mask(torch.ones_like(x), torch.float32)
    return model(input_ids=x, attention_mask=attn, use_cache=False, **kw).logits


def mask_answers(
    input_ids: torch.Tensor,
    prompt_lengths: torch.Tensor,
    mask_token_id: int,
    generator: torch.Generator | None = None,
    t: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mask exactly k = ceil(t * L_ans) answer positions per row, t ~ U(0, 1) (spec §2.3 step 2).

    Returns ``(noisy, masked [B,T] bool, t [B])``."""
    B, T = input_ids.shape
    pl = torch.as_tensor(prompt_lengths).reshape(-1).to(torch.long)
    if pl.numel() != B:
        raise NaraDataError(f"prompt_lengths has {pl.numel()} entries for a batch of {B}")
    if bool((pl >= T).any()):
        raise NaraDataError(
            f"prompt length {int(pl.max())} >= sequence length {T}: the answer region is empty"
        )
    if t is None:
        t = torch.rand(B, generator=generator)
    l_ans = (T - pl).float()
    k = torch.clamp(torch.ceil(t * l_ans), min=1).to(torch.long)
    pos = torch.arange(T)[None, :]
    answer = pos >= pl[:, None]
    scores = torch.rand(B, T, generator=generator).masked_fill(~answer, 2.0)
    ranks = scores.argsort(dim=1).argsort(dim=1)
    masked = ranks < k[:, None]
    noisy = torch.where(masked, torch.full_like(input_ids, mask_token_id), input_ids)
    return noisy, masked, t


def diffusion_sft_loss(
    model: Any,
    input_ids: torch.Tensor,
    prompt_lengths: torch.Tensor,
    mask_token_id: int,
    generator: torch.Generator | None = None,
    *,
    direct_noise_level: bool = True,
    pass_noise: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """LLaDA SFT loss: sum of masked CE / (L_ans * t), batch mean, lambda = t (spec §2.3).

    ``pass_noise=False`` for plain LoRA/base models (no ``noise_level`` kwarg)."""
    dev = input_ids.device
    noisy, masked, t = mask_answers(input_ids.cpu(), prompt_lengths, mask_token_id, generator)
    noisy, masked, t = noisy.to(dev), masked.to(dev), t.to(dev)
    pl = torch.as_tensor(prompt_lengths).reshape(-1).to(dev)
    l_ans = (input_ids.shape[1] - pl).float()
    lam = t if direct_noise_level else compute_noise_level(noisy, mask_token_id)
    logits = _forward(model, noisy, lam if pass_noise else None)
    ce = F.cross_entropy(logits.float().transpose(1, 2), input_ids, reduction="none")
    per_row = (ce * masked).sum(1) / (l_ans * t.clamp_min(1e-6))
    return per_row.mean(), {"t": t.detach(), "per_row": per_row.detach()}


@torch.no_grad()
def generate(
    model: Any,
    prompt_ids: torch.Tensor,
    *,
    mask_token_id: int,
    steps: int = 128,
    gen_length: int = 128,
    block_length: int = 128,
    temperature: float = 0.0,
    cfg_scale: float = 0.0,
    remasking: Literal["low_confidence", "random"] = "low_confidence",
    eos_token_id: int | None = None,
    inference_noise: Literal["answer", "full_sequence"] = "answer",
    pass_noise: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """LLaDA low-confidence remasking with lambda recomputed at every step (spec §2.4)."""
    if min(steps, gen_length, block_length) <= 0:
        raise NaraConfigError("steps, gen_length and block_length must be positive")
    if gen_length % block_length:
        raise NaraConfigError(f"gen_length={gen_length} is not a multiple of {block_length}")
    n_blocks = gen_length // block_length
    if steps % n_blocks:
        raise NaraConfigError(f"steps={steps} is not a multiple of the {n_blocks} blocks")
    if remasking not in ("low_confidence", "random"):
        raise NaraConfigError(f"remasking={remasking!r}; use 'low_confidence' or 'random'")
    if inference_noise not in ("answer", "full_sequence"):
        raise NaraConfigError(f"inference_noise={inference_noise!r}")
    per_block = steps // n_blocks
    B, P = prompt_ids.shape
    x = torch.full((B, P + gen_length), mask_token_id, dtype=torch.long, device=prompt_ids.device)
    x[:, :P] = prompt_ids
    prompt_region = torch.zeros_like(x, dtype=torch.bool)
    prompt_region[:, :P] = True
    done = torch.zeros(B, dtype=torch.bool, device=x.device)

    def noise_of(canvas: torch.Tensor) -> torch.Tensor | None:
        if not pass_noise:
            return None
        if inference_noise == "answer":
            return compute_noise_level(canvas, mask_token_id, prompt_lengths=torch.full((B,), P))
        return compute_noise_level(canvas, mask_token_id)

    for blk in range(n_blocks):
        lo, hi = P + blk * block_length, P + (blk + 1) * block_length
        n_mask = (x[:, lo:hi] == mask_token_id).sum(1)
        base, rem = n_mask // per_block, n_mask % per_block
        for step in range(per_block):
            is_mask = x == mask_token_id
            if not bool(is_mask.any()):
                break
            lam = noise_of(x)
            if cfg_scale > 0:
                un = x.masked_fill(prompt_region, mask_token_id)
                lam_u = noise_of(un) if inference_noise == "full_sequence" else lam
                cond = _forward(model, x, lam)
                unc = _forward(model, un, lam_u)
                logits = unc + (cfg_scale + 1) * (cond - unc)
            else:
                logits = _forward(model, x, lam)
            if temperature > 0:
                u = torch.rand(logits.shape, dtype=torch.float64, generator=generator)
                g = (-torch.log(u.clamp_min(1e-20))) ** temperature
                x0 = (logits.double().exp() / g.to(logits.device)).argmax(-1)
            else:
                x0 = logits.argmax(-1)
            if remasking == "low_confidence":
                conf = torch.softmax(logits.float(), -1).gather(-1, x0[..., None])[..., 0]
            else:
                conf = torch.rand(x0.shape, generator=generator).to(x.device)
            conf[:, hi:] = -math.inf
            conf = torch.where(is_mask, conf, torch.full_like(conf, -math.inf))
            x0 = torch.where(is_mask, x0, x)
            k = base + (step < rem).long()
            order = conf.argsort(dim=1, descending=True)
            ranks = order.argsort(dim=1)
            sel = (ranks < k[:, None]) & is_mask
            x = torch.where(sel, x0, x)
        if eos_token_id is not None:
            done |= (x[:, lo:hi] == eos_token_id).any(1)
            if bool(done.all()) and hi < x.shape[1]:
                x[:, hi:] = torch.where(
                    x[:, hi:] == mask_token_id, torch.full_like(x[:, hi:], eos_token_id), x[:, hi:]
                )
                break
    return x
