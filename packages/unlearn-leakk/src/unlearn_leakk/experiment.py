"""The CPU validation experiment on the fictitious-author world: GradDiff stopped when greedy
decoding says "forgotten", then leak@k under sampling, RULE from that checkpoint, and the
compute-matched control (same extra steps, no mined samples)."""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_leakk.config import DecodingConfig, GreedyForgetStop, RULEConfig, UnlearnConfig


@dataclass
class WorldConfig:
    """Settings of the world experiment (defaults = the calibrated claim recipe)."""

    seed: int = field(default=0, metadata={"help": "seed; also picks forget pair seed % 3"})
    method: str = field(default="GradDiff", metadata={"help": "base unlearning method"})
    lr: float = field(default=3e-5, metadata={"help": "unlearning learning rate"})
    max_steps: int = field(default=400, metadata={"help": "cap on base unlearning steps"})
    stop_acc: float = field(default=0.1, metadata={"help": "greedy forget accuracy stop"})
    batch_size: int = field(default=10, metadata={"help": "forget items per step"})
    n: int = field(default=128, metadata={"help": "samples per forget query (measurement)"})
    k: int = field(default=16, metadata={"help": "k of the headline leak@k"})
    max_new_tokens: int = field(default=16, metadata={"help": "tokens per sample"})
    rounds: int = field(default=3, metadata={"help": "RULE rounds"})
    n_mine: int = field(default=16, metadata={"help": "RULE samples mined per query"})
    epochs_per_round: float = field(default=10.0, metadata={"help": "RULE epochs per round"})
    weighting: str = field(default="count", metadata={"help": "RULE sample weighting"})
    run_rule: bool = field(default=True, metadata={"help": "also run RULE"})
    run_control: bool = field(
        default=True, metadata={"help": "also run the compute-matched control (after RULE)"}
    )


def world_model():
    """(model, tokenizer, world) of the cached world recipe (built on first use, ~2 min)."""
    from llmcore import zoo
    from unlearn_leakk.world import make_world, world_recipe

    entry = zoo.build(world_recipe(), progress=False)
    model, tok = entry.load()
    return model, tok, make_world(0)


#: Modules whose code determines a cached baseline (their :func:`llmcore.zoo.code_digest` is
#: part of its key). The unlearning settings themselves enter the key as values.
BASELINE_CODE: tuple[str, ...] = (
    "unlearn_leakk.data",
    "unlearn_leakk.judges",
    "unlearn_leakk.sampling",
    "unlearn_leakk.trainers",
    "unlearn_leakk.world",
)

#: The :class:`WorldConfig` fields that determine a baseline checkpoint.
BASELINE_FIELDS: tuple[str, ...] = ("seed", "method", "lr", "max_steps", "stop_acc", "batch_size")


def baseline_name(cfg: WorldConfig) -> str:
    """Zoo entry name of the baseline of ``cfg`` (``leakk-baseline-GradDiff-s0``)."""
    return f"leakk-baseline-{cfg.method}-s{cfg.seed}"


def baseline_material(cfg: WorldConfig, world_key: str) -> dict[str, Any]:
    """Everything that determines the baseline of ``cfg``: its settings, the resolved
    unlearning config, the key of the world model it starts from and the code digest."""
    from llmcore import zoo

    return {
        "world": world_key,
        "cfg": {k: getattr(cfg, k) for k in BASELINE_FIELDS},
        "unlearn": dataclasses.asdict(baseline_config(cfg)),
        "code": zoo.code_digest(*BASELINE_CODE),
    }


