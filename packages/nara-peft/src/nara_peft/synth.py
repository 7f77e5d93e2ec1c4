"""The CPU experiment: a tiny masked diffusion LM and a task whose best update
depends on the noise level (noise-regime corruption).

Chains x0 ~ U(16), x_{i+1} = f0(x_i) w.p. 0.9 else uniform. Corruption at level t masks exactly
K = 4 positions (so the mask count says nothing about t) and replaces every other position by
g(x) with probability 0.9 * 1[t >= 0.5]: below lambda = 0.5 neighbours are clean, above they are
mostly g-scrambled, so the Bayes-optimal denoiser for the same input differs between regimes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from nara_peft.tiny import (
    MASK_ID,
    VOCAB,
    logits_of,
    make_chains,
    permutations,
    pretrained_entry,
    pretrained_tiny,
    tiny_model,
)

__all__ = [
    "ARM_PARAMS",
    "MASK_ID",
    "VOCAB",
    "SynthSpec",
    "corrupt",
    "eval_arm",
    "logits_of",
    "make_arm",
    "make_chains",
    "masked_ce",
    "permutations",
    "pretrained_entry",
    "pretrained_tiny",
    "run_experiment",
    "task_batch",
    "tiny_model",
    "train_arm",
    "trainable_params",
]


@dataclass(frozen=True)
class SynthSpec:
    """Shapes and budgets of the synthetic experiment."""

    seq_len: int = 16
    p_chain: float = 0.9
    k_masked: int = 4
    rho: float = 0.9
    threshold: float = 0.5
    perm_seed: int = 1234
    pretrain_steps: int = 1000
    pretrain_batch: int = 64
    pretrain_lr: float = 3e-3
    finetune_steps: int = 400
    batch: int = 64
    lr: float = 3e-3
    eval_n: int = 2000
    eval_grid: tuple[float, ...] = (0.1, 0.3, 0.7, 0.9)
    arms: tuple[str, ...] = ("lora_r4", "lora_r6", "nara_const_r4", "nara_r4")
    nara_c_scale: float = 0.1
    extra: dict[str, Any] = field(default_factory=dict)


def corrupt(
    x: torch.Tensor, t: torch.Tensor, spec: SynthSpec, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask K positions; scramble the others with g w.p. rho * 1[t >= threshold]."""
    _, g = permutations(spec)
    n, T = x.shape
    ranks = torch.rand(n, T, generator=gen).argsort(1).argsort(1)
    masked = ranks < spec.k_masked
    p = spec.rho * (t >= spec.threshold).float()
    scramble = (torch.rand(n, T, generator=gen) < p[:, None]) & ~masked
    noisy = torch.where(scramble, g[x], x)
    noisy = noisy.masked_fill(masked, MASK_ID)
    return noisy, masked


ARM_PARAMS = {"lora_r4": 4096, "lora_r6": 6144, "nara_const_r4": 4096 + 16, "nara_r4": 6224}


