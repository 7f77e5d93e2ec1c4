"""``llmcore demo unlearn-leakk``: GradDiff stopped at greedy "forgotten" vs RULE on the tiny
fictitious-author world (one seed, about a minute on CPU after the world model is cached)."""

from __future__ import annotations

from typing import Any


def run(seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Flat results row: greedy forget accuracy and leak@16 of the baseline, RULE, control."""
    import torch

    from unlearn_leakk.experiment import WorldConfig, run_world

    torch.set_num_threads(1)
    r = run_world(WorldConfig(seed=seed), progress=progress)
    keys = (
        "base_steps",
        "baseline_greedy_forget_acc",
        "baseline_leak@1",
        "baseline_leak@16",
        "baseline_chance@16",
        "rule_leak@16",
        "control_leak@16",
        "baseline_greedy_retain_acc",
        "rule_greedy_retain_acc",
    )
    return {k: r[k] for k in keys if k in r}
