"""``llmcore demo compgen-rl``: SFT vs SFT->RL accuracy per split on a demo-size model.

A small Llama (2 x 64) is trained briefly on canonical traces of the routing-context split
(cached zoo entry, ~15-30 s cold on one thread), then a few GRPO steps on prefiltered RL prompts;
both are evaluated greedily on seen, unseen and OOD prompts. This shows the pipeline, not the
claim (the claim needs the full-size fixture and 60 GRPO steps; see the README).
"""

from __future__ import annotations

import time
from typing import Any

DEMO_SPLIT = dict(n_sft=12_000, n_rl=200, n_test=100, n_ood=50, n_probe=2)


def build_demo_sft(progress: bool = False) -> Any:
    """The demo SFT entry (2 x 64 Llama, 150 steps, seen accuracy gate >= 0.05)."""
    import compgen_rl.hlsm
    import compgen_rl.modules
    from compgen_rl.tiny import claim_split, sft_recipe
    from llmcore import zoo
    from llmcore.zoo.train import completion_loss

    cfg = claim_split(**DEMO_SPLIT)
    base = sft_recipe(cfg, steps=150, name="compgen-rl-demo")
    recipe = zoo.Recipe(
        base.name,
        base.corpus,
        tokenizer=base.tokenizer,
        model=zoo.ModelSpec(
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            intermediate_size=256,
            max_position_embeddings=64,
            tie_word_embeddings=True,
        ),
        train=zoo.TrainSpec(steps=150, batch_size=32, lr=3e-3, warmup_steps=20, max_length=64),
        max_eval_loss=8.0,
        description="demo-size SFT on the routing-context split",
    )
    tok = zoo.recipe_tokenizer(recipe)
    newline = tok.convert_tokens_to_ids(tok.tokenize("\n"))[0]
    return zoo.build(
        recipe,
        progress=progress,
        loss_fn=completion_loss(newline),
        key_extra={
            "loss": "completion after the first newline",
            "code": zoo.code_digest(compgen_rl.hlsm, compgen_rl.modules),
        },
    )


def run(print_table: bool = True, grpo_steps: int = 3) -> dict[str, Any]:
    """Accuracy per split of SFT and SFT->RL (a few GRPO steps); a flat dict."""
    import torch

    from compgen_rl.evaluate import evaluate
    from compgen_rl.tiny import claim_split, split_rows
    from compgen_rl.train import GRPOArgs, run_grpo

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tok = build_demo_sft().load()
        rows, _ = split_rows(claim_split(**DEMO_SPLIT))
        splits = ("test_seen", "test_unseen", "test_ood")
        before = {s: evaluate(model, tok, rows[s]) for s in splits}
        cfg = GRPOArgs(steps=grpo_steps, prompts_per_step=4, num_generations=4, prefilter=False)
        model, stats = run_grpo(model, tok, rows["rl"], cfg)
        after = {s: evaluate(model, tok, rows[s]) for s in splits}
    finally:
        torch.set_num_threads(prev)
    out: dict[str, Any] = {}
    table = []
    for s in splits:
        out[f"sft_{s}_acc"] = round(before[s]["acc"], 3)
        out[f"sft_rl_{s}_acc"] = round(after[s]["acc"], 3)
        table.append(
            {
                "split": s,
                "SFT acc": round(before[s]["acc"], 3),
                "SFT->RL acc": round(after[s]["acc"], 3),
                "SFT step_acc": round(before[s]["step_acc"], 3),
                "SFT->RL step_acc": round(after[s]["step_acc"], 3),
            }
        )
    out["grpo_steps"] = stats["steps"]
    out["frac_reward_zero_std"] = stats["frac_reward_zero_std_mean"]
    if print_table:
        from llmcore.cli import print_table as pt

        pt(table)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out
