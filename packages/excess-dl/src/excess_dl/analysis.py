"""Information-performance analysis of EDL curves: bits-to-target, teach/elicit ratio, capacity
fit and the LoRA rule, SDL. Reconstructed from the paper's abstract (see the README)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from excess_dl.curve import EDLCurve
from excess_dl.errors import EDLConfigError

Metric = Literal["loss_gap_closed", "accuracy", "fraction_of_max"]


def _metric(curve: EDLCurve, metric: str, acc_max: float | None = None) -> list[float]:
    if metric == "loss_gap_closed":
        return [p.loss_gap_closed for p in curve.points]
    if metric == "accuracy":
        if any(p.accuracy is None for p in curve.points):
            raise EDLConfigError("this curve has no accuracy (computed with accuracy=False)")
        return [float(p.accuracy) for p in curve.points]  # type: ignore[arg-type]
    if metric == "fraction_of_max":
        a0 = curve.points[0].accuracy_base or 0.0
        top = acc_max if acc_max is not None else max(p.accuracy or 0.0 for p in curve.points)
        if top <= a0:
            return [float("nan")] * len(curve.points)
        return [((p.accuracy or 0.0) - a0) / (top - a0) for p in curve.points]
    raise EDLConfigError(
        f"metric={metric!r} is invalid: use loss_gap_closed, accuracy or fraction_of_max"
    )


def bits_to_target(curve: EDLCurve, target: float = 0.8, metric: str = "loss_gap_closed") -> float:
    """B(tau): EDL at the first checkpoint whose metric reaches ``target`` (a step function, no
    interpolation); ``inf`` if never reached."""
    for p, y in zip(curve.points, _metric(curve, metric), strict=True):
        if y >= target:
            return p.edl_bits
    return math.inf


def n_to_target(curve: EDLCurve, target: float = 0.8, metric: str = "loss_gap_closed") -> float:
    """The first checkpoint n whose metric reaches ``target`` (``inf`` if never)."""
    for p, y in zip(curve.points, _metric(curve, metric), strict=True):
        if y >= target:
            return float(p.n)
    return math.inf


def teach_elicit_ratio(
    teach: EDLCurve, elicit: EDLCurve, target: float = 0.8, metric: str = "loss_gap_closed"
) -> float:
    """B_teach(tau) / B_elicit(tau), the headline elicitation-versus-teaching metric."""
    bt, be = bits_to_target(teach, target, metric), bits_to_target(elicit, target, metric)
    if be <= 0:
        return math.inf if bt > 0 else math.nan
    return bt / be


@dataclass
class CapacityFit:
    """Saturating fit EDL(n) ~ C n / (n + n0) (least squares over log-spaced n)."""

    C_bits: float
    n0: float
    bits_per_param: float
    r2: float
    plateau_loss_gap_closed: float


def fit_capacity(curve: EDLCurve, *, min_n: int = 1) -> CapacityFit:
    """Capacity C of a method: least-squares fit of EDL(n) = C n / (n + n0) (n0 on a log grid,
    C in closed form). Fit it on a curve with a decaying lr (``lr_schedule="inverse_sqrt"``): a
    constant lr keeps the online code above the final loss and EDL grows linearly."""
    pts = [p for p in curve.points if p.n >= min_n]
    if len(pts) < 2:
        raise EDLConfigError(f"fit_capacity needs >= 2 checkpoints with n >= {min_n}")
    ns = [float(p.n) for p in pts]
    ys = [p.edl_bits for p in pts]
    best = (math.inf, 0.0, 1.0)
    for k in range(0, 401):
        n0 = 10 ** (-2 + 8 * k / 400)
        f = [n / (n + n0) for n in ns]
        den = sum(v * v for v in f)
        c = sum(v * y for v, y in zip(f, ys, strict=True)) / den
        sse = sum((c * v - y) ** 2 for v, y in zip(f, ys, strict=True))
        if sse < best[0]:
            best = (sse, c, n0)
    sse, c, n0 = best
    mean = sum(ys) / len(ys)
    sst = sum((y - mean) ** 2 for y in ys)
    r2 = 1.0 - sse / sst if sst > 0 else 1.0
    tp = max(curve.trainable_params, 1)
    plateau = curve.points[-1].loss_gap_closed
    return CapacityFit(c, n0, c / tp, r2, plateau)


def lora_underperforms(full: EDLCurve, lora_capacity: CapacityFit, target: float = 0.8) -> bool:
    """The capacity rule: LoRA falls short of full FT at ``target`` iff B_full(tau) > C_lora."""
    return bits_to_target(full, target) > lora_capacity.C_bits


def sdl(test_losses: Sequence[float], final_loss: float) -> float:
    """Surplus description length sum_{i>=1} [L(theta_{i-1}) - L(theta_inf)] from the expected
    losses L(theta_0), L(theta_1), ... (distinct from Whitney et al.'s SDL_eps)."""
    return math.fsum(v - final_loss for v in test_losses)


def sdl_epsilon(test_losses: Sequence[float], epsilon: float) -> float:
    """Whitney et al. (2020) SDL_eps = sum_n [L(A, n) - eps]_+."""
    return math.fsum(max(v - epsilon, 0.0) for v in test_losses)


def info_performance_table(
    curves: Sequence[EDLCurve],
    targets: Sequence[float] = (0.5, 0.8, 0.9),
    metric: str = "loss_gap_closed",
) -> list[dict]:
    """One row per curve: task, method, trainable parameters, B(tau) and n(tau) per target,
    final EDL and metric."""
    acc_max = None
    if metric == "fraction_of_max":
        acc_max = max((p.accuracy or 0.0) for c in curves for p in c.points)
    rows = []
    for c in curves:
        ys = _metric(c, metric, acc_max)
        row = {
            "task": c.task,
            "method": c.method,
            "trainable_params": c.trainable_params,
            "n": c.points[-1].n,
            "edl_bits": c.points[-1].edl_bits,
            metric: ys[-1],
        }
        for t in targets:
            b = math.inf
            nn = math.inf
            for p, y in zip(c.points, ys, strict=True):
                if y >= t:
                    b, nn = p.edl_bits, p.n
                    break
            row[f"B({t})"] = b
            row[f"n({t})"] = nn
        rows.append(row)
    return rows


def teach_elicit_ratios(
    curves: Sequence[EDLCurve],
    targets: Sequence[float] = (0.5, 0.8, 0.9),
    metric: str = "loss_gap_closed",
) -> list[dict]:
    """B_teach(tau)/B_elicit(tau) for every method that has both a ``teach`` and an ``elicit``
    curve."""
    by = {(c.task, c.method): c for c in curves}
    out = []
    for (task, method), c in by.items():
        if task != "teach" or ("elicit", method) not in by:
            continue
        e = by[("elicit", method)]
        out.append(
            {
                "method": method,
                **{f"ratio({t})": teach_elicit_ratio(c, e, t, metric) for t in targets},
            }
        )
    return out


def format_table(rows: Sequence[dict]) -> str:
    """A markdown table of dict rows (floats with 3 significant digits)."""
    if not rows:
        return "(no rows)"
    keys = list(rows[0])

    def fmt(v):
        if isinstance(v, float):
            return "inf" if math.isinf(v) else f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
