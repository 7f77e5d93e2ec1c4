"""Pure tensor functions: sink scores, massive activations and token-mixing metrics.

They take plain tensors, so activations from any framework (Hugging Face hooks, TransformerLens
caches, nnsight traces) can be measured. Shapes: ``N`` sequences, ``L`` layers, ``H`` heads,
``T`` positions, ``d`` model width, ``dh`` head width; attention rows are queries, columns keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from sink_probe.errors import SinkProbeConfigError, SinkProbeInputError


def check_eps(eps: float) -> float:
    """``eps`` must lie strictly between 0 and 1."""
    if not (isinstance(eps, int | float) and 0.0 < float(eps) < 1.0):
        raise SinkProbeConfigError(f"eps must be in (0, 1) (the paper uses 0.3), got {eps!r}")
    return float(eps)


def check_sink_set(sink_set: Sequence[int], T: int) -> tuple[int, ...]:
    """Sink indices must be distinct and within ``[0, T)``."""
    s = tuple(int(i) for i in sink_set)
    if not s:
        raise SinkProbeConfigError("sink_set is empty; pass at least one position, e.g. (0,)")
    bad = [i for i in s if i < 0 or i >= T]
    if bad or len(set(s)) != len(s):
        raise SinkProbeConfigError(
            f"sink_set {s} must hold distinct positions in [0, {T}) for T={T}; bad: {bad or s}"
        )
    if max(s) >= T - 1:
        raise SinkProbeConfigError(
            f"sink_set {s} leaves no query after the sinks at T={T}; use earlier positions"
        )
    return s


def check_finite(t: torch.Tensor, what: str, layer: int | None = None) -> None:
    """Raise naming the layer (and head for attention maps) on NaN/inf."""
    if bool(torch.isfinite(t).all()):
        return
    where = f" at layer {layer}" if layer is not None else ""
    if t.dim() >= 3 and what == "attention":
        bad = (~torch.isfinite(t)).flatten(2).any(-1).nonzero()
        head = int(bad[0, -1]) if len(bad) else -1
        where += f", head {head}"
    raise SinkProbeInputError(
        f"non-finite values in {what}{where}; run in float32 or check the model's weights"
    )


def sink_importance(attn: torch.Tensor) -> torch.Tensor:
    """Gu et al. (2025) key importance ``alpha_j = (1/(T-j)) sum_{i>=j} A_ij`` over the last
    two axes: ``[..., T, T] -> [..., T]`` (e.g. ``[N,L,H,T,T] -> [N,L,H,T]``)."""
    T = attn.shape[-1]
    tri = torch.tril(torch.ones(T, T, dtype=torch.bool, device=attn.device))
    col = attn.masked_fill(~tri, 0).sum(-2)
    denom = torch.arange(T, 0, -1, device=attn.device, dtype=col.dtype)
    return col / denom


def sink_rate(attn: torch.Tensor, eps: float = 0.3) -> torch.Tensor:
    """``SinkRate_eps(j) = 100 * mean_{samples,l,h} 1[alpha_j > eps]`` for every position j
    (Gu et al. 2025, Sec. 3): ``[N,L,H,T,T] -> [T]`` (any number of leading axes)."""
    eps = check_eps(eps)
    a = sink_importance(attn)
    return 100.0 * (a > eps).float().flatten(0, -2).mean(0)


def sink_mass(attn: torch.Tensor, sink_set: Sequence[int] = (0,)) -> torch.Tensor:
    """Sink mass ``m_S = mean_{i not in S} sum_{j in S} A_ij`` per layer and head:
    ``[N,L,H,T,T] -> [L,H]`` (``[L,H,T,T]`` is one sample)."""
    if attn.dim() == 4:
        attn = attn[None]
    T = attn.shape[-1]
    s = list(check_sink_set(sink_set, T))
    q = [i for i in range(T) if i not in s]
    return attn[..., q, :][..., s].sum(-1).mean(-1).mean(0)


@dataclass(frozen=True)
class MassiveEntry:
    """One massive residual entry (Sun et al. 2024)."""

    layer: int
    token: int
    channel: int
    value: float
    ratio: float
    """``|value| / median(|x^l|)``."""

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def check_tau(tau_abs: float | None, tau_ratio: float) -> None:
    """``tau_ratio`` must exceed 1 and ``tau_abs`` be positive or None."""
    if not (isinstance(tau_ratio, int | float) and math.isfinite(tau_ratio) and tau_ratio > 1):
        raise SinkProbeConfigError(
            f"tau_ratio must be a finite number > 1 (paper: 1000; tiny models: 50), got "
            f"{tau_ratio!r}"
        )
    if tau_abs is not None and not (math.isfinite(tau_abs) and tau_abs > 0):
        raise SinkProbeConfigError(f"tau_abs must be > 0 or None (ratio only), got {tau_abs!r}")


def massive_mask(
    a: torch.Tensor, median: torch.Tensor | float, tau_abs: float | None, tau_ratio: float
) -> torch.Tensor:
    """Sun et al.'s (2024) rule on magnitudes ``a = |x|``: ``a > tau_ratio * median`` and, unless
    ``tau_abs`` is None, ``a > tau_abs``; ``median`` broadcasts against ``a`` (one per layer, or
    one per sequence and layer)."""
    hit = a > tau_ratio * median
    if tau_abs is not None:
        hit &= a > tau_abs
    return hit


def detect_massive(
    hidden: torch.Tensor, tau_abs: float | None = 100.0, tau_ratio: float = 1000.0
) -> list[MassiveEntry]:
    """Massive activations (Sun et al. 2024, Sec. 2): entries of a layer output with
    ``|x| > tau_abs`` and ``|x| > tau_ratio * median(|x^l|)`` (one median over the ``T*d``
    entries of the layer). ``hidden``: ``[L,T,d]`` (or ``[T,d]`` for one layer); sorted by
    magnitude, largest first."""
    check_tau(tau_abs, tau_ratio)
    if hidden.dim() == 2:
        hidden = hidden[None]
    out: list[MassiveEntry] = []
    for li in range(hidden.shape[0]):
        x = hidden[li].detach().float()
        check_finite(x, "hidden states", li)
        a = x.abs()
        med = float(a.median())
        for t, c in massive_mask(a, med, tau_abs, tau_ratio).nonzero().tolist():
            v = float(x[t, c])
            out.append(MassiveEntry(li, t, c, v, abs(v) / med if med > 0 else math.inf))
    out.sort(key=lambda e: -abs(e.value))
    return out


def massive_stats(x: torch.Tensor, sink_set: Sequence[int] = (0,)) -> dict[str, torch.Tensor]:
    """Per-sequence statistics of one layer output ``x [N,T,d]``: ``median``, ``top1``
    (max ``|x|``), ``ratio`` (top1/median), ``sink_ratio`` (max over the sink tokens / median),
    and ``top_token``/``top_channel`` of the largest entry; each a tensor of length N."""
    a = x.detach().float().abs()
    d = a.shape[-1]
    med = a.flatten(1).median(-1).values
    top, idx = a.flatten(1).max(-1)
    sink = a[:, list(sink_set)].flatten(1).max(-1).values
    return {
        "median": med,
        "top1": top,
        "ratio": top / med,
        "sink_ratio": sink / med,
        "top_token": idx // d,
        "top_channel": idx % d,
    }


def query_set(T: int, sink_set: Sequence[int]) -> list[int]:
    """Non-sink queries after the last sink, ``i not in S, i > max(S)``."""
    s = set(sink_set)
    return [i for i in range(max(s) + 1, T) if i not in s]


def layer_attention_sums(
    attn: torch.Tensor,
    sink_set: Sequence[int],
    eps: float,
    values: torch.Tensor | None = None,
    w_o: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Sums over the N sequences of one layer's attention statistics (``attn [N,H,T,T]``), the
    unit that streaming adds up batch by batch: ``sink_count [H,T]`` (sequences with
    ``alpha_j > eps``), ``m_S``, ``M_nn``, ``M_self`` and (with ``values [N,H,T,dh]`` and
    ``w_o [d, H*dh]``) ``C_sn``, each ``[H]``, of Sec. 2.3's per-sequence means."""
    H, T = attn.shape[1], attn.shape[-1]
    s = list(sink_set)
    q = query_set(T, s)
    a = attn.float()
    alpha = sink_importance(a)
    out = {"sink_count": (alpha > eps).float().sum(0)}
    aq = a[:, :, q, :]  # [N,H,Q,T]
    mS = aq[..., s].sum(-1)
    qi = torch.tensor(q)
    diag = aq[:, :, torch.arange(len(q)), qi]
    out["m_S"] = mS.mean(-1).sum(0)
    out["M_self"] = diag.mean(-1).sum(0)
    nonsink = torch.ones(T, dtype=torch.bool)
    nonsink[s] = False
    out["M_nn"] = (aq.masked_fill(~nonsink, 0).sum(-1) - diag).mean(-1).sum(0)
    if values is not None and w_o is not None:
        v = values.float()
        dh = v.shape[-1]
        wo = w_o.float().view(w_o.shape[0], H, dh)  # [d,H,dh]
        full = torch.einsum("nhqt,nhtk->nhqk", aq, v)
        sink = torch.einsum("nhqt,nhtk->nhqk", aq[..., s], v[:, :, s])
        full_o = torch.einsum("nhqk,dhk->nhqd", full, wo).norm(dim=-1)
        sink_o = torch.einsum("nhqk,dhk->nhqd", sink, wo).norm(dim=-1)
        out["C_sn"] = (sink_o / full_o.clamp_min(1e-30)).mean(-1).sum(0)
    return out


