"""Side-by-side benchmark: NaRA vs LoRA r4/r6 vs NaRA-constant.

Quality (final train loss, held-out masked CE/accuracy per noise level) on the synthetic noise-regime task, plus
cost ratios to LoRA at equal r: training step time, denoising-step latency, peak training
memory (saved activations + adapter parameters/gradients/AdamW state), on the tiny model and a
mid-size config (hidden 512, 8 layers, seq 256, batch 4, r 16).
"""

from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from nara_peft.options import BenchConfig
from nara_peft.synth import (
    MASK_ID,
    SynthSpec,
    logits_of,
    make_arm,
    pretrained_tiny,
    run_experiment,
    trainable_params,
)


def _best_time(fn: Any, reps: int) -> float:
    """Best of ``reps`` timed calls after a warm-up (robust to other load on shared CPUs)."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _peak_train_bytes(model: Any, x: torch.Tensor, lam: torch.Tensor | None) -> int:
    """Bytes saved for backward in one step + 4x trainable params (param, grad, Adam m, v)."""
    saved = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal saved
        saved += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = logits_of(model, x, lam)
    out.float().pow(2).mean().backward()
    model.zero_grad(set_to_none=True)
    adapter = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return saved + 4 * adapter


def _cost(model: Any, takes: bool, x: torch.Tensor, reps: int) -> dict[str, float]:
    lam = torch.full((x.shape[0],), 0.5) if takes else None
    model.train()

    def step() -> None:
        out = logits_of(model, x, lam)
        F.cross_entropy(out.transpose(1, 2), x).backward()
        model.zero_grad(set_to_none=True)

    def infer() -> None:
        with torch.no_grad():
            logits_of(model, x[:1], lam[:1] if lam is not None else None)

    train_s = _best_time(step, reps)
    model.eval()
    infer_s = _best_time(infer, reps)
    mem = _peak_train_bytes(model, x, lam)
    return {"train_step_s": train_s, "infer_step_s": infer_s, "train_mem_bytes": mem}


def _midsize(reps: int, r: int = 16) -> dict[str, Any]:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from nara_peft.api import get_nara_model
    from nara_peft.config import NaraConfig

    cfg = LlamaConfig(
        vocab_size=1024,
        hidden_size=512,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        intermediate_size=1376,
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    base = LlamaForCausalLM(cfg)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj"]
    x = torch.randint(0, 1024, (4, 256), generator=torch.Generator().manual_seed(0))
    out: dict[str, Any] = {}
    lora = get_peft_model(
        copy.deepcopy(base), LoraConfig(r=r, lora_alpha=r, target_modules=targets)
    )
    out["lora"] = _cost(lora, False, x, reps)
    out["lora"]["trainable_params"] = trainable_params(lora)
    del lora
    nara = get_nara_model(copy.deepcopy(base), NaraConfig(r=r, target_modules=targets, c_scale=0.1))
    out["nara"] = _cost(nara, True, x, reps)
    out["nara"]["trainable_params"] = trainable_params(nara)
    return out


def _generate_step_time(spec: SynthSpec, reps: int) -> dict[str, float]:
    from nara_peft.diffusion import generate

    base = pretrained_tiny(spec)
    prompt = torch.randint(0, 16, (1, 8), generator=torch.Generator().manual_seed(0))
    res = {}
    for arm in ("lora_r4", "nara_r4"):
        model, takes = make_arm(arm, base, spec, 0)
        model.eval()
        res[arm] = (
            _best_time(
                lambda m=model, t=takes: generate(
                    m,
                    prompt,
                    mask_token_id=MASK_ID,
                    steps=8,
                    gen_length=8,
                    block_length=8,
                    pass_noise=t,
                ),
                reps,
            )
            / 8
        )
        if arm == "lora_r4":
            merged = model.merge_and_unload()
            res["lora_r4_merged"] = (
                _best_time(
                    lambda m=merged: generate(
                        m,
                        prompt,
                        mask_token_id=MASK_ID,
                        steps=8,
                        gen_length=8,
                        block_length=8,
                        pass_noise=False,
                    ),
                    reps,
                )
                / 8
            )
    return res


def run_bench(cfg: BenchConfig | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Everything in one run; returns the JSON-able report (see README for the table)."""
    cfg = cfg or BenchConfig()
    torch.set_num_threads(1)
    spec = SynthSpec(finetune_steps=cfg.steps, eval_n=cfg.eval_n)
    quality = run_experiment(tuple(cfg.seeds), spec, progress=progress)
    base = pretrained_tiny(spec)
    x = torch.randint(0, 16, (spec.batch, spec.seq_len), generator=torch.Generator().manual_seed(1))
    tiny_cost = {}
    for arm in spec.arms:
        model, takes = make_arm(arm, base, spec, 0)
        tiny_cost[arm] = _cost(model, takes, x, cfg.timing_reps)
    report: dict[str, Any] = {
        "config": {"seeds": list(cfg.seeds), "steps": cfg.steps, "eval_n": cfg.eval_n},
        "quality_rows": quality["rows"],
        "tiny_cost": tiny_cost,
        "generate_step_s": _generate_step_time(spec, cfg.timing_reps),
    }
    if cfg.midsize:
        report["midsize_cost"] = _midsize(cfg.timing_reps)
    report["table"] = summary_rows(report)
    return report


