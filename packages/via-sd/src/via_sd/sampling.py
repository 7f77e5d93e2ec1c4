"""Logits processing and the speculative-sampling step (Leviathan et al. 2023; Chen et al.
2023)."""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from via_sd.config import ViaSDConfig


class Sampler:
    """The shared logits processors (temperature, top-k, top-p) plus a seeded generator."""

    def __init__(self, config: ViaSDConfig, device: torch.device | str = "cpu") -> None:
        self.config = config
        self.greedy = config.greedy
        self.generator = torch.Generator(device="cpu").manual_seed(config.seed)
        self._rng = random.Random(config.seed)  # accept/reject uniforms (cheap per call)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Processed distribution(s) over the vocabulary for ``logits [..., V]``."""
        logits = logits.float()
        if self.greedy:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        x = logits / self.config.temperature
        k = self.config.top_k
        if k is not None and k < x.shape[-1]:
            kth = torch.topk(x, k, dim=-1).values[..., -1:]
            x = x.masked_fill(x < kth, float("-inf"))
        p = self.config.top_p
        if p is not None and p < 1.0:
            sp, si = torch.sort(x, descending=True, dim=-1)
            cum = torch.softmax(sp, -1).cumsum(-1)
            drop = cum - torch.softmax(sp, -1) >= p  # keep the smallest prefix reaching p
            sp = sp.masked_fill(drop, float("-inf"))
            x = torch.full_like(x, float("-inf")).scatter(-1, si, sp)
        return torch.softmax(x, -1)

    def sample(self, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs.cpu().float(), 1, generator=self.generator))

    def uniform(self) -> float:
        return self._rng.random()

    def pick(self, logits: torch.Tensor) -> int:
        """argmax when greedy, else a sample from the processed distribution."""
        if self.greedy:
            return int(logits.argmax())
        return self.sample(self.probs(logits))


def speculative_step(
    token: int, p: torch.Tensor, q: torch.Tensor, sampler: Sampler
) -> tuple[int, bool]:
    """One speculative-sampling test of ``token`` ~ p against target ``q``.

    Accept with probability min(1, q(x)/p(x)); otherwise sample from norm(max(0, q - p)).
    The emitted token is then distributed exactly as q. Returns ``(token, accepted)``."""
    px, qx = float(p[token]), float(q[token])
    if px <= 0.0 or sampler.uniform() < min(1.0, qx / px):
        return token, True
    resid = (q - p).clamp_min(0.0)
    z = float(resid.sum())
    return sampler.sample(resid / z if z > 0 else q), False


def route(r: float, tau_accept: float, tau_escalate: float) -> str:
    """Tier of a draft with confidence ratio ``r``: 'a', 'b' or 'c'."""
    if r >= tau_accept:
        return "a"
    return "b" if r >= tau_escalate else "c"


def via_sample_step(
    token: int,
    p: torch.Tensor,
    q_slim: torch.Tensor,
    q_full: Callable[[], torch.Tensor],
    tau_accept: float,
    tau_escalate: float,
    sampler: Sampler,
) -> tuple[int, bool, str]:
    """One VIA-SD sampling-mode position: tier A keeps ``token``; tier B runs the
    speculative-sampling test against q'; tier C against q (``q_full()`` is called only then).
    Returns ``(emitted token, kept draft, tier)``."""
    r = float(q_slim[token] / q_slim.max())
    tier = route(r, tau_accept, tau_escalate)
    if tier == "a":
        return token, True, tier
    t, ok = speculative_step(token, p, q_slim if tier == "b" else q_full(), sampler)
    return t, ok, tier
