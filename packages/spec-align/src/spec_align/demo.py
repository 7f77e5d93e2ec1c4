"""``llmcore demo spec-align``: Align3 vs vanilla vs MoreThink on the tiny model (greedy)."""

from __future__ import annotations

from typing import Any


def run() -> dict[str, Any]:
    """Build/load the tiny model, run three methods on the held-out synthetic scenarios."""
    import torch

    from spec_align.backends import tiny_backend
    from spec_align.bench import run_bench
    from spec_align.judge import RuleJudge
    from spec_align.prompts import TINY_TEMPLATES
    from spec_align.tiny import held_out_scenarios

    torch.set_num_threads(1)
    backend = tiny_backend(max_new_tokens=160)
    res = run_bench(
        held_out_scenarios(),
        backend,
        RuleJudge(),
        methods=("vanilla", "more_think", "align3"),
        templates=TINY_TEMPLATES,
        temperature=0.0,
    )
    m = res["methods"]
    return {
        "sar_vanilla": round(m["vanilla"]["SAR"], 4),
        "sar_more_think": round(m["more_think"]["SAR"], 4),
        "sar_align3": round(m["align3"]["SAR"], 4),
        "align3_tokens_x_vanilla": round(m["align3"]["completion_tokens_x_vanilla"], 3),
        "judge": "rule",
    }