def make_arm(name: str, base: torch.nn.Module, spec: SynthSpec, seed: int) -> tuple[Any, bool]:
    """Wrap a copy of ``base`` as one arm; returns ``(model, takes_noise_level)``."""
    import copy

    from peft import LoraConfig, get_peft_model

    from nara_peft.api import get_nara_model
    from nara_peft.config import NaraConfig

    targets = ["q_proj", "k_proj", "v_proj", "o_proj"]
    model = copy.deepcopy(base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name.startswith("lora_r"):
            r = int(name.removeprefix("lora_r"))
            return get_peft_model(
                model, LoraConfig(r=r, lora_alpha=r, target_modules=targets)
            ), False
        if name == "nara_const_r4":
            cfg = NaraConfig(r=4, target_modules=targets, input_mode="constant", c_scale=1.0)
            return get_nara_model(model, cfg), False
        if name.startswith("nara_r4"):
            cfg = NaraConfig(
                r=4,
                target_modules=targets,
                c_scale=float(spec.extra.get("c_scale", spec.nara_c_scale)),
                embedding_dim=16,
                fnn_hidden_size_1=32,
                fnn_hidden_size_2=32,
                fourier_seed=seed,
            )
            return get_nara_model(model, cfg), True
    raise ValueError(f"unknown arm {name!r}; choose from {sorted(ARM_PARAMS)}")


def trainable_params(model: torch.nn.Module) -> int:
    """Number of trainable parameters (counted by identity, so shared tensors count once)."""
    return sum(
        p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values()
    )


def task_batch(
    n: int, spec: SynthSpec, gen: torch.Generator, t: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(clean, noisy, masked, t) with t ~ U(0.01, 0.99) unless given."""
    x = make_chains(n, spec, gen)
    if t is None:
        t = 0.01 + 0.98 * torch.rand(n, generator=gen)
    noisy, masked = corrupt(x, t, spec, gen)
    return x, noisy, masked, t


def masked_ce(
    model: Any,
    x: torch.Tensor,
    noisy: torch.Tensor,
    masked: torch.Tensor,
    t: torch.Tensor,
    takes_noise: bool,
) -> torch.Tensor:
    """Mean CE over the masked positions (lambda = t for NaRA)."""
    logits = logits_of(model, noisy, t if takes_noise else None)
    ce = F.cross_entropy(logits.transpose(1, 2), x, reduction="none")
    return (ce * masked).sum() / masked.sum()


def train_arm(
    model: Any, takes_noise: bool, spec: SynthSpec, seed: int, steps: int | None = None
) -> list[float]:
    """AdamW fine-tuning on the corruption task; returns the loss per step."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=spec.lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(spec.finetune_steps if steps is None else steps):
        x, noisy, masked, t = task_batch(spec.batch, spec, gen)
        loss = masked_ce(model, x, noisy, masked, t, takes_noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def eval_arm(model: Any, takes_noise: bool, spec: SynthSpec, n: int | None = None) -> dict:
    """Masked-token CE and accuracy on held-out sequences at each t of the grid."""
    out: dict[str, dict[str, float]] = {}
    n = spec.eval_n if n is None else n
    for t_val in spec.eval_grid:
        gen = torch.Generator().manual_seed(777 + int(t_val * 1000))
        ces, correct, total = [], 0, 0
        for lo in range(0, n, 500):
            m = min(500, n - lo)
            x, noisy, masked, t = task_batch(m, spec, gen, torch.full((m,), t_val))
            logits = logits_of(model, noisy, t if takes_noise else None)
            ce = F.cross_entropy(logits.transpose(1, 2), x, reduction="none")
            ces.append(float((ce * masked).sum()))
            correct += int(((logits.argmax(-1) == x) & masked).sum())
            total += int(masked.sum())
        out[f"{t_val:g}"] = {"ce": sum(ces) / total, "acc": correct / total}
    return out


def run_experiment(
    seeds: tuple[int, ...] = (0, 1),
    spec: SynthSpec | None = None,
    *,
    progress: bool = False,
    results_path: str | Path | None = None,
) -> dict[str, Any]:
    """All arms x seeds: trainable params, final train loss, per-t CE/acc and the mean CE.

    With ``results_path`` every finished (seed, arm) row is appended atomically and a rerun
    resumes (llmcore ``ResultsWriter``)."""
    from tqdm.auto import tqdm

    from llmcore.data import ResultsWriter, read_jsonl

    spec = spec or SynthSpec()
    base = pretrained_tiny(spec, progress=progress)
    rows: list[dict[str, Any]] = []
    writer = ResultsWriter(results_path) if results_path else None
    done = writer.done_ids if writer is not None else set()
    if writer is not None:
        rows.extend(r for r in read_jsonl(results_path) if r["id"] in done)
    jobs = [(s, a) for s in seeds for a in spec.arms if f"s{s}-{a}" not in done]
    torch.set_num_threads(1)
    for seed, arm in tqdm(jobs, disable=not progress, desc="arms"):
        model, takes = make_arm(arm, base, spec, seed)
        losses = train_arm(model, takes, spec, seed)
        per_t = eval_arm(model, takes, spec)
        row = {
            "id": f"s{seed}-{arm}",
            "seed": seed,
            "arm": arm,
            "trainable_params": trainable_params(model),
            "first_loss": losses[0],
            "final_loss": sum(losses[-20:]) / min(20, len(losses)),
            "per_t": per_t,
            "mean_ce": sum(v["ce"] for v in per_t.values()) / len(per_t),
            "mean_acc": sum(v["acc"] for v in per_t.values()) / len(per_t),
        }
        rows.append(row)
        if writer is not None:
            writer.write(row)
    if writer is not None:
        writer.close()
    by_seed: dict[int, dict[str, float]] = {}
    for r in rows:
        by_seed.setdefault(r["seed"], {})[r["arm"]] = r["mean_ce"]
    spec_d = asdict(spec)
    return {"spec": spec_d, "rows": rows, "mean_ce": {str(k): v for k, v in by_seed.items()}}
