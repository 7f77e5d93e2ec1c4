"""TPF and AUP (Accuracy Under Parallelism), the paper's efficiency metrics (Sec. 4.1).

AUP is a weighted area under the accuracy-versus-TPF curve: points sorted by TPF, those more
than ``y_min_offset`` points below the first point's accuracy dropped, each accuracy weighted by
``W(y) = min(exp(-alpha (1 - y / y_max)), 1)``, trapezoids between points plus the rectangle
``rho_1 * y_1`` under the first point. ``y_max`` is the best accuracy over every method compared
on the task. Points files use the leaderboard layout ``task -> method -> [[rho, acc], ...]``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from d3llm.errors import D3LLMConfigError


def tpf(tokens: Sequence[int], nfe: Sequence[int], skip: int = 0) -> float:
    """Tokens per forward: ``sum(tokens) / sum(nfe)`` over the samples after the first ``skip``
    (the official evaluation skips 10 warm-up samples)."""
    if len(tokens) != len(nfe):
        raise D3LLMConfigError(f"tokens ({len(tokens)}) and nfe ({len(nfe)}) differ in length")
    if skip < 0 or skip >= len(tokens):
        raise D3LLMConfigError(f"skip={skip} must be in [0, {len(tokens)})")
    t, n = sum(tokens[skip:]), sum(nfe[skip:])
    if n <= 0:
        raise D3LLMConfigError("the total number of forwards must be positive")
    return t / n


def aup_weight(y: float, y_max: float, alpha: float = 3.0) -> float:
    """``W(y) = min(exp(-alpha * (1 - y / y_max)), 1)``."""
    if alpha <= 0:
        raise D3LLMConfigError(f"alpha must be > 0, got {alpha}")
    if y_max <= 0:
        raise D3LLMConfigError(f"y_max must be > 0, got {y_max}")
    return min(math.exp(-alpha * (1.0 - y / y_max)), 1.0)


def aup(
    rho: Sequence[float],
    y: Sequence[float],
    y_max: float | None = None,
    alpha: float = 3.0,
    y_min_offset: float = 5.0,
    on_large_drop: Literal["filter", "raise"] = "filter",
) -> float:
    """AUP of one method's points ``(rho_i, y_i)`` (TPF, accuracy in percent).

    ``y_max`` defaults to ``max(y)`` (pass the maximum over all compared methods).
    ``on_large_drop="filter"`` drops points below ``y_1 - y_min_offset``; ``"raise"`` raises
    instead, as the leaderboard's own check does."""
    rho, y = [float(r) for r in rho], [float(v) for v in y]
    if len(rho) != len(y):
        raise D3LLMConfigError(f"rho has {len(rho)} points but y has {len(y)}")
    if not rho:
        raise D3LLMConfigError("aup needs at least one (rho, y) point")
    if any(not r > 0 or not math.isfinite(r) for r in rho):
        raise D3LLMConfigError(f"every rho (TPF) must be a finite number > 0, got {rho}")
    if any(not 0.0 <= v <= 100.0 for v in y):
        raise D3LLMConfigError(f"accuracies must be percentages in [0, 100], got {y}")
    if all(v <= 1.0 for v in y) and any(v > 0 for v in y):
        warnings.warn(
            f"every accuracy is <= 1 ({y}): AUP expects percentages, not a 0-1 scale",
            stacklevel=2,
        )
    if on_large_drop not in ("filter", "raise"):
        raise D3LLMConfigError(f"on_large_drop must be 'filter' or 'raise', got {on_large_drop!r}")
    if y_max is None:
        y_max = max(y)
    if y_max < max(y):
        raise D3LLMConfigError(
            f"y_max={y_max} is below the largest accuracy {max(y)}; pass the maximum over "
            "every compared method"
        )
    if alpha <= 0:
        raise D3LLMConfigError(f"alpha must be > 0, got {alpha}")
    pts = sorted(zip(rho, y, strict=True))
    y_min = pts[0][1] - y_min_offset
    if on_large_drop == "raise" and pts[0][1] - pts[-1][1] > y_min_offset:
        raise D3LLMConfigError(
            f"accuracy drops by {pts[0][1] - pts[-1][1]:.4g} > {y_min_offset} points from the "
            "first to the last point (use on_large_drop='filter' to drop such points)"
        )
    pts = [p for p in pts if p[1] >= y_min]
    if y_max == 0:
        return pts[0][0] * pts[0][1]
    total = pts[0][0] * pts[0][1]
    for (r0, y0), (r1, y1) in itertools.pairwise(pts):
        w0, w1 = aup_weight(y0, y_max, alpha), aup_weight(y1, y_max, alpha)
        total += 0.5 * (r1 - r0) * (y1 * w1 + y0 * w0)
    return total


Points = dict[str, dict[str, list[list[float]]]]


def write_points(path: str | Path, points: Mapping[str, Mapping[str, Sequence[Sequence[float]]]]):
    """Write AUP points in the leaderboard YAML layout ``task -> method -> [[rho, acc]]``."""
    import yaml

    from llmcore.data import atomic_write_text

    data = {
        str(t): {str(mm): [[float(r), float(a)] for r, a in pts] for mm, pts in meth.items()}
        for t, meth in points.items()
    }
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
    return Path(path)


def read_points(path: str | Path) -> Points:
    """Read a points YAML (``task -> method -> [[rho, acc], ...]``), validating its shape."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise D3LLMConfigError(f"points file {str(p)!r} does not exist")
    data = yaml.safe_load(p.read_text()) or {}
    if not isinstance(data, dict):
        raise D3LLMConfigError(f"{p}: expected a mapping task -> method -> [[rho, acc], ...]")
    out: Points = {}
    for task, meth in data.items():
        if not isinstance(meth, dict):
            raise D3LLMConfigError(f"{p}: task {task!r} must map method names to point lists")
        out[str(task)] = {}
        for name, pts in meth.items():
            if not isinstance(pts, list) or not all(
                isinstance(q, list | tuple) and len(q) == 2 for q in pts
            ):
                raise D3LLMConfigError(f"{p}: {task}/{name} must be a list of [rho, acc] pairs")
            out[str(task)][str(name)] = [[float(r), float(a)] for r, a in pts]
    return out


def aup_table(
    points: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    alpha: float = 3.0,
    y_min_offset: float = 5.0,
    on_large_drop: Literal["filter", "raise"] = "filter",
) -> dict[str, dict[str, float]]:
    """AUP per task and method, ``y_max`` per task over all its methods."""
    out: dict[str, dict[str, float]] = {}
    for task, meth in points.items():
        ys = [float(a) for pts in meth.values() for _, a in pts]
        if not ys:
            raise D3LLMConfigError(f"task {task!r} has no points")
        y_max = max(ys)
        out[task] = {
            name: aup(
                [r for r, _ in pts],
                [a for _, a in pts],
                y_max,
                alpha,
                y_min_offset,
                on_large_drop,
            )
            for name, pts in meth.items()
        }
    return out
