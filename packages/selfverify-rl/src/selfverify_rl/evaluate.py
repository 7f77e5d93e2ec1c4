"""Evaluation: generation accuracy, verification metrics (Sec. 2.6), self-verification sets and
verification-guided majority voting, all through :class:`llmcore.generation.HFBackend`."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from selfverify_rl.prompts import Style, generation_prompt
from selfverify_rl.rewards import parse_verdict, score_generation
from selfverify_rl.sampling import (
    Rollout,
    VerificationSample,
    build_verification_samples,
    fit_verification_prompt,
)

__all__ = [
    "fixed_verification_set",
    "generation_accuracy",
    "guided_majority_vote",
    "model_prefix",
    "self_verification_set",
    "verification_metrics",
]


def model_prefix(tokenizer: Any) -> str:
    """Text to put before every prompt: the BOS token when the tokenizer has one but does not
    add it itself (the tiny zoo tokenizers), else nothing."""
    bos = getattr(tokenizer, "bos_token", None)
    if not bos or tokenizer.bos_token_id is None:
        return ""
    ids = tokenizer("x")["input_ids"]
    return "" if ids and ids[0] == tokenizer.bos_token_id else bos


def _rows(ds: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in ds]


def _generate(
    model: Any,
    tok: Any,
    prompts: Sequence[str],
    *,
    n: int = 1,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    batch_size: int = 64,
) -> list[list[Any]]:
    from llmcore.generation import HFBackend, SamplingParams

    backend = HFBackend(model, tok, batch_size=batch_size, progress=False)
    pre = model_prefix(tok)
    params = SamplingParams(
        n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed
    )
    return backend.generate([pre + p for p in prompts], params)


def generation_accuracy(
    model: Any,
    tok: Any,
    ds: Any,
    k: int = 1,
    temperature: float = 0.0,
    *,
    style: Style = "plain",
    max_new_tokens: int = 64,
    use_math_verify: bool = False,
    seed: int = 0,
) -> dict[str, float]:
    """mean@k of the binary generation reward (``k=1, temperature=0``: greedy accuracy), the
    boxed-answer rate and the mean completion length in tokens."""
    rows = _rows(ds)
    outs = _generate(
        model,
        tok,
        [generation_prompt(r["question"], style, tok) for r in rows],
        n=k,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    scores, valid, lengths = [], [], []
    for r, group in zip(rows, outs, strict=True):
        for c in group:
            s, v, _ = score_generation(c.text, r["answer"], use_math_verify=use_math_verify)
            scores.append(s)
            valid.append(float(v))
            lengths.append(len(c.token_ids))
    n = max(len(scores), 1)
    return {
        "acc": sum(scores) / n,
        "valid_rate": sum(valid) / n,
        "mean_tokens": sum(lengths) / n,
        "n": float(len(rows)),
    }


def verification_metrics(
    model: Any,
    tok: Any,
    samples: Sequence[VerificationSample],
    *,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict[str, float]:
    """Sec. 2.6 metrics of greedy (default) verdicts on ``samples``: accuracy, ``acc_yes``
    (recall on correct candidates), ``acc_no`` (recall on wrong ones), balanced accuracy,
    precision/recall/F1 with "No" (error detected) as the positive class, macro-F1, Yes rate,
    unparsable rate, verdict-only rate and mean response tokens."""
    outs = _generate(
        model,
        tok,
        [s.prompt for s in samples],
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    verdicts = [parse_verdict(o[0].text) for o in outs]
    labels = [s.label for s in samples]
    m = binary_verdict_metrics(verdicts, labels)
    m["verdict_only_rate"] = sum(o[0].text.lstrip().startswith("\\boxed") for o in outs) / max(
        len(outs), 1
    )
    m["mean_tokens"] = sum(len(o[0].token_ids) for o in outs) / max(len(outs), 1)
    return m


def binary_verdict_metrics(
    verdicts: Sequence[str | None], labels: Sequence[str]
) -> dict[str, float]:
    """Verification metrics from verdicts (``None`` = unparsable, counted wrong) and labels."""

    def f1(p: float, r: float) -> float:
        return 2 * p * r / (p + r) if p + r else 0.0

    n = len(labels)
    pairs = list(zip(verdicts, labels, strict=True))
    acc = sum(v == lab for v, lab in pairs) / max(n, 1)
    n_yes = sum(lab == "Yes" for lab in labels)
    n_no = n - n_yes
    acc_yes = sum(v == "Yes" for v, lab in pairs if lab == "Yes") / max(n_yes, 1)
    acc_no = sum(v == "No" for v, lab in pairs if lab == "No") / max(n_no, 1)
    pred_no = sum(v == "No" for v in verdicts)
    pred_yes = sum(v == "Yes" for v in verdicts)
    prec_no = sum(v == "No" and lab == "No" for v, lab in pairs) / max(pred_no, 1)
    prec_yes = sum(v == "Yes" and lab == "Yes" for v, lab in pairs) / max(pred_yes, 1)
    return {
        "acc": acc,
        "acc_yes": acc_yes,
        "acc_no": acc_no,
        "balanced_acc": (acc_yes + acc_no) / 2,
        "precision_no": prec_no,
        "recall_no": acc_no,
        "f1_no": f1(prec_no, acc_no),
        "macro_f1": (f1(prec_no, acc_no) + f1(prec_yes, acc_yes)) / 2,
        "yes_rate": pred_yes / max(n, 1),
        "unparsable_rate": sum(v is None for v in verdicts) / max(n, 1),
        "n": float(n),
    }


def self_verification_set(
    model: Any,
    tok: Any,
    ds: Any,
    n: int = 8,
    *,
    temperature: float = 1.0,
    mode: str = "judge_answer",
    style: Style = "plain",
    max_new_tokens: int = 64,
    seed: int = 0,
) -> list[VerificationSample]:
    """Candidates sampled from the evaluated model itself (``n`` per problem at
    ``temperature``) turned into a balanced set by the Sec. 2.2 builder."""
    rows = _rows(ds)
    outs = _generate(
        model,
        tok,
        [generation_prompt(r["question"], style, tok) for r in rows],
        n=n,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    rollouts = []
    for r, group in zip(rows, outs, strict=True):
        for c in group:
            s, v, _ = score_generation(c.text, r["answer"])
            rollouts.append(Rollout(str(r["problem_id"]), r["question"], c.text, s, v))
    return list(
        build_verification_samples(
            rollouts, n, mode, random.Random(seed), style=style, tokenizer=None
        )
    )


def fixed_verification_set(
    candidates: Sequence[dict[str, Any]], *, style: Style = "plain", tokenizer: Any = None
) -> list[VerificationSample]:
    """Samples from stored candidates (``question, candidate, label, problem_id``, optional
    ``pass_rate``): the same items before and after training."""
    out = []
    for i, c in enumerate(candidates):
        prompt, _ = fit_verification_prompt(c["question"], c["candidate"], style, tokenizer)
        out.append(
            VerificationSample(
                prompt,
                c["label"],
                float(c.get("pass_rate", 0.5)),
                str(c["problem_id"]),
                i,
                c["question"],
                c["candidate"],
            )
        )
    return out


def guided_majority_vote(
    model: Any,
    tok: Any,
    ds: Any,
    k: int = 8,
    m: int = 1,
    *,
    temperature: float = 1.0,
    style: Style = "plain",
    max_new_tokens: int = 64,
    seed: int = 0,
) -> dict[str, float]:
    """Verification-guided majority voting (reconstructed rule): sample ``k`` solutions, ask the
    model ``m`` verdicts on each extracted answer, vote over answers weighted by their share of
    "Yes" verdicts; plain majority when every weight is 0. Returns both accuracies."""
    rows = _rows(ds)
    outs = _generate(
        model,
        tok,
        [generation_prompt(r["question"], style, tok) for r in rows],
        n=k,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    preds: list[list[str | None]] = [[score_generation(c.text, "")[2] for c in g] for g in outs]
    queries, where = [], []
    for i, (r, ps) in enumerate(zip(rows, preds, strict=True)):
        for j, p in enumerate(ps):
            if p is not None:
                prompt, _ = fit_verification_prompt(r["question"], p, style, tok)
                queries.append(prompt)
                where.append((i, j))
    weights: dict[tuple[int, int], float] = defaultdict(float)
    if queries:
        vs = _generate(
            model, tok, queries, n=m, temperature=temperature if m > 1 else 0.0,
            max_new_tokens=max_new_tokens, seed=seed + 1,
        )  # fmt: skip
        for key, group in zip(where, vs, strict=True):
            weights[key] = sum(parse_verdict(c.text) == "Yes" for c in group) / m
    guided = plain = 0
    for i, (r, ps) in enumerate(zip(rows, preds, strict=True)):
        gold = score_generation("\\boxed{" + str(r["answer"]) + "}", r["answer"])[2]
        votes = Counter(p for p in ps if p is not None)
        top = votes.most_common(1)[0][0] if votes else None
        plain += top == gold
        w: Counter[str] = Counter()
        for j, p in enumerate(ps):
            if p is not None:
                w[p] += weights[(i, j)]
        best = max(w, key=lambda a: (w[a], votes[a])) if w and max(w.values()) > 0 else top
        guided += best == gold
    n = max(len(rows), 1)
    return {"guided_acc": guided / n, "plain_acc": plain / n, "k": float(k), "m": float(m)}
