"""``llmcore demo selfverify-rl``: a warm-up model, then a few GRPO steps per mode.

Uses the warm-up test fixture when it is built (2 layers x 128, 300 SFT steps); otherwise builds
a demo-size one in about 40 s (2 layers x 64, 120 steps: too short to solve many problems, so
its accuracies are near 0 / chance; the demo then shows the pipeline only). It runs 3 GRPO steps of ``gen``, ``verify`` and ``alternate``
(interval 1) from it, and prints greedy generation accuracy and balanced verification accuracy
on 64 held-out problems / 64 candidates. Demo size, not the claim (see the tests for that).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

DEMO_WARMUP: dict[str, Any] = {"hidden_size": 64, "steps": 120, "n_docs": 2000}


def run(print_table: bool = True, steps: int = 3) -> dict[str, Any]:
    """Accuracies of the warm-up and of each mode after ``steps`` GRPO steps; a flat dict."""
    import torch

    from selfverify_rl.evaluate import (
        fixed_verification_set,
        generation_accuracy,
        verification_metrics,
    )
    from selfverify_rl.experiments import (
        WARMUP,
        ArmSpec,
        build_warmup,
        held_out_problems,
        synthetic_candidates,
        train_arm,
    )

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    spec = replace(WARMUP, **DEMO_WARMUP)
    out: dict[str, Any] = {}
    try:
        entry = build_warmup(only_cached=True)  # the test fixture, when it is built
        if entry is None:
            entry = build_warmup(spec, gate=False)
        else:
            spec = WARMUP
        out["warmup_model"] = "fixture" if spec is WARMUP else "demo-size"
        held = held_out_problems(spec)[:64]
        vset = fixed_verification_set(synthetic_candidates(held, seed=1))

        def score(model: Any, tok: Any, name: str) -> None:
            out[f"{name}_gen_acc"] = round(generation_accuracy(model, tok, held)["acc"], 3)
            out[f"{name}_verify_acc"] = round(verification_metrics(model, tok, vset)["acc"], 3)

        score(*entry.load(), "warmup")
        for mode in ("gen", "verify", "alternate"):
            model, tok = entry.load()
            arm = ArmSpec(mode=mode, steps=steps, prompts_per_step=2, num_generations=4,
                          verification_interval=1, max_completion_length=48)  # fmt: skip
            trainer = train_arm(model, tok, arm, spec)
            score(trainer.model.eval(), tok, mode)
    finally:
        torch.set_num_threads(prev)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if print_table:
        print(f"{'model':<10} {'gen acc':>8} {'verify acc':>11}")
        for name in ("warmup", "gen", "verify", "alternate"):
            print(f"{name:<10} {out[f'{name}_gen_acc']:>8} {out[f'{name}_verify_acc']:>11}")
        print(f"({out['seconds']} s; demo size: {steps} GRPO steps per mode)")
    return out
