"""RULE — Robust Unlearning under LEak@k (RECONSTRUCTED: no official trainer is published).

Minimising leak@k(x) = 1 - (1 - l(x))^k means lowering the likelihood of the model's own
sampled leaking responses (score-function gradient weighted by k (1 - l)^(k-1)). RULE does this
as rounds of on-policy forget-set augmentation inside a base unlearning method:

    min_theta  gamma * L_forget^base(theta; D_f u D_leak(theta)) + alpha * L_retain(theta; D_r)
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from unlearn_leakk.config import RULEConfig
from unlearn_leakk.data import LeakItem, validate_items
from unlearn_leakk.errors import LeakConfigError

log = logging.getLogger(__name__)


@dataclass
class RULERound:
    """One mining + training round."""

    round: int
    n_leaks: int
    n_leak_items_total: int
    leak_at_k: dict[int, float]
    retain_acc: float | None
    mine_seconds: float
    train_seconds: float
    train_steps: int


@dataclass
class RULEHistory:
    """Per-round history of :func:`rule_unlearn` plus the base run's steps/seconds."""

    rounds: list[RULERound] = field(default_factory=list)
    base_steps: int = 0
    base_seconds: float = 0.0

    @property
    def extra_steps(self) -> int:
        """Optimizer steps taken after the base run (the compute-matched control's budget)."""
        return sum(r.train_steps for r in self.rounds)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"extra_steps": self.extra_steps}


def _mining_judge(cfg: RULEConfig):
    from unlearn_leakk.judges import ExactPhraseJudge, NLIEntailmentJudge, RougeRecallJudge

    if cfg.judge == "exact":
        return ExactPhraseJudge()
    if cfg.judge == "rouge":
        return RougeRecallJudge(cfg.judge_threshold)
    if cfg.judge == "es":
        return NLIEntailmentJudge()
    raise LeakConfigError(f"RULE judge={cfg.judge!r}; use 'exact', 'rouge' or 'es'")


def mine_queries(forget: Sequence[LeakItem], include_original: bool) -> list[LeakItem]:
    """Forget queries to mine: each item, plus its ``meta["question"]`` variant when present
    (TOFU: both ``question`` and ``paraphrased_question``)."""
    out = list(forget)
    if include_original:
        for it in forget:
            q = it.meta.get("question") if it.meta else None
            if q and q != it.question:
                out.append(dataclasses.replace(it, id=f"{it.id}#q", question=q, meta={}))
    return out


def leakk_weights(items: Sequence[LeakItem], rate: dict[str, float], k_target: int) -> list[float]:
    """``w = k (1 - l)^(k-1)`` for mined items (by source id), 1 for original items,
    renormalised to mean 1."""
    w = []
    for it in items:
        src = it.meta.get("source") if it.meta else None
        w.append(k_target * (1 - rate[src]) ** (k_target - 1) if src in rate else 1.0)
    mean = sum(w) / len(w)
    return [x / mean for x in w] if mean > 0 else [1.0] * len(w)


def count_weights(items: Sequence[LeakItem]) -> list[float]:
    """Weight each mined response by how often it was sampled (1 for original items),
    renormalised to mean 1: the Monte-Carlo estimate of E_y[J(y) grad log pi(y|x)] with
    duplicate samples merged instead of dropped."""
    w = [float(it.meta.get("count", 1)) if it.meta else 1.0 for it in items]
    mean = sum(w) / len(w)
    return [x / mean for x in w]