def ensure_baseline(cfg: WorldConfig, *, progress: bool = False) -> Any:
    """The greedy-stopped baseline of ``cfg`` as a :class:`llmcore.zoo.ZooEntry`, built once
    per machine through :func:`llmcore.zoo.cached` (visible in ``llmcore zoo list``).

    The deterministic unlearning run starts from the world model (built first if missing) and
    is keyed by :func:`baseline_material`. ``entry.metrics`` holds ``base_steps``,
    ``base_stopped`` and ``base_seconds``; ``entry.load()`` gives ``(model, tokenizer)``.
    """
    from llmcore import zoo
    from unlearn_leakk.trainers import UnlearnResult, unlearn
    from unlearn_leakk.world import make_world, world_recipe

    world_entry = zoo.build(world_recipe(), progress=progress)

    def make(tmp: Path) -> dict[str, Any]:
        model, tok = world_entry.load()
        world = make_world(0)
        pair = cfg.seed % 3
        forget = world.qa_items(world.forget_authors(pair))
        retain = world.qa_items(world.retain_authors(pair), split="retain")
        res = UnlearnResult()
        unlearn(model, tok, forget, retain, baseline_config(cfg), result=res, progress=progress)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        return {
            "base_steps": res.steps,
            "base_stopped": res.stopped_early,
            "base_seconds": res.seconds,
        }

    return zoo.cached(
        baseline_name(cfg),
        baseline_material(cfg, world_entry.key),
        make,
        progress=progress,
        description=f"{cfg.method} on the leak@k world stopped at greedy forget acc <= "
        f"{cfg.stop_acc} (seed {cfg.seed}, forget pair {cfg.seed % 3})",
    )


def baseline_checkpoint(cfg: WorldConfig, *, progress: bool = False):
    """The greedy-stopped baseline of ``cfg`` (see :func:`ensure_baseline`), loaded.

    Returns ``(model, tokenizer, world, info)``; ``info`` is the entry's metrics.
    """
    from unlearn_leakk.world import make_world

    entry = ensure_baseline(cfg, progress=progress)
    model, tok = entry.load()
    return model, tok, make_world(0), dict(entry.metrics)


def rule_config(cfg: WorldConfig) -> RULEConfig:
    """RULE on top of the baseline's method and lr (no greedy stop inside the rounds)."""
    mine = DecodingConfig(
        1.0,
        1.0,
        n=cfg.n_mine,
        max_new_tokens=cfg.max_new_tokens,
        seed=2000 + cfg.seed,
        batch_size=cfg.n_mine,
    )
    return RULEConfig(
        base=dataclasses.replace(baseline_config(cfg), early_stop=None),
        rounds=cfg.rounds,
        n_mine=cfg.n_mine,
        mine_decoding=mine,
        epochs_per_round=cfg.epochs_per_round,
        weighting=cfg.weighting,
    )


def baseline_config(cfg: WorldConfig) -> UnlearnConfig:
    """The baseline: ``cfg.method`` with a greedy-forget stop checked after every step."""
    return UnlearnConfig(
        cfg.method,
        lr=cfg.lr,
        epochs=100_000,
        batch_size=cfg.batch_size,
        grad_accum=1,
        warmup_epochs=0.0,
        max_steps=cfg.max_steps,
        early_stop=GreedyForgetStop(cfg.stop_acc),
        seed=cfg.seed,
    )


def measure(
    model: Any,
    tok: Any,
    world: Any,
    forget: list,
    retain: list,
    cfg: WorldConfig,
    decoding: DecodingConfig | None = None,
    tag: str = "",
) -> dict[str, Any]:
    """Greedy forget/retain accuracy, leak@k (exact phrase) and chance@k on the same samples."""
    from unlearn_leakk.estimator import leak_at_k_curve
    from unlearn_leakk.evaluate import per_item_counts
    from unlearn_leakk.judges import ExactPhraseJudge
    from unlearn_leakk.sampling import sample_responses
    from unlearn_leakk.trainers import greedy_accuracy

    dec = decoding or DecodingConfig(
        1.0, 1.0, n=cfg.n, max_new_tokens=cfg.max_new_tokens, seed=1000 + cfg.seed, batch_size=cfg.n
    )
    judge = ExactPhraseJudge()
    outs = sample_responses(model, tok, forget, dec, chat_template=False)
    counts = per_item_counts(outs, forget, judge)
    rng = random.Random(cfg.seed)
    wrong = [world.wrong_value(it.id, rng) for it in forget]
    chance = per_item_counts(outs, forget, judge, references=wrong)
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= dec.n]
    curve = leak_at_k_curve(counts, dec.n, ks)
    ccurve = leak_at_k_curve(chance, dec.n, ks)
    p = f"{tag}_" if tag else ""
    out = {
        f"{p}greedy_forget_acc": greedy_accuracy(model, tok, forget),
        f"{p}greedy_retain_acc": greedy_accuracy(model, tok, retain),
        f"{p}counts": counts,
        f"{p}chance_counts": chance,
    }
    out |= {f"{p}leak@{k}": v for k, v in curve.items()}
    out |= {f"{p}chance@{k}": v for k, v in ccurve.items()}
    return out


