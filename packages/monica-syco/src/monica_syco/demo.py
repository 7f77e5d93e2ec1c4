"""``llmcore demo monica-syco``: plain vs MONICA generation on the colour world: sycophancy
rates on strong wrong cues and one trajectory's step scores. Uses the test fixture when it
is cached, else a demo-size world (12 entities, 2 x 64 Llama, built in seconds, no gates)."""

from __future__ import annotations

import time
from typing import Any


def run(seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Flat results row (see module doc)."""
    import torch

    from llmcore.runtime import num_threads, set_seed
    from monica_syco.collect import collect_steps, fit_calibrator, fit_monitor
    from monica_syco.evaluate import evaluate
    from monica_syco.experiment import strong
    from monica_syco.monitor import default_layers
    from monica_syco.world import (
        TinyModelConfig,
        build_tiny_model,
        lookup_tiny_model,
        make_synthetic_world,
    )

    t0 = time.perf_counter()
    with num_threads(1):
        set_seed(seed)
        cfg = TinyModelConfig()
        entry = lookup_tiny_model(cfg) or build_tiny_model(
            TinyModelConfig(
                n_entities=12,
                hidden=64,
                layers=2,
                steps=300,
                lr=5e-3,
                n_conversations=1200,
                gates=False,
            ),
            progress=progress,
        )
        model, tok = entry.load()
        n_ent = (model.config.hidden_size == 96 and 48) or 12
        world = make_synthetic_world(0, n_ent)
        layers = default_layers(model.config.num_hidden_layers)
        ds = collect_steps(
            model, tok, world.items("train"), layers, n_samples=2, max_new_tokens=72, batch_size=64
        )
        mon = fit_monitor(ds, layers)
        # alpha_max as chosen on dev by the claim's pipeline for the test fixture
        cal = fit_calibrator(ds, mon.layers, alpha_max=4.0)
        test = world.items("test")
        with torch.no_grad():
            none = evaluate(model, tok, test, "none", mon, max_new_tokens=72)
            mon_r = evaluate(model, tok, test, "monica", mon, cal, max_new_tokens=72)
    ex = next((r for r in none.records if r["sycophantic"]), none.records[0])
    return {
        "model": "test fixture" if n_ent == 48 else "demo world",
        "syc_rate_strong_plain": strong(none).get("syc_rate"),
        "syc_rate_strong_monica": strong(mon_r).get("syc_rate"),
        "acc_clean_plain": none.metrics["acc_clean"],
        "acc_clean_monica": mon_r.metrics["acc_clean"],
        "step_auroc": none.metrics["step_auroc"],
        "example_steps": " | ".join(ex["steps"]),
        "example_sds": [round(s, 3) for s in ex["sds"]],
        "seconds": time.perf_counter() - t0,
    }
