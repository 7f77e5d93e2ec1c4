"""Collapse diagnostics (reconstructed definitions): per-layer SVD of probe hidden states
``H_l = U S V^T``, effective rank ``exp(-sum p_k log p_k)`` with ``p_k = s_k / sum s``, condition
number, and the relative change ``R_k = ||dH v_k|| / ||H v_k|| = sqrt(n) |c_k| / s_k`` of each
singular direction after edits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class LayerGeometry:
    """SVD of one layer's probe states."""

    layer: int
    H: torch.Tensor
    """``[n, d]`` last-token hidden states (float64)."""
    sigma: torch.Tensor
    Vt: torch.Tensor

    @property
    def effective_rank(self) -> float:
        p = self.sigma / self.sigma.sum()
        p = p[p > 0]
        return float(torch.exp(-(p * p.log()).sum()))

    @property
    def condition_number(self) -> float:
        return float(self.sigma[0] / self.sigma[-1])


@torch.no_grad()
def hidden_states(
    model: Any, tok: Any, probe: Sequence[str], layers: Sequence[int]
) -> dict[int, torch.Tensor]:
    """Last-token output of each decoder layer in ``layers`` (``hidden_states[l + 1]``)."""
    from edit_collapse import core

    rows = [core.encode(tok, p) for p in probe]
    ids, att = core.pad_right(rows, core.pad_id(tok), core.device_of(model))
    hs = model(input_ids=ids, attention_mask=att, output_hidden_states=True).hidden_states
    last = att.sum(1) - 1
    ar = torch.arange(len(rows), device=ids.device)
    return {l: hs[l + 1][ar, last].double().cpu() for l in layers}  # noqa: E741


def representation_geometry(
    model: Any, tok: Any, probe: Sequence[str], layers: Sequence[int]
) -> dict[int, LayerGeometry]:
    """SVD of the probe states per layer."""
    out = {}
    for layer, H in hidden_states(model, tok, probe, layers).items():
        _, S, Vt = torch.linalg.svd(H, full_matrices=False)
        out[layer] = LayerGeometry(layer, H, S, Vt)
    return out


def relative_change(
    H_pre: torch.Tensor, H_post: torch.Tensor, Vt: torch.Tensor, sigma: torch.Tensor
) -> torch.Tensor:
    """``R_k = ||(H_post - H_pre) v_k|| / s_k`` for every right singular vector ``v_k`` of
    ``H_pre`` (``s_k = ||H_pre v_k||``)."""
    if H_pre.shape != H_post.shape:
        from edit_collapse.errors import EditInputError

        raise EditInputError(
            f"H_pre {tuple(H_pre.shape)} and H_post {tuple(H_post.shape)} differ in shape"
        )
    dH = (H_post - H_pre).double()
    return (dH @ Vt.double().T).norm(dim=0) / sigma.double().clamp_min(1e-300)


def collapse_summary(sigma: torch.Tensor, R: torch.Tensor, frac: float = 0.05) -> dict[str, float]:
    """Median R, median R over the ``frac`` smallest-sigma directions, R at sigma_min, and
    Spearman rho(sigma_k, R_k)."""
    from scipy.stats import spearmanr

    s, r = sigma.numpy(), R.numpy()
    m = max(1, round(frac * len(s)))
    small = np.argsort(s)[:m]
    rho = spearmanr(s, r).statistic if len(s) > 2 else float("nan")
    return {"median_R": float(np.median(r)), "R_small": float(np.median(r[small])),
            "R_min": float(r[np.argmin(s)]), "rho_sigma_R": float(rho),
            "effective_rank": float(np.exp(-(p := s / s.sum())[p > 0] @ np.log(p[p > 0]))),
            "condition": float(s.max() / s.min())}  # fmt: skip