def rule_unlearn(
    model: Any,
    tokenizer: Any,
    forget: Sequence[LeakItem],
    retain: Sequence[LeakItem] | None,
    cfg: RULEConfig,
    init_unlearned: Any = None,
    *,
    chat_template: bool = False,
    retain_eval: Sequence[LeakItem] | None = None,
    progress: bool = False,
) -> tuple[Any, RULEHistory]:
    """RULE. ``init_unlearned`` (a model or path) skips step 1, the base unlearning
    of ``model``; otherwise ``model`` is unlearned with ``cfg.base`` first. Returns the final
    model and the history (leaks mined per round, leak@k on mined samples, retain accuracy)."""
    from unlearn_leakk.estimator import leak_at_k_curve
    from unlearn_leakk.sampling import sample_responses
    from unlearn_leakk.trainers import UnlearnResult, greedy_accuracy, unlearn

    if not isinstance(cfg, RULEConfig):
        raise LeakConfigError(f"rule_unlearn needs a RULEConfig, got {type(cfg).__name__}")
    forget = validate_items(forget, what="forget items")
    history = RULEHistory()
    if init_unlearned is not None:
        if isinstance(init_unlearned, str) or hasattr(init_unlearned, "__fspath__"):
            from llmcore.models import load_causal_lm

            model = load_causal_lm(init_unlearned)
        else:
            model = init_unlearned
    else:
        res = UnlearnResult()
        model = unlearn(
            model,
            tokenizer,
            forget,
            retain,
            cfg.base,
            chat_template=chat_template,
            result=res,
            progress=progress,
        )
        history.base_steps, history.base_seconds = res.steps, res.seconds
    judge = _mining_judge(cfg)
    queries = mine_queries(forget, cfg.include_original_question)
    by_id = {it.id: it for it in forget}
    mined: list[LeakItem] = []
    seen: set[tuple[str, str]] = set()
    round_cfg = dataclasses.replace(
        cfg.base, epochs=cfg.epochs_per_round, early_stop=None, warmup_epochs=0.0, max_steps=None
    )
    assert cfg.mine_decoding is not None
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= cfg.n_mine]
    for r in range(1, cfg.rounds + 1):
        t0 = time.perf_counter()
        dec = dataclasses.replace(cfg.mine_decoding, seed=cfg.mine_decoding.seed + 10_007 * r)
        outs = sample_responses(model, tokenizer, queries, dec, chat_template=chat_template)
        counts, rate, new = [], {}, 0
        for it, resp in zip(queries, outs, strict=True):
            src = it.id.split("#", 1)[0]
            flags = judge(resp, it.answer, it.question)
            c = int(sum(f >= 0.5 for f in flags))
            counts.append(c)
            rate[src] = max(rate.get(src, 0.0), c / len(resp))
            mult: dict[str, int] = {}
            for y, f in zip(resp, flags, strict=True):
                if f >= 0.5 and y.strip():
                    mult[y] = mult.get(y, 0) + 1
            for y, f in zip(resp, flags, strict=True):
                key = (it.question, y)
                if f >= 0.5 and y.strip() and key not in seen:
                    seen.add(key)
                    base = by_id[src]
                    mined.append(
                        LeakItem(
                            f"{src}-leak{r}-{new}",
                            it.question,
                            base.answer,
                            split="forget",
                            meta={"target": " " + y.strip(), "source": src, "count": mult[y]},
                        )
                    )
                    new += 1
        mine_s = time.perf_counter() - t0
        total_leaks = sum(counts)
        curve = leak_at_k_curve(counts, cfg.n_mine, ks)
        log.info("RULE round %d: %d leaking samples, %d new", r, total_leaks, new)
        if total_leaks == 0 and cfg.stop_when_clean:
            acc = greedy_accuracy(model, tokenizer, retain_eval) if retain_eval else None
            history.rounds.append(RULERound(r, 0, len(mined), curve, acc, mine_s, 0.0, 0))
            break
        train_items = forget + mined
        weights = None
        if cfg.weighting == "leakk":
            weights = leakk_weights(train_items, rate, cfg.k_target)
        elif cfg.weighting == "count":
            weights = count_weights(train_items)

        res = UnlearnResult()
        model = unlearn(
            model,
            tokenizer,
            train_items,
            retain,
            round_cfg,
            chat_template=chat_template,
            forget_weights=weights,
            entropy_weight=cfg.entropy_weight,
            result=res,
            progress=progress,
        )
        acc = greedy_accuracy(model, tokenizer, retain_eval) if retain_eval else None
        history.rounds.append(
            RULERound(r, total_leaks, len(mined), curve, acc, mine_s, res.seconds, res.steps)
        )
    return model, history
