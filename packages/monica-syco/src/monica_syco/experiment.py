"""The colour-world pipeline end to end: tiny model, ``collect`` on train items, ``fit`` on
their steps, alpha_max on dev, ``evaluate`` on test (the claim test, demo and bench use it)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from monica_syco.world import TinyModelConfig


@dataclass
class WorldRunConfig:
    """One world run (all of the method's defaults are configurable here)."""

    model: TinyModelConfig = field(default_factory=TinyModelConfig)
    """the tiny model (world seed, size, training)"""
    layers: list[int] | None = None
    """monitor/calibration blocks (None: depth 0.5 and 0.75)"""
    auto_layers: bool = False
    """pick the top-2 blocks by dev AUROC"""
    n_samples: int = 4
    """trajectories per train prompt (T = 1.0)"""
    probe: str = "logistic"
    """logistic | diffmean"""
    window: int = 2
    """context window (steps)"""
    mode: str = "add"
    """add | clamp | logit"""
    contrast: str = "all"
    """calibration-vector contrast: all | matched | engaged (see ``fit_calibrator``)"""
    alpha_grid: tuple[float, ...] = (0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 8.0)
    """alpha_max candidates chosen on dev (the default grid plus 2.5 and 3: on the world the
    useful window between no effect and broken answers is narrow)"""
    threshold: float = 0.5
    """trigger threshold tau"""
    tune_threshold: bool = False
    """pick tau on dev by Youden's J"""
    seed: int = 0
    """collection seed"""
    max_new_tokens: int = 72
    """generation budget per trajectory"""
    methods: tuple[str, ...] = ("none", "always", "answer_level", "monica")
    """methods evaluated on test"""


def run_world(
    cfg: WorldRunConfig | None = None, *, entry: Any = None, progress: bool = False
) -> dict[str, Any]:
    """Full pipeline; returns ``{"reports": {method: SycReport}, "monitor", "calibrator",
    "alpha_rows", "timings", ...}``."""
    import torch

    cfg = cfg or WorldRunConfig()

    from monica_syco.collect import collect_steps, fit_calibrator, fit_monitor
    from monica_syco.evaluate import choose_alpha_max, evaluate, tune_threshold
    from monica_syco.monitor import default_layers
    from monica_syco.world import build_tiny_model, make_synthetic_world

    t0 = time.perf_counter()
    entry = entry or build_tiny_model(cfg.model, progress=progress)
    model, tok = entry.load()
    world = make_synthetic_world(cfg.model.seed, cfg.model.n_entities)
    L = model.config.num_hidden_layers
    cand = list(range(L)) if cfg.auto_layers else (cfg.layers or default_layers(L))
    timings = {"load": time.perf_counter() - t0}
    t = time.perf_counter()
    ds = collect_steps(
        model,
        tok,
        world.items("train"),
        cand,
        n_samples=cfg.n_samples,
        seed=cfg.seed,
        max_new_tokens=cfg.max_new_tokens,
        batch_size=64,
    )
    timings["collect"] = time.perf_counter() - t
    t = time.perf_counter()
    mon = fit_monitor(ds, "auto" if cfg.auto_layers else cand, probe=cfg.probe, window=cfg.window)  # type: ignore[arg-type]
    cal = fit_calibrator(
        ds,
        mon.layers,
        mode="add",
        contrast=cfg.contrast,  # type: ignore[arg-type]
        threshold=cfg.threshold,
    )
    timings["fit"] = time.perf_counter() - t
    t = time.perf_counter()
    dev = world.items("dev")
    gen = {"max_new_tokens": cfg.max_new_tokens}
    if cfg.tune_threshold:
        recs = evaluate(model, tok, dev, "none", mon, **gen).records
        cal = cal.with_(threshold=tune_threshold(recs))
    alpha, rows = choose_alpha_max(model, tok, dev, mon, cal, cfg.alpha_grid, **gen)
    cal = cal.with_(alpha_max=alpha, alpha_min=min(cal.alpha_min, alpha))
    if cfg.mode != "add":
        cal = cal.with_(mode=cfg.mode)
    timings["alpha"] = time.perf_counter() - t
    t = time.perf_counter()
    test = world.items("test")
    reports = {}
    with torch.no_grad():
        for m in cfg.methods:
            reports[m] = evaluate(model, tok, test, m, mon, None if m == "none" else cal, **gen)  # type: ignore[arg-type]
    timings["evaluate"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    return {
        "reports": reports,
        "monitor": mon,
        "calibrator": cal,
        "alpha_rows": rows,
        "alpha_max": alpha,
        "dataset": ds,
        "timings": timings,
        "config": asdict(cfg),
        "entry": entry,
    }


def strong(report: Any) -> dict[str, float]:
    """Metrics on strong wrong cues (expert persona) of the world."""
    return report.by_source.get("synthetic-colour/strong", {})


def weak(report: Any) -> dict[str, float]:
    return report.by_source.get("synthetic-colour/weak", {})
