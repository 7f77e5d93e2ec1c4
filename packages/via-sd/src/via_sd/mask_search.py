"""DIMR-style search for the slim verifier's skip mask (reconstructed).

z* = argmin_z C(z), C(z) = Σ_t R^KL_{α,β}(q ‖ q'_z) over a calibration set, by seeded random
search with a periodic local-flip step (swap one skipped layer with one kept one) around
the best mask so far. The evenly spaced mask is always evaluated first, so the result is
never worse than that baseline.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from via_sd.errors import ViaSDConfigError, ViaSDInputError
from via_sd.slim import SlimVerifier, find_layers, layer_mask_even, num_skipped


def _phi(x: torch.Tensor, phi: str, tau: float) -> torch.Tensor:
    if phi == "relu":
        return torch.relu(x)
    if phi == "softplus":
        return tau * torch.nn.functional.softplus(x / tau)
    raise ViaSDConfigError(f"phi must be 'relu' or 'softplus', got {phi!r}")


def kl_margin_cost(
    logits_p: torch.Tensor,
    logits_q: torch.Tensor,
    alpha: float = 0.5,
    beta: float = 0.5,
    phi: str = "relu",
    tau: float = 1.0,
) -> torch.Tensor:
    """R^KL_{α,β}(q‖p) per position:
    Σ_v p(v) φ(log(1-α) + log p(v) - log q(v)) + Σ_v q(v) φ(log β + log p(v) - log q(v)).

    ``logits_p`` are the approximation's (q'), ``logits_q`` the target's, shape ``[..., V]``;
    returns shape ``[...]``."""
    if logits_p.shape != logits_q.shape:
        raise ViaSDInputError(
            f"logits shapes differ: {tuple(logits_p.shape)} vs {tuple(logits_q.shape)}"
        )
    if not 0.0 <= alpha < 1.0 or not beta > 0.0:
        raise ViaSDConfigError(f"need 0 <= alpha < 1 and beta > 0, got alpha={alpha}, beta={beta}")
    lp = torch.log_softmax(logits_p.float(), -1)
    lq = torch.log_softmax(logits_q.float(), -1)
    d = lp - lq
    t1 = (
        lp.exp() * _phi(math.log1p(-alpha) + d, phi, tau)
        if alpha > 0
        else lp.exp() * _phi(d, phi, tau)
    )
    t2 = lq.exp() * _phi(math.log(beta) + d, phi, tau)
    return (t1 + t2).sum(-1)


@dataclass
class MaskSearchResult:
    """Best skip set, its cost C(z), the even-mask baseline cost and the search history."""

    skip_layers: list[int]
    cost: float
    baseline_cost_even: float
    num_layers: int
    skip_ratio: float
    seed: int
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The mask JSON that ``via-sd --mask`` and :func:`via_sd.slim.load_mask` read."""
        return {
            "num_layers": self.num_layers,
            "skip_layers": self.skip_layers,
            "attn_skip": [],
            "mlp_skip": [],
            "skip_ratio": self.skip_ratio,
            "cost": self.cost,
            "baseline_cost_even": self.baseline_cost_even,
            "seed": self.seed,
        }


@torch.no_grad()
def mask_cost(
    model: nn.Module,
    calib_ids: Sequence[torch.Tensor],
    skip_layers: Sequence[int],
    *,
    target_logits: Sequence[torch.Tensor] | None = None,
    alpha: float = 0.5,
    beta: float = 0.5,
    phi: str = "relu",
    keep_first_last: bool = True,
) -> float:
    """C(z) = Σ over calibration sequences and positions of R^KL(q ‖ q'_z)."""
    slim = SlimVerifier(model, skip_layers=list(skip_layers), keep_first_last=keep_first_last)
    total = 0.0
    for i, ids in enumerate(calib_ids):
        ids = ids.view(1, -1)
        ql = target_logits[i] if target_logits is not None else model(input_ids=ids).logits[0]
        with slim.active():
            sl = model(input_ids=ids, use_cache=False).logits[0]
        total += float(kl_margin_cost(sl, ql, alpha, beta, phi).sum())
    return total


def dimr_search(
    model: nn.Module,
    calib_ids: Sequence[torch.Tensor],
    skip_ratio: float = 0.45,
    max_steps: int = 50,
    bo_period: int = 10,
    patience: int = 5,
    alpha: float = 0.5,
    beta: float = 0.5,
    phi: str = "relu",
    seed: int = 0,
    *,
    progress: bool = False,
) -> MaskSearchResult:
    """Search the skip mask minimising C(z) ("DIMR", reconstructed).

    Steps are mask evaluations. Step 0 is the evenly spaced mask; every ``bo_period``-th step
    evaluates the unseen single swaps around the best mask (local flip); the others draw
    seeded random masks. Stops after ``max_steps``, when every mask has been seen, or after
    ``patience`` local-flip rounds without improvement. Deterministic for a fixed seed."""
    if not calib_ids:
        raise ViaSDInputError("dimr_search needs at least one calibration sequence")
    for name, v in (("max_steps", max_steps), ("bo_period", bo_period), ("patience", patience)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ViaSDConfigError(f"{name} must be an integer >= 1, got {v!r}")
    L = len(find_layers(model))
    n = num_skipped(L, skip_ratio)
    cands = list(range(1, L - 1))
    rng = random.Random(seed)
    dev = next(model.parameters()).device
    calib = [torch.as_tensor(x, dtype=torch.long, device=dev).view(-1) for x in calib_ids]
    with torch.no_grad():
        qlog = [model(input_ids=x.view(1, -1)).logits[0] for x in calib]
    seen: dict[tuple[int, ...], float] = {}
    history: list[dict[str, Any]] = []
    total = math.comb(len(cands), n)

    def evaluate(mask: tuple[int, ...], kind: str) -> float:
        cost = mask_cost(model, calib, mask, target_logits=qlog, alpha=alpha, beta=beta, phi=phi)
        seen[mask] = cost
        best = min(seen.values())
        history.append(
            {
                "step": len(history),
                "kind": kind,
                "skip_layers": list(mask),
                "cost": cost,
                "best": best,
            }
        )
        return cost

    even = tuple(layer_mask_even(L, skip_ratio))
    even_cost = evaluate(even, "even")
    stale = 0
    while len(history) < max_steps and len(seen) < total:
        best_mask = min(seen, key=seen.__getitem__)
        if len(history) % bo_period == 0:
            before = seen[best_mask]
            for out_l in best_mask:
                for in_l in cands:
                    if in_l in best_mask or len(history) >= max_steps:
                        continue
                    m = tuple(sorted((set(best_mask) - {out_l}) | {in_l}))
                    if m not in seen:
                        evaluate(m, "flip")
            stale = stale + 1 if min(seen.values()) >= before else 0
            if stale >= patience:
                break
        else:
            for _ in range(100):
                m = tuple(sorted(rng.sample(cands, n)))
                if m not in seen:
                    evaluate(m, "random")
                    break
            else:
                break
    best_mask = min(seen, key=lambda m: (seen[m], m))
    return MaskSearchResult(
        list(best_mask), seen[best_mask], even_cost, L, float(skip_ratio), seed, history
    )
