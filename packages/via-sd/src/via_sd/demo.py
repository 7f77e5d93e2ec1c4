"""``llmcore demo via-sd``: AR vs SD vs HF assisted vs VIA-SD on demo-size models.

The demo reuses llmcore's built-in ``tiny-llama`` (4 layers x 128, which the core demo builds
first) as the target q, and a demo-size drafter p of its own (:func:`demo_drafter_recipe`: one
layer x 64, 200 steps on the same corpus with the same tokenizer spec, so the tokenizers are
identical; checked). The slim verifier q' skips layer 2 of q's 4 (the evenly spaced mask at
ratio 0.45). Prompts are the worked-addition prompts of the core demo (``"47+38:"``, scored on
the sum after ``;``). The claim fixtures (:mod:`via_sd.tiny`) are not built here: they take
minutes cold; ``via-sd make-tiny`` builds them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

DEMO_DRAFTER_STEPS = 200


def demo_drafter_recipe():
    """The demo's drafter: ``tiny-llama``'s corpus and tokenizer spec, 1 layer x 64."""
    from llmcore import zoo
    from llmcore.zoo import ModelSpec

    base = zoo.get_recipe("tiny-llama")
    return replace(
        base,
        name="via-sd-demo-drafter",
        model=ModelSpec(
            arch="llama", hidden_size=64, num_layers=1, num_heads=4, intermediate_size=128
        ),
        train=replace(base.train, steps=DEMO_DRAFTER_STEPS, warmup_steps=20),
        max_eval_loss=2.0,
        description="1-layer Llama drafter for the via-sd demo (tiny-llama's corpus/tokenizer)",
    )


def demo_prompts(n: int, seed: int = 123) -> list[dict[str, Any]]:
    """Worked-addition prompts ``"a+b:"`` with the sum as reference."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        out.append({"id": f"add-{i:03d}", "prompt": f"{a}+{b}:", "reference": str(a + b)})
    return out


def score_sum(output: str, reference: str | None) -> bool | None:
    """The answer after the last ``;`` of a worked addition equals ``reference``."""
    if reference is None:
        return None
    tail = output.rsplit(";", 1)[-1].strip().split(" ")
    return tail[0] == reference.strip()


def load_demo_models():
    """``(target, drafter, tokenizer)``: ``tiny-llama`` and the demo drafter (built or cached)."""
    from llmcore import zoo
    from llmcore.errors import QualityGateError

    target, tok = zoo.build("tiny-llama", progress=False).load()
    drafter, dtok = zoo.build(demo_drafter_recipe(), progress=False).load()
    if tok.get_vocab() != dtok.get_vocab():
        raise QualityGateError("demo drafter tokenizer differs from tiny-llama's; clear the cache")
    return target, drafter, tok


def run(n_prompts: int = 16, print_table: bool = True) -> dict[str, Any]:
    """Side-by-side comparison on ``n_prompts`` addition prompts (one repeat); flat dict."""
    import time

    import torch

    from via_sd.bench import run_bench
    from via_sd.config import ViaSDConfig
    from via_sd.slim import SlimVerifier, layer_mask_even

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        target, drafter, tok = load_demo_models()
        layers = target.config.num_hidden_layers
        slim = SlimVerifier(target, skip_layers=layer_mask_even(layers, 0.45))
        cfg = ViaSDConfig(gamma=4, max_new_tokens=40, eos_token_id=tok.eos_token_id)
        res = run_bench(
            target,
            drafter,
            tok,
            demo_prompts(n_prompts),
            cfg,
            slim=slim,
            repeats=1,
            warmup=0,
            progress=False,
            latencies=False,
            score=score_sum,
        )
    finally:
        torch.set_num_threads(prev)
    if print_table:
        from llmcore.cli import print_table as pt

        pt(res["rows"])
    per = res["summary"]["methods"]
    out: dict[str, Any] = {"prompts": n_prompts, "skip_layers": list(slim.skip_layers)}
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
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out
