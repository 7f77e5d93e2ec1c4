"""The CPU validation experiment on the fictitious-author world (spec 6, issue 5 recipe):
GradDiff stopped when greedy says "forgotten", then leak@k under sampling, RULE from that
checkpoint, and the compute-matched control (same extra steps, no mined samples)."""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from dataclasses import dataclass, field
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
    n: int = field(default=32, metadata={"help": "samples per forget query"})
    k: int = field(default=16, metadata={"help": "k of the headline leak@k"})
    max_new_tokens: int = field(default=16, metadata={"help": "tokens per sample"})
    rounds: int = field(default=3, metadata={"help": "RULE rounds"})
    n_mine: int = field(default=16, metadata={"help": "RULE samples mined per query"})
    epochs_per_round: float = field(default=10.0, metadata={"help": "RULE epochs per round"})
    weighting: str = field(default="count", metadata={"help": "RULE sample weighting"})
    run_rule: bool = field(default=True, metadata={"help": "also run RULE and the control"})


def world_model():
    """(model, tokenizer, world) of the cached world recipe (built on first use, ~2 min)."""
    from llmcore import zoo
    from unlearn_leakk.world import make_world, world_recipe

    entry = zoo.build(world_recipe(), progress=False)
    model, tok = entry.load()
    return model, tok, make_world(0)


def _baseline_key(cfg: WorldConfig) -> str:
    import hashlib
    import json

    from llmcore.zoo.cache import library_versions
    from unlearn_leakk.world import world_recipe

    material = {
        "recipe": world_recipe().key_material(),
        "versions": library_versions(),
        "cfg": {
            k: getattr(cfg, k)
            for k in ("seed", "method", "lr", "max_steps", "stop_acc", "batch_size")
        },
        "format": 1,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def baseline_checkpoint(cfg: WorldConfig, *, progress: bool = False):
    """The greedy-stopped baseline of ``cfg`` as a cached ``save_pretrained`` directory.

    Like the zoo, the deterministic unlearning run is computed once per machine (keyed by the
    world recipe, the baseline settings and library versions) and reused by tests and the
    bench. Returns ``(model, tokenizer, world, info)``.
    """
    import json
    import shutil
    import tempfile
    from pathlib import Path

    from llmcore.models import load_causal_lm, load_tokenizer
    from llmcore.zoo.cache import build_lock, cache_root
    from unlearn_leakk.trainers import UnlearnResult, unlearn

    final = (
        Path(cache_root()).parent / "unlearn-leakk" / f"baseline-{cfg.method}-{_baseline_key(cfg)}"
    )
    final.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(final):
        if not (final / "baseline.json").exists():
            model, tok, world = world_model()
            pair = cfg.seed % 3
            forget = world.qa_items(world.forget_authors(pair))
            retain = world.qa_items(world.retain_authors(pair), split="retain")
            res = UnlearnResult()
            unlearn(model, tok, forget, retain, baseline_config(cfg), result=res, progress=progress)
            tmp = Path(tempfile.mkdtemp(dir=final.parent))
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            info = {
                "base_steps": res.steps,
                "base_stopped": res.stopped_early,
                "base_seconds": res.seconds,
            }
            (tmp / "baseline.json").write_text(json.dumps(info))
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
    info = json.loads((final / "baseline.json").read_text())
    from unlearn_leakk.world import make_world

    return (
        load_causal_lm(final, device="cpu", dtype="float32"),
        load_tokenizer(final),
        make_world(0),
        info,
    )


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
    out: dict[str, Any] = {"seed": cfg.seed, "forget_pair": pair, "method": cfg.method}
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
    # compute-matched control: same extra optimizer steps on the plain forget set
    model.load_state_dict(snapshot)
    ctrl = dataclasses.replace(base, early_stop=None, max_steps=max(1, hist.extra_steps))
    t0 = time.perf_counter()
    unlearn(model, tok, forget, retain, ctrl)
    out["control_seconds"] = time.perf_counter() - t0
    out |= measure(model, tok, world, forget, retain, cfg, tag="control")
    return out
