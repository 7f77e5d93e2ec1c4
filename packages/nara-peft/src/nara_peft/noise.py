"""Noise level lambda and noise density, and the noise embeddings e(lambda)."""

from __future__ import annotations

import math

import torch
from torch import nn

from nara_peft.errors import NaraDataError, NaraNoiseLevelError


def compute_noise_level(
    input_ids: torch.Tensor,
    mask_token_id: int,
    prompt_lengths: torch.Tensor | None = None,
    response_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """lambda per row = #MASK among non-prompt positions / #non-prompt positions.

    Without ``prompt_lengths``/``response_mask`` the whole sequence counts (the reference's
    ``direct_noise=False`` evaluation). Returns float32 ``[B]``."""
    if input_ids.dim() != 2:
        raise NaraNoiseLevelError(f"input_ids must be [B, T], got shape {tuple(input_ids.shape)}")
    B, T = input_ids.shape
    region = torch.ones(B, T, dtype=torch.bool, device=input_ids.device)
    if prompt_lengths is not None:
        pl = torch.as_tensor(prompt_lengths, device=input_ids.device).reshape(-1)
        if pl.numel() == 1:
            pl = pl.expand(B)
        if pl.numel() != B:
            raise NaraDataError(f"prompt_lengths has {pl.numel()} entries for a batch of {B}")
        if bool((pl >= T).any()) or bool((pl < 0).any()):
            raise NaraDataError(
                f"prompt_lengths {pl.tolist()} must be in [0, {T}) for sequences of length {T}"
            )
        region &= torch.arange(T, device=input_ids.device)[None, :] >= pl[:, None]
    if response_mask is not None:
        region &= response_mask.to(torch.bool)
    masked = (input_ids == mask_token_id) & region
    return (masked.sum(1).float() / region.sum(1).clamp_min(1).float()).to(torch.float32)


def noise_density(mask: torch.Tensor, radius: int) -> torch.Tensor:
    """Mean local mask density over masked positions.

    Local density at i = #masked in [i-radius, i+radius] without i / #positions there without i;
    the row value averages it over masked positions (0 if none). ``mask``: bool ``[B, T]``."""
    if radius < 1:
        raise NaraNoiseLevelError(f"density radius must be >= 1, got {radius}")
    m = mask.to(torch.float32)
    if m.dim() != 2:
        raise NaraNoiseLevelError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    k = torch.ones(1, 1, 2 * radius + 1, dtype=torch.float32, device=m.device)
    window = torch.nn.functional.conv1d(m[:, None, :], k, padding=radius)[:, 0]  # [B,T]
    ones = torch.ones_like(m)
    count = torch.nn.functional.conv1d(ones[:, None, :], k, padding=radius)[:, 0]
    local = (window - m) / (count - 1).clamp_min(1)
    n = m.sum(1)
    return torch.where(n > 0, (local * m).sum(1) / n.clamp_min(1), torch.zeros_like(n))


def as_noise_vector(value: object, batch: int | None, name: str = "noise_level") -> torch.Tensor:
    """Validate lambda: scalar or ``[B]`` in [0, 1], finite; returns float32 ``[B]`` (or [1])."""
    if isinstance(value, torch.Tensor):
        t = value.detach().to(torch.float32).reshape(-1)
    else:
        try:
            t = torch.as_tensor(value, dtype=torch.float32).reshape(-1)
        except (TypeError, ValueError, RuntimeError) as e:
            raise NaraNoiseLevelError(
                f"{name} must be a float or a [B] tensor, got {value!r}"
            ) from e
    if t.numel() == 0:
        raise NaraNoiseLevelError(f"{name} is empty")
    if not bool(torch.isfinite(t).all()):
        raise NaraNoiseLevelError(f"{name} contains NaN/inf: {t.tolist()[:8]}")
    if bool((t < 0).any()) or bool((t > 1).any()):
        raise NaraNoiseLevelError(
            f"{name} must lie in [0, 1] (fraction of masked answer tokens), got {t.tolist()[:8]}"
        )
    if batch is not None:
        if t.numel() == 1:
            t = t.expand(batch).clone()
        elif t.numel() != batch:
            raise NaraNoiseLevelError(
                f"{name} has {t.numel()} values but the batch has {batch} rows; pass a scalar "
                "or one value per row"
            )
    return t


class FourierEmbedding(nn.Module):
    """e(lambda) = [sin(lambda f), cos(lambda f)], f ~ N(0, 1) * scale, frozen (no 2*pi, as ref)."""

    def __init__(self, dim: int, scale: float, seed: int) -> None:
        super().__init__()
        g = torch.Generator(device="cpu").manual_seed(seed)
        freqs = torch.randn(1, dim // 2, generator=g, dtype=torch.float32) * scale
        self.register_buffer("freqs", freqs, persistent=True)

    def forward(self, lam: torch.Tensor) -> torch.Tensor:
        z = lam.to(torch.float32)[:, None] * self.freqs.to(torch.float32)
        return torch.cat([torch.sin(z), torch.cos(z)], dim=-1)


class MLPEmbedding(nn.Module):
    """Learnable e(lambda) = SiLU(Linear(1, m) lambda)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(1, dim)

    def forward(self, lam: torch.Tensor) -> torch.Tensor:
        return nn.functional.silu(self.proj(lam.to(torch.float32)[:, None]))


class RawEmbedding(nn.Module):
    """e(lambda) = lambda (width 1)."""

    def forward(self, lam: torch.Tensor) -> torch.Tensor:
        return lam.to(torch.float32)[:, None]


def make_embedding(kind: str, dim: int, scale: float, seed: int) -> nn.Module:
    """The embedding module of ``embedding_type``."""
    if kind == "fourier":
        return FourierEmbedding(dim, scale, seed)
    if kind == "mlp":
        return MLPEmbedding(dim)
    return RawEmbedding()


def make_mapper(in_dim: int, h1: int, h2: int, r: int, init: str) -> nn.Sequential:
    """F_phi: Linear(in, h1) -> SiLU -> Linear(h1, h2) -> SiLU -> Linear(h2, r*r), float32."""
    net = nn.Sequential(
        nn.Linear(in_dim, h1), nn.SiLU(), nn.Linear(h1, h2), nn.SiLU(), nn.Linear(h2, r * r)
    )
    linears = [m for m in net if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for i, lin in enumerate(linears):
            if init == "zero_all" or (init == "zero_last" and i == len(linears) - 1):
                lin.weight.zero_()
            else:
                nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5))
            lin.bias.zero_()
    return net.float()
