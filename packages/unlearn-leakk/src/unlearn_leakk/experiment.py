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


#: Source files whose code determines a cached baseline (their digest is part of its key).
_BASELINE_CODE = ("config.py", "data.py", "trainers.py", "world.py")


def _code_digest() -> str:
    import hashlib
    from pathlib import Path

    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in _BASELINE_CODE:
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
    return h.hexdigest()[:16]


def _baseline_key(cfg: WorldConfig) -> str:
    import hashlib
    import json

    from llmcore.zoo.cache import library_versions
    from unlearn_leakk.world import world_recipe

    material = {
        "recipe": world_recipe().key_material(),
        "versions": library_versions(),
        "code": _code_digest(),
        "cfg": {
            k: getattr(cfg, k)
            for k in ("seed", "method", "lr", "max_steps", "stop_acc", "batch_size")
        },
        "format": 1,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class BaselineEntry:
    """A cached greedy-stopped baseline: its directory, run info, and whether it was cached."""

    path: Any
    info: dict[str, Any]
    from_cache: bool
    seconds: float = 0.0


def baseline_dir(cfg: WorldConfig):
    """Cache directory of the baseline of ``cfg`` (beside llmcore's zoo, keyed like it)."""
    from pathlib import Path

    from llmcore.zoo.cache import cache_root

    name = f"baseline-{cfg.method}-{_baseline_key(cfg)}"
    return Path(cache_root()).parent / "unlearn-leakk" / name


def ensure_baseline(cfg: WorldConfig, *, progress: bool = False) -> BaselineEntry:
    """Build (once per machine, under a file lock) or find the baseline of ``cfg``.

    The deterministic unlearning run is keyed by the world recipe, the baseline settings,
    library versions and a digest of the code that makes it, like a zoo entry.
    """
    import json
    import shutil
    import tempfile
    from pathlib import Path

    from llmcore.zoo.cache import build_lock
    from unlearn_leakk.trainers import UnlearnResult, unlearn

    final = baseline_dir(cfg)
    final.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    built = False
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
            built = True
    info = json.loads((final / "baseline.json").read_text())
    return BaselineEntry(final, info, not built, time.perf_counter() - t0)


def baseline_checkpoint(cfg: WorldConfig, *, progress: bool = False):
    """The greedy-stopped baseline of ``cfg`` (see :func:`ensure_baseline`), loaded.

    Returns ``(model, tokenizer, world, info)``.
    """
    from llmcore.models import load_causal_lm, load_tokenizer
    from unlearn_leakk.world import make_world

    entry = ensure_baseline(cfg, progress=progress)
    return (
        load_causal_lm(entry.path, device="cpu", dtype="float32"),
        load_tokenizer(entry.path),
        make_world(0),
        entry.info,
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
