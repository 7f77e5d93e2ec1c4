"""Simulated (fake) quantisers.

* weights: per-output-channel (or group-wise) symmetric RTN with an MSE clip search
  (scale = ratio * max|w|, pick the per-row minimiser of sum |q - w|^2.4), or GPTQ;
* activations: per-token asymmetric min/max with a clip ratio, on the input of every linear;
* KV cache: asymmetric per (token, head) groups, K after RoPE and the optional Q/K Hadamard.

Everything returns dequantised floats; ``ste`` wraps a quantiser with a straight-through
estimator for rotation learning.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from respin_quant.errors import RespinConfigError


def _grouped(x: Tensor, groupsize: int) -> tuple[Tensor, tuple[int, ...]]:
    shape = tuple(x.shape)
    if groupsize == -1 or groupsize >= shape[-1]:
        return x, shape
    if shape[-1] % groupsize:
        raise RespinConfigError(
            f"group size {groupsize} does not divide the channel count {shape[-1]}: "
            "pick a divisor or -1 (whole row)"
        )
    return x.reshape(*shape[:-1], shape[-1] // groupsize, groupsize), shape


def round_ste(t: Tensor) -> Tensor:
    """round() in the forward pass, identity gradient (gradients still reach the scales)."""
    return t + (torch.round(t) - t).detach()


def quantize_sym(
    x: Tensor, bits: int, scale: Tensor, rnd: Callable[[Tensor], Tensor] = torch.round
) -> Tensor:
    """Symmetric uniform grid {-2^(b-1) .. 2^(b-1)-1} * scale (scale broadcast over the last dim)."""
    qmax = 2 ** (bits - 1) - 1
    return torch.clamp(rnd(x / scale), -qmax - 1, qmax) * scale


def quantize_asym(
    x: Tensor,
    bits: int,
    groupsize: int = -1,
    clip_ratio: float = 1.0,
    rnd: Callable[[Tensor], Tensor] = torch.round,
) -> Tensor:
    """Asymmetric min/max quantisation along the last dim (per token / per group).

    With ``rnd=round_ste`` it is differentiable in x *and* through the min/max scale (the
    path by which a rotation that shrinks the range lowers the loss; SpinQuant's quantiser)."""
    if bits >= 16:
        return x
    xg, shape = _grouped(x, groupsize)
    maxq = 2**bits - 1
    xmax = xg.amax(dim=-1, keepdim=True).clamp(min=0) * clip_ratio
    xmin = xg.amin(dim=-1, keepdim=True).clamp(max=0) * clip_ratio
    scale = (xmax - xmin) / maxq
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = rnd(-xmin / scale)
    q = torch.clamp(rnd(xg / scale) + zero, 0, maxq)
    return ((q - zero) * scale).reshape(shape)


def quantize_sym_act(
    x: Tensor,
    bits: int,
    groupsize: int = -1,
    clip_ratio: float = 1.0,
    rnd: Callable[[Tensor], Tensor] = torch.round,
) -> Tensor:
    """Symmetric per-token quantisation (``a_sym=True``)."""
    if bits >= 16:
        return x
    xg, shape = _grouped(x, groupsize)
    qmax = 2 ** (bits - 1) - 1
    scale = xg.abs().amax(dim=-1, keepdim=True) * clip_ratio / qmax
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return quantize_sym(xg, bits, scale, rnd).reshape(shape)


def weight_scale(
    w: Tensor,
    bits: int,
    *,
    clip: str = "mse",
    clip_min: float = 0.8,
    grid: int = 100,
    norm: float = 2.4,
) -> Tensor:
    """Per-row symmetric scale of ``w`` [..., cols] with the MSE clip search (shape [..., 1])."""
    qmax = 2 ** (bits - 1) - 1
    wmax = w.abs().amax(dim=-1, keepdim=True)
    wmax = torch.where(wmax > 0, wmax, torch.ones_like(wmax))
    best = wmax / qmax
    if clip == "none" or grid <= 1:
        return best
    best_err = torch.full_like(wmax, float("inf"))
    for i in range(grid):
        ratio = 1.0 - (1.0 - clip_min) * i / (grid - 1)
        s = wmax * ratio / qmax
        err = (quantize_sym(w, bits, s) - w).abs().pow(norm).sum(dim=-1, keepdim=True)
        better = err < best_err
        best = torch.where(better, s, best)
        best_err = torch.where(better, err, best_err)
    return best


def rtn_quantize_weight(
    w: Tensor,
    bits: int,
    groupsize: int = -1,
    *,
    clip: str = "mse",
    clip_min: float = 0.8,
    grid: int = 100,
    return_scale: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Round-to-nearest symmetric per-channel (or group-wise) weight quantisation.

    With ``return_scale`` also returns the scales, shape [rows, groups] (for packing)."""
    if bits >= 16:
        return (w, torch.ones(w.shape[0], 1, dtype=w.dtype)) if return_scale else w
    wg, shape = _grouped(w, groupsize)
    scale = weight_scale(wg, bits, clip=clip, clip_min=clip_min, grid=grid)
    q = quantize_sym(wg, bits, scale).reshape(shape)
    if return_scale:
        return q, scale.reshape(shape[0], -1)
    return q


@torch.no_grad()
def gptq_quantize_weight(
    w: Tensor,
    hessian: Tensor,
    bits: int,
    groupsize: int = -1,
    *,
    percdamp: float = 0.01,
    blocksize: int = 128,
    act_order: bool = False,
    clip: str = "mse",
    clip_min: float = 0.8,
    grid: int = 100,
    return_scale: bool = False,
) -> Tensor | tuple[Tensor, Tensor | None]:
    """GPTQ (Frantar et al., 2023): column-wise quantisation with inverse-Hessian error feedback.

    ``hessian`` is X^T X / n of the layer's inputs ([cols, cols]); scales come from the same clip
    search as RTN (per row, or per group at the group's first column). With ``return_scale``
    also returns the float64 scales [rows, groups] (None with act_order and groups, whose
    groups follow the permuted column order).
    """
    if bits >= 16:
        return (w, None) if return_scale else w
    dtype = w.dtype
    W = w.detach().clone().double()
    H = hessian.detach().clone().double()
    _rows, cols = W.shape
    if groupsize != -1 and cols % groupsize:
        raise RespinConfigError(
            f"group size {groupsize} does not divide the channel count {cols}: pick a divisor or -1"
        )
    dead = torch.diag(H) == 0
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    perm = None
    if act_order:
        perm = torch.argsort(torch.diag(H), descending=True)
        W, H = W[:, perm], H[perm][:, perm]
    damp = percdamp * torch.mean(torch.diag(H))
    H += damp * torch.eye(cols, dtype=H.dtype, device=H.device)
    L = torch.linalg.cholesky(H)
    Hinv = torch.cholesky_inverse(L)
    Hinv = torch.linalg.cholesky(Hinv, upper=True)
    scale = None
    group_scales: list[Tensor] = []
    if groupsize == -1:
        scale = weight_scale(W, bits, clip=clip, clip_min=clip_min, grid=grid)
        group_scales.append(scale)
    Q = torch.zeros_like(W)
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = i1 + i
            if groupsize != -1 and col % groupsize == 0:
                # static scale per group from the error-updated weights (GPTQ's groups)
                blk = torch.cat([W1[:, i:], W[:, i2:]], dim=1)[:, :groupsize]
                scale = weight_scale(blk, bits, clip=clip, clip_min=clip_min, grid=grid)
                group_scales.append(scale)
            assert scale is not None
            wcol = W1[:, i]
            q = quantize_sym(wcol.unsqueeze(1), bits, scale).squeeze(1)
            Q1[:, i] = q
            err = (wcol - q) / Hinv1[i, i]
            W1[:, i:] -= err.unsqueeze(1) @ Hinv1[i, i:].unsqueeze(0)
            Err1[:, i] = err
        Q[:, i1:i2] = Q1
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    if perm is not None:
        Q = Q[:, torch.argsort(perm)]
    if not return_scale:
        return Q.to(dtype)
    scales = None if perm is not None and groupsize != -1 else torch.cat(group_scales, dim=1)
    return Q.to(dtype), scales


def ste(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """Straight-through estimator: forward ``fn(x)``, gradient of the identity."""
    return x + (fn(x) - x).detach()


class ActQuantizer:
    """Per-token activation quantiser (asymmetric by default)."""

    def __init__(self, bits: int, groupsize: int = -1, sym: bool = False, clip_ratio: float = 1.0):
        self.bits, self.groupsize, self.sym, self.clip_ratio = bits, groupsize, sym, clip_ratio

    def __call__(self, x: Tensor, rnd: Callable[[Tensor], Tensor] = torch.round) -> Tensor:
        if self.bits >= 16:
            return x
        f = quantize_sym_act if self.sym else quantize_asym
        return f(x, self.bits, self.groupsize, self.clip_ratio, rnd)


class FakeQuantLinear(nn.Module):
    """A linear layer with fake-quantised weights (already on the grid) and input activations."""

    def __init__(self, base: nn.Linear, act: ActQuantizer, w_bits: int = 16):
        super().__init__()
        self.weight = base.weight
        self.bias = base.bias
        self.in_features, self.out_features = base.in_features, base.out_features
        self.act = act
        self.w_bits = w_bits
        self.w_scale: Tensor | None = None  # grid scales [rows, groups], kept for packing

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.linear(self.act(x), self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, w_bits={self.w_bits}, a_bits={self.act.bits}"


def packed_weight_bytes(rows: int, cols: int, bits: int, groupsize: int = -1) -> int:
    """Bytes of a packed ``bits``-bit weight with one fp16 scale per row/group."""
    ngroups = 1 if groupsize == -1 else math.ceil(cols / groupsize)
    return math.ceil(rows * cols * bits / 8) + rows * ngroups * 2
