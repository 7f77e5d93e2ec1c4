"""``llmcore demo unlearn-leakk``: GradDiff stopped at greedy "forgotten" vs RULE on a
demo-size fictitious-author world (8 authors, a 2 x 64 Llama built in seconds; the test and
bench world is the 20-author one of :func:`unlearn_leakk.world.world_recipe`)."""

from __future__ import annotations

import time
from typing import Any


def run(seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Flat results row: greedy forget/retain accuracy and leak@16 of the greedy-stopped
    GradDiff baseline and of RULE on top of it (one seed, forget pair 0)."""
    import torch

    from llmcore import zoo
    from llmcore.runtime import num_threads
    from unlearn_leakk.experiment import WorldConfig, baseline_config, measure, rule_config
    from unlearn_leakk.rule import rule_unlearn
    from unlearn_leakk.trainers import UnlearnResult, unlearn
    from unlearn_leakk.world import DEMO_AUTHORS, demo_world_recipe, make_world

    t0 = time.perf_counter()
    with num_threads(1):
        torch.manual_seed(seed)
        entry = zoo.build(demo_world_recipe(), progress=progress)
        model, tok = entry.load()
        world = make_world(0)
        forget_ids = world.forget_authors(0)
        forget = world.qa_items(forget_ids)
        retain = world.qa_items([i for i in DEMO_AUTHORS if i not in forget_ids], split="retain")
        cfg = WorldConfig(
            seed=seed, lr=2e-4, max_steps=200, n=32, rounds=2, n_mine=16, epochs_per_round=5.0
        )
        res = UnlearnResult()
        unlearn(model, tok, forget, retain, baseline_config(cfg), result=res, progress=progress)
        out: dict[str, Any] = {"base_steps": res.steps, "base_stopped": res.stopped_early}
        out |= measure(model, tok, world, forget, retain, cfg, tag="baseline")
        model, hist = rule_unlearn(
            model, tok, forget, retain, rule_config(cfg), init_unlearned=model
        )
        out["rule_extra_steps"] = hist.extra_steps
        out |= measure(model, tok, world, forget, retain, cfg, tag="rule")
    keys = (
        "base_steps",
        "base_stopped",
        "baseline_greedy_forget_acc",
        "baseline_leak@1",
        "baseline_leak@16",
        "baseline_chance@16",
        "rule_extra_steps",
        "rule_greedy_forget_acc",
        "rule_leak@16",
        "baseline_greedy_retain_acc",
        "rule_greedy_retain_acc",
    )
    row = {k: out[k] for k in keys if k in out}
    row["world_from_cache"] = entry.from_cache
    row["seconds"] = time.perf_counter() - t0
    return row