def summary_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per arm: params, quality (mean over seeds), cost ratios to LoRA at equal r."""
    rows = []
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in report["quality_rows"]:
        by_arm.setdefault(r["arm"], []).append(r)
    ref = report["tiny_cost"]["lora_r4"]
    for arm, rs in by_arm.items():
        c = report["tiny_cost"][arm]
        rows.append(
            {
                "arm": arm,
                "params": rs[0]["trainable_params"],
                "final_loss": statistics.mean(r["final_loss"] for r in rs),
                "ce": statistics.mean(r["mean_ce"] for r in rs),
                "acc": statistics.mean(r["mean_acc"] for r in rs),
                "ce_t<0.5": statistics.mean(
                    (r["per_t"]["0.1"]["ce"] + r["per_t"]["0.3"]["ce"]) / 2 for r in rs
                ),
                "ce_t>0.5": statistics.mean(
                    (r["per_t"]["0.7"]["ce"] + r["per_t"]["0.9"]["ce"]) / 2 for r in rs
                ),
                "train_x": c["train_step_s"] / ref["train_step_s"],
                "infer_x": c["infer_step_s"] / ref["infer_step_s"],
                "mem_x": c["train_mem_bytes"] / ref["train_mem_bytes"],
            }
        )
    return rows


def format_table(report: dict[str, Any]) -> str:
    """Markdown table of :func:`summary_rows` plus the mid-size and sampler timings."""
    cols = [
        "arm",
        "params",
        "final_loss",
        "ce",
        "acc",
        "ce_t<0.5",
        "ce_t>0.5",
        "train_x",
        "infer_x",
        "mem_x",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in report["table"]:
        cells = [f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    g = report["generate_step_s"]
    lines.append("")
    lines.append(
        f"denoising step (tiny, batch 1): LoRA {1e3 * g['lora_r4']:.2f} ms, NaRA "
        f"{1e3 * g['nara_r4']:.2f} ms ({g['nara_r4'] / g['lora_r4']:.2f}x), merged LoRA "
        f"{1e3 * g['lora_r4_merged']:.2f} ms"
    )
    if "midsize_cost" in report:
        m = report["midsize_cost"]
        lines.append(
            "mid-size (hidden 512, 8 layers, seq 256, batch 4, r 16): NaRA/LoRA train step "
            f"{m['nara']['train_step_s'] / m['lora']['train_step_s']:.3f}x, inference "
            f"{m['nara']['infer_step_s'] / m['lora']['infer_step_s']:.3f}x, memory "
            f"{m['nara']['train_mem_bytes'] / m['lora']['train_mem_bytes']:.3f}x, params "
            f"{m['nara']['trainable_params']:,} vs {m['lora']['trainable_params']:,}"
        )
    return "\n".join(lines)


def plot_buckets(report: dict[str, Any], path: str | Path) -> bool:
    """Validation CE per noise-level bucket, one line per arm (needs the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    by_arm: dict[str, dict[float, list[float]]] = {}
    for r in report["quality_rows"]:
        for t, v in r["per_t"].items():
            by_arm.setdefault(r["arm"], {}).setdefault(float(t), []).append(v["ce"])
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for arm, d in by_arm.items():
        ts = sorted(d)
        ax.plot(ts, [statistics.mean(d[t]) for t in ts], marker="o", label=arm)
    ax.set_xlabel("noise level lambda")
    ax.set_ylabel("held-out masked CE")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
