"""``llmcore demo spec-align``: Align3 vs vanilla vs MoreThink (greedy) on the demo-size tiny
model (:data:`spec_align.tiny.DEMO_CONFIG`: same world and code path, far fewer training steps)
and a subset of the held-out scenarios' items; the claim tests run the full model."""

from __future__ import annotations

from typing import Any

#: Items per held-out scenario in the demo (safe, unsafe); the claim test uses 24 + 16.
DEMO_ITEMS = (6, 4)


def run() -> dict[str, Any]:
    """Build/load the demo-size model, run three methods on the held-out synthetic scenarios."""
    import torch

    from spec_align.backends import HFBackend
    from spec_align.bench import run_bench
    from spec_align.judge import RuleJudge
    from spec_align.prompts import TINY_TEMPLATES
    from spec_align.tiny import DEMO_CONFIG, TinyConfig, build_tiny_model, held_out_scenarios

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        entry = build_tiny_model(DEMO_CONFIG, progress=True)  # a cold build shows its bar
        model, tok = entry.load()
        backend = HFBackend(model, tok, prepend_bos=True, max_new_tokens=160)
        backend.name = "tiny-demo"
        scenarios = held_out_scenarios(*DEMO_ITEMS)
        res = run_bench(
            scenarios,
            backend,
            RuleJudge(),
            methods=("vanilla", "more_think", "align3"),
            templates=TINY_TEMPLATES,
            temperature=0.0,
        )
    finally:
        torch.set_num_threads(prev)
    m = res["methods"]
    return {
        "sar_vanilla": round(m["vanilla"]["SAR"], 4),
        "sar_more_think": round(m["more_think"]["SAR"], 4),
        "sar_align3": round(m["align3"]["SAR"], 4),
        "align3_tokens_x_vanilla": round(m["align3"]["completion_tokens_x_vanilla"], 3),
        "judge": "rule",
        "items": sum(len(s.items) for s in scenarios),
        "fixture": (
            f"demo-size ({DEMO_CONFIG.steps} training steps of batch {DEMO_CONFIG.batch_size}, "
            f"not {TinyConfig().steps} of {TinyConfig().batch_size}; "
            f"{sum(DEMO_ITEMS)} items per held-out scenario, not 40); "
            "the claim runs on the full fixture"
        ),
    }
