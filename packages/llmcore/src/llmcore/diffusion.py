"""Masked diffusion LMs (LLaDA-style) on top of ordinary transformers decoders.

A Llama/Qwen2 ``*ForCausalLM`` becomes a bidirectional denoiser when it is given an explicit
4-D additive attention mask that allows every (query, key) pair: transformers passes a 4-D mask
through unchanged, so no model code is patched. Training uses the LLaDA objective
(Nie et al., 2025, Eq. 3): mask each token with probability t ~ U(eps, 1) and weight the
cross-entropy of the masked positions by 1/t. Sampling is LLaDA's block-wise iterative
unmasking by confidence with a fixed number of steps per block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from llmcore.errors import ConfigError

if TYPE_CHECKING:
    import torch


def bidirectional_mask(
    attention_mask: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """4-D additive mask ``[B, 1, T, T]`` letting every query attend to every non-pad key.

    ``attention_mask`` is the usual ``[B, T]`` 0/1 padding mask."""
    import torch

    dtype = dtype or torch.float32
    keys = attention_mask[:, None, None, :].to(torch.bool)  # [B,1,1,T]
    mask = torch.zeros(
        attention_mask.shape[0],
        1,
        attention_mask.shape[1],
        attention_mask.shape[1],
        dtype=dtype,
        device=attention_mask.device,
    )
    return mask.masked_fill(~keys, torch.finfo(dtype).min)


def diffusion_logits(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Bidirectional forward pass: logits ``[B, T, V]`` for every position (no shift)."""
    import torch

    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    dtype = next(model.parameters()).dtype
    out = model(
        input_ids=input_ids,
        attention_mask=bidirectional_mask(attention_mask, dtype),
        use_cache=False,
    )
    return out.logits


def masked_diffusion_loss(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    mask_token_id: int,
    *,
    attention_mask: torch.Tensor | None = None,
    prompt_lengths: torch.Tensor | None = None,
    eps: float = 1e-3,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """LLaDA loss: ``E_t[ (1/t) * sum_masked CE ] / #tokens`` with t ~ U(eps, 1) per sequence.

    Positions before ``prompt_lengths[b]`` (SFT prompts) and padding are never masked and never
    scored. The normaliser is the number of scorable tokens, as in LLaDA's pre-training loss."""
    import torch
    import torch.nn.functional as F

    if not 0.0 < eps < 1.0:
        raise ConfigError(f"eps must be in (0, 1), got {eps}")
    B, T = input_ids.shape
    dev = input_ids.device
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    scorable = attention_mask.bool()
    if prompt_lengths is not None:
        pos = torch.arange(T, device=dev)[None, :]
        scorable &= pos >= prompt_lengths.to(dev)[:, None]
    # Draw on the generator's device (CPU generators drive CUDA models too), then move.
    gdev = generator.device if generator is not None else dev
    t = (eps + (1 - eps) * torch.rand(B, 1, device=gdev, generator=generator)).to(dev)
    masked = (torch.rand(B, T, device=gdev, generator=generator).to(dev) < t) & scorable
    noisy = torch.where(masked, torch.full_like(input_ids, mask_token_id), input_ids)
    logits = diffusion_logits(model, noisy, attention_mask)
    ce = F.cross_entropy(logits.float().transpose(1, 2), input_ids, reduction="none")  # [B,T]
    weighted = (ce / t) * masked
    return weighted.sum() / scorable.sum().clamp_min(1)


def _add_gumbel_noise(logits: torch.Tensor, temperature: float, generator) -> torch.Tensor:
    import torch

    if temperature == 0:
        return logits
    # LLaDA samples with Gumbel-max in float64 for low-precision robustness.
    # Draw on the generator's device (a CPU generator drives a CUDA model too), then move.
    gdev = generator.device if generator is not None else logits.device
    u = torch.rand(logits.shape, dtype=torch.float64, device=gdev, generator=generator)
    u = u.to(logits.device)
    gumbel = (-torch.log(u.clamp_min(1e-20))) ** temperature
    return logits.double().exp() / gumbel


def llada_generate(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    mask_token_id: int,
    *,
    gen_length: int = 32,
    steps: int = 32,
    block_length: int = 32,
    temperature: float = 0.0,
    remasking: Literal["low_confidence", "random"] = "low_confidence",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """LLaDA's basic sampler: fill ``gen_length`` masks after the prompt, block by block
    (``block_length``), unmasking ``steps / #blocks`` tokens per step, the most confident first.

    ``prompt_ids`` is ``[B, P]`` (same prompt length in a batch). Returns ``[B, P+gen_length]``
    with no mask token left."""
    import torch

    if gen_length <= 0 or steps <= 0 or block_length <= 0:
        raise ConfigError("gen_length, steps and block_length must be positive")
    if gen_length % block_length:
        raise ConfigError(
            f"gen_length={gen_length} must be a multiple of block_length={block_length}"
        )
    n_blocks = gen_length // block_length
    if steps % n_blocks:
        raise ConfigError(f"steps={steps} must be a multiple of the number of blocks {n_blocks}")
    if remasking not in ("low_confidence", "random"):
        raise ConfigError(f"remasking must be 'low_confidence' or 'random', got {remasking!r}")
    steps_per_block = steps // n_blocks
    B, P = prompt_ids.shape
    dev = prompt_ids.device
    x = torch.full((B, P + gen_length), mask_token_id, dtype=torch.long, device=dev)
    x[:, :P] = prompt_ids
    with torch.no_grad():
        for blk in range(n_blocks):
            lo, hi = P + blk * block_length, P + (blk + 1) * block_length
            n_masked = (x[:, lo:hi] == mask_token_id).sum(1)  # [B]
            # Spread the block's masks evenly over its steps (earlier steps take the remainder).
            base, rem = n_masked // steps_per_block, n_masked % steps_per_block
            for step in range(steps_per_block):
                is_mask = x == mask_token_id
                logits = diffusion_logits(model, x)
                x0 = _add_gumbel_noise(logits, temperature, generator).argmax(-1)
                if remasking == "low_confidence":
                    conf = torch.softmax(logits.double(), -1).gather(-1, x0[..., None])[..., 0]
                else:
                    gdev = generator.device if generator is not None else dev
                    conf = torch.rand(
                        x.shape, dtype=torch.float64, device=gdev, generator=generator
                    ).to(dev)
                conf[:, hi:] = -torch.inf
                x0 = torch.where(is_mask, x0, x)
                conf = torch.where(is_mask, conf, torch.full_like(conf, -torch.inf))
                k = base + (step < rem).long()
                for b in range(B):
                    if k[b] > 0:
                        idx = torch.topk(conf[b], int(k[b])).indices
                        x[b, idx] = x0[b, idx]
    return x
