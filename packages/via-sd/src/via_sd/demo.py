"""``llmcore demo via-sd``: AR vs SD vs HF assisted vs VIA-SD on the tiny fixtures."""

from __future__ import annotations

from typing import Any


def run(n_prompts: int = 16, print_table: bool = True) -> dict[str, Any]:
    """Side-by-side comparison on ``n_prompts`` held-out prompts (one repeat); flat dict."""
    import torch

    from via_sd.bench import run_bench
    from via_sd.config import ViaSDConfig
    from via_sd.slim import SlimVerifier, layer_mask_even
    from via_sd.tiny import build_fixtures, eval_prompts

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fx = build_fixtures()
        slim = SlimVerifier(fx.target, skip_layers=layer_mask_even(8, 0.45))
        cfg = ViaSDConfig(gamma=5, max_new_tokens=48, eos_token_id=fx.tokenizer.eos_token_id)
        res = run_bench(
            fx.target,
            fx.drafter,
            fx.tokenizer,
            eval_prompts(n_prompts),
            cfg,
            slim=slim,
            repeats=1,
            warmup=0,
            progress=False,
            latencies=False,
        )
    finally:
        torch.set_num_threads(prev)
    if print_table:
        from llmcore.cli import print_table as pt

        pt(res["rows"])
    per = res["summary"]["methods"]
    out: dict[str, Any] = {"prompts": n_prompts}
    for m, s in per.items():
        out[f"{m}_target_forwards"] = s["target_forwards"]
        out[f"{m}_accuracy"] = s["accuracy"]
        out[f"{m}_wall_s"] = round(s["wall_s_total"], 3)
    if "via" in per and "sd" in per:
        out["via_over_sd_target_forwards"] = (
            per["via"]["target_forwards"] / per["sd"]["target_forwards"]
        )
        out["via_rejection_rate"] = per["via"]["rejection_rate"]
        out["sd_rejection_rate"] = per["sd"]["rejection_rate"]
    return out