def residual_per_sequence(
    x_out: torch.Tensor,
    sink_set: Sequence[int],
    x_in: torch.Tensor | None = None,
    attn_out: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Per-sequence residual statistics of one layer output ``x_out [N,T,d]``, each ``[N]``:
    ``r`` (Dong et al. 2021 residual ``||X - 1 xbar^T||_F / ||X||_F`` over the non-sink
    tokens), ``cos`` (their mean pairwise cosine) and, with the block input ``x_in`` and the
    attention output ``attn_out`` (both ``[N,T,d]``), ``U_ns = ||Attn(x)_s|| / ||x_s||``
    averaged over the sinks. The N axis may stack several layers."""
    T = x_out.shape[1]
    s = list(sink_set)
    sinks = set(s)
    keep = [i for i in range(T) if i not in sinks]
    lo = max(s) + 1
    # the usual sink sets are a prefix of the sequence: a slice, no gather
    X = (x_out[:, lo:] if keep == list(range(lo, T)) else x_out[:, keep]).float()
    Xc = X - X.mean(1, keepdim=True)
    r = torch.linalg.vector_norm(Xc, dim=(1, 2)) / torch.linalg.vector_norm(
        X, dim=(1, 2)
    ).clamp_min(1e-30)
    U = X / torch.linalg.vector_norm(X, dim=-1, keepdim=True).clamp_min(1e-30)
    n = len(keep)
    # sum_{i != j} u_i . u_j = ||sum_i u_i||^2 - sum_i ||u_i||^2 (no n x n Gram matrix)
    tot = U.sum(1).pow(2).sum(-1) - U.pow(2).sum((1, 2))
    out = {"r": r, "cos": tot / max(1, n * (n - 1))}
    if x_in is not None and attn_out is not None:
        num = attn_out[:, s].float().norm(dim=-1)
        den = x_in[:, s].float().norm(dim=-1).clamp_min(1e-30)
        out["U_ns"] = (num / den).mean(-1)
    return out


def layer_residual_sums(
    x_out: torch.Tensor,
    sink_set: Sequence[int],
    x_in: torch.Tensor | None = None,
    attn_out: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Sums over the N sequences of :func:`residual_per_sequence` (``r``, ``cos``, ``U_ns``)."""
    return {k: v.sum(0) for k, v in residual_per_sequence(x_out, sink_set, x_in, attn_out).items()}


def mixing_metrics(
    attn: torch.Tensor,
    values: torch.Tensor | None = None,
    w_o: torch.Tensor | None = None,
    hidden: torch.Tensor | None = None,
    sink_set: Sequence[int] = (0,),
) -> dict[int, dict[str, float]]:
    """Token-mixing metrics per layer (reconstructed from the paper's claims): ``m_S``,
    ``M_nn``, ``M_self`` (``m_S + M_nn + M_self = 1``), ``C_sn`` (sink -> non-sink transfer),
    ``U_ns`` (non-sink -> sink update), ``r`` and ``cos`` (rank-collapse proxies).

    ``attn [N,L,H,T,T]``; ``values [N,L,H,T,dh]`` (after GQA repetition); ``w_o [L,d,H*dh]``
    (``o_proj.weight``); ``hidden [N,L+1,T,d]`` (block inputs and outputs, index 0 = the first
    block's input). Missing inputs drop the metrics that need them."""
    if attn.dim() == 4:
        attn = attn[None]
    N, L, _, T, _ = attn.shape
    s = check_sink_set(sink_set, T)
    res: dict[int, dict[str, float]] = {}
    for li in range(L):
        check_finite(attn[:, li], "attention", li)
        v = values[:, li] if values is not None else None
        wo = w_o[li] if w_o is not None else None
        sums = layer_attention_sums(attn[:, li], s, 0.5, v, wo)
        row = {k: float(sums[k].mean()) / N for k in ("m_S", "M_nn", "M_self", "C_sn") if k in sums}
        if hidden is not None:
            attn_out = None
            if v is not None and wo is not None:
                ctx = torch.einsum("nhqt,nhtk->nqhk", attn[:, li].float(), v.float())
                attn_out = ctx.flatten(2) @ wo.float().T
            rs = layer_residual_sums(hidden[:, li + 1], s, hidden[:, li], attn_out)
            row.update({k: float(val) / N for k, val in rs.items()})
        res[li] = row
    return res
