"""``llmcore demo nara-peft``: NaRA r4 vs LoRA r6 (matched parameters) on the synthetic noise-regime task."""

from __future__ import annotations

from typing import Any


def run(steps: int = 200, eval_n: int = 500) -> dict[str, Any]:
    """Short version of the claim experiment (1 seed); returns a flat dict."""
    import torch

    from nara_peft.synth import SynthSpec, run_experiment

    torch.set_num_threads(1)
    spec = SynthSpec(finetune_steps=steps, eval_n=eval_n, arms=("lora_r6", "nara_r4"))
    rep = run_experiment((0,), spec)
    out: dict[str, Any] = {"task": "noise-regime corruption", "steps": steps}
    for r in rep["rows"]:
        out[f"{r['arm']}_params"] = r["trainable_params"]
        out[f"{r['arm']}_masked_ce"] = round(r["mean_ce"], 4)
        out[f"{r['arm']}_masked_acc"] = round(r["mean_acc"], 4)
    out["ce_gain_vs_lora"] = round(out["lora_r6_masked_ce"] - out["nara_r4_masked_ce"], 4)
    return out
