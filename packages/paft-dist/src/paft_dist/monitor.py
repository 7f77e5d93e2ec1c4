"""Replica-divergence monitor: 64-bit fingerprints, measured and predicted replica divergence.

Every function that takes a process group is a collective: all ranks must call it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from paft_dist.errors import PAFTConfigError

_INT_VIEW = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def int_view(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a floating tensor as a same-width integer tensor (flattened)."""
    flat = t.detach().reshape(-1)
    if flat.dtype in _INT_VIEW:
        return flat.contiguous().view(_INT_VIEW[flat.dtype])
    if flat.dtype.is_floating_point:
        raise TypeError(f"no integer view for dtype {flat.dtype}")
    return flat


def tensor_fingerprint(t: torch.Tensor | Sequence[torch.Tensor]) -> int:
    """64-bit position-weighted checksum of the raw bits: sum_i (i+1)*bits_i mod 2^64.

    Order-sensitive; a single flipped bit changes it for any tensor below 2^33 elements.
    """
    if isinstance(t, torch.Tensor):
        bits = int_view(t).to(torch.int64)
    else:
        parts = [int_view(x).to(torch.int64) for x in t]
        bits = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)
    if bits.numel() == 0:
        return 0
    w = torch.arange(1, bits.numel() + 1, dtype=torch.int64, device=bits.device)
    return int((bits * w).sum().item())  # int64 arithmetic wraps modulo 2^64


def flat_parameters(module: torch.nn.Module, dtype: torch.dtype | None = None) -> torch.Tensor:
    """All floating parameters of `module`, in `parameters()` order, as one flat detached copy."""
    ps = [p.detach().reshape(-1) for p in module.parameters() if p.is_floating_point()]
    flat = torch.cat(ps) if ps else torch.zeros(0)
    return flat.to(dtype) if dtype is not None else flat.clone()


@dataclass
class DivergenceStats:
    """||theta^m - mean|| for every rank (the divergence Delta_t^m of replica m)."""

    per_rank: list[float]
    mean_norm: float
    max: float = field(init=False)
    mean: float = field(init=False)
    relative: float = field(init=False)

    def __post_init__(self) -> None:
        self.max = max(self.per_rank) if self.per_rank else 0.0
        self.mean = sum(self.per_rank) / len(self.per_rank) if self.per_rank else 0.0
        self.relative = self.max / self.mean_norm if self.mean_norm > 0 else 0.0


def parameter_divergence(
    model: torch.nn.Module | torch.Tensor, group: dist.ProcessGroup | None = None
) -> DivergenceStats:
    """Collective: max/mean ||theta^m - theta_bar|| over ranks, in float64.

    The float64 sum of M identical float32 values divided by M is exact, so bitwise-identical
    replicas give exactly 0.0.
    """
    flat = model.detach().reshape(-1) if isinstance(model, torch.Tensor) else flat_parameters(model)
    x = flat.to(torch.float64)
    m = dist.get_world_size(group)
    mean = x.clone()
    dist.all_reduce(mean, group=group)
    mean /= m
    dev = torch.linalg.vector_norm(x - mean).reshape(1)
    devs = [torch.zeros_like(dev) for _ in range(m)]
    dist.all_gather(devs, dev, group=group)
    return DivergenceStats(
        per_rank=[float(d.item()) for d in devs],
        mean_norm=float(torch.linalg.vector_norm(mean).item()),
    )


@dataclass
class ReplicaReport:
    """Fingerprints of every rank's parameters (and optimizer state) and who disagrees."""

    fingerprints: list[int]
    majority: int | None
    mismatching_ranks: list[int]

    @property
    def consistent(self) -> bool:
        return len(set(self.fingerprints)) == 1


def gather_fingerprints(fp: int, group: dist.ProcessGroup | None = None) -> list[int]:
    """Collective: all ranks' 64-bit fingerprints (8 bytes per rank)."""
    m = dist.get_world_size(group)
    t = torch.tensor([fp], dtype=torch.int64)
    out = [torch.zeros_like(t) for _ in range(m)]
    dist.all_gather(out, t, group=group)
    return [int(x.item()) for x in out]


def majority_of(fps: Sequence[int]) -> int | None:
    """The value held by a strict majority of ranks, or None."""
    for v in set(fps):
        if 2 * sum(1 for f in fps if f == v) > len(fps):
            return v
    return None


def optimizer_state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Floating, non-scalar state tensors of every parameter (moments, momentum buffers)."""
    out: list[torch.Tensor] = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key in sorted(optimizer.state.get(p, {})):
                v = optimizer.state[p][key]
                if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dim() > 0:
                    out.append(v)
    return out


def check_replicas(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    group: dist.ProcessGroup | None = None,
) -> ReplicaReport:
    """Collective: fingerprint parameters (+ optimizer state) on every rank and compare."""
    tensors = [p for p in model.parameters() if p.is_floating_point()]
    if optimizer is not None:
        tensors += optimizer_state_tensors(optimizer)
    fps = gather_fingerprints(tensor_fingerprint(tensors), group)
    maj = majority_of(fps)
    bad = [r for r, f in enumerate(fps) if maj is None or f != maj]
    return ReplicaReport(fps, maj, bad if maj is not None else list(range(len(fps))))


def predicted_divergence(d: int, sigma: float, world_size: int, lrs: Iterable[float]) -> float:
    """sqrt(d sigma^2 (M-1)/M sum_s eta_s^2): the RMS of ||theta_bar - theta^m|| under noisy SGD.

    Exact for plain SGD without weight decay: every replica applies the same mean gradient plus
    its own N(0, sigma^2 I_d) noise, so theta^m - theta_bar is a sum of independent noise steps.
    """
    if world_size < 1 or d < 0 or sigma < 0:
        raise PAFTConfigError(
            f"need d >= 0, sigma >= 0, world_size >= 1 (got {d}, {sigma}, {world_size})"
        )
    s = sum(float(e) ** 2 for e in lrs)
    return math.sqrt(d * sigma**2 * (world_size - 1) / world_size * s)