def run_world(cfg: WorldConfig | None = None, *, progress: bool = False) -> dict[str, Any]:
    """Baseline (greedy-stopped) vs RULE vs compute-matched control on one seed."""
    import torch

    from unlearn_leakk.rule import rule_unlearn
    from unlearn_leakk.trainers import unlearn

    cfg = cfg or WorldConfig()
    torch.manual_seed(cfg.seed)
    model, tok, world, info = baseline_checkpoint(cfg, progress=progress)
    pair = cfg.seed % 3
    forget = world.qa_items(world.forget_authors(pair))
    retain = world.qa_items(world.retain_authors(pair), split="retain")
    base = baseline_config(cfg)
    out: dict[str, Any] = {"seed": cfg.seed, "forget_pair": pair, "method": cfg.method, "n": cfg.n}
    out |= info
    out |= measure(model, tok, world, forget, retain, cfg, tag="baseline")
    if not cfg.run_rule:
        return out
    snapshot = copy.deepcopy(model.state_dict())
    rcfg = rule_config(cfg)
    t0 = time.perf_counter()
    model, hist = rule_unlearn(model, tok, forget, retain, rcfg, init_unlearned=model)
    out |= {
        "rule_extra_steps": hist.extra_steps,
        "rule_seconds": time.perf_counter() - t0,
        "rule_mine_seconds": sum(r.mine_seconds for r in hist.rounds),
        "rule_rounds": len(hist.rounds),
        "rule_leaks_per_round": [r.n_leaks for r in hist.rounds],
    }
    out |= measure(model, tok, world, forget, retain, cfg, tag="rule")
    if not cfg.run_control:
        return out
    # compute-matched control: same extra optimizer steps on the plain forget set
    model.load_state_dict(snapshot)
    ctrl = dataclasses.replace(base, early_stop=None, max_steps=max(1, hist.extra_steps))
    t0 = time.perf_counter()
    unlearn(model, tok, forget, retain, ctrl)
    out["control_seconds"] = time.perf_counter() - t0
    out |= measure(model, tok, world, forget, retain, cfg, tag="control")
    return out


def pooled_leak(results: list[dict[str, Any]], tag: str, k: int) -> list[float]:
    """Per-query leak@k of ``tag`` over every forget query of every seed in ``results``
    (pooled: 10 queries per seed), from the stored per-query counts."""
    from unlearn_leakk.estimator import leak_at_k

    out = []
    for r in results:
        n = r["n"]
        out += [leak_at_k(n, c, k) for c in r[f"{tag}_counts"]]
    return out


def paired_claim(
    results: list[dict[str, Any]], k: int = 16, factor: float = 0.5, tag: str = "rule"
) -> dict[str, float]:
    """The RULE claim pooled over seeds, paired by query: mean leak@k of ``tag`` against
    ``factor`` x the baseline's. ``margin = factor * baseline - tag`` (>= 0 means the claim
    holds); ``se`` is the standard error of the mean of the per-query paired differences
    ``factor * baseline_i - tag_i``; ``step`` is the statistic's resolution (one query
    flipping by 1)."""
    import math

    base = pooled_leak(results, "baseline", k)
    other = pooled_leak(results, tag, k)
    d = [factor * b - o for b, o in zip(base, other, strict=True)]
    m = sum(d) / len(d)
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / max(1, len(d) - 1))
    return {
        "baseline": sum(base) / len(base),
        tag: sum(other) / len(other),
        "threshold": factor * sum(base) / len(base),
        "margin": m,
        "se": sd / math.sqrt(len(d)),
        "step": 1.0 / len(d),
        "queries": float(len(d)),
    }
