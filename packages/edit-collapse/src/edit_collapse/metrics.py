"""EasyEdit's evaluation: teacher-forced token accuracy (Rel/Gen/Port), locality against the
original model's cached argmax, generate-mode matching (``em``/``contains``/``judge``), the
Average of the four dimensions, and the reasoning-suite scorer."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from edit_collapse import core
from edit_collapse.errors import EditInputError, JudgeUnavailableError

Transform = Callable[[str], str]


def _identity(p: str) -> str:
    return p


def transform_of(model: Any) -> tuple[Any, Transform]:
    """``(hf_model, prompt_transform)`` of a model or an :class:`EditedGenerator`."""
    if hasattr(model, "transform") and hasattr(model, "model"):
        return model.model, model.transform
    return model, _identity


def transform_all(model: Any, prompts: Sequence[str]) -> list[str]:
    """The prompts through the generator's transform, batched when it can batch them."""
    _, tf = transform_of(model)
    if tf is _identity:
        return list(prompts)
    many = getattr(model, "transform_many", None)
    return many(prompts) if many is not None else [tf(p) for p in prompts]


@torch.no_grad()
def target_argmax(model: Any, tok: Any, pairs: Sequence[tuple[str, str]], batch_size: int = 64,
                  eos: bool = False) -> list[tuple[list[int], list[int]]]:  # fmt: skip
    """For each ``(prompt, target)``: ``(predicted ids, target ids)`` at the target positions,
    teacher-forced (the logits at position t predict token t+1). ``eos=True`` appends the
    tokenizer's eos to the target."""
    hf, _ = transform_of(model)
    rows, spans = [], []
    for p, t in zip(
        transform_all(model, [p for p, _ in pairs]), [t for _, t in pairs], strict=True
    ):
        pid = core.encode(tok, p)
        tid = core.target_ids(tok, t) + ([tok.eos_token_id] if eos else [])
        rows.append(pid + tid)
        spans.append((len(pid), tid))
    out: list[tuple[list[int], list[int]] | None] = [None] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    dev = core.device_of(hf)
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        ids, att = core.pad_right([rows[i] for i in idx], core.pad_id(tok), dev)
        pred = hf(input_ids=ids, attention_mask=att).logits.argmax(-1)
        for j, i in enumerate(idx):
            start, tid = spans[i]
            out[i] = (pred[j, start - 1 : start - 1 + len(tid)].tolist(), tid)
    return out  # type: ignore[return-value]


def token_accuracy(pred: Sequence[int], gold: Sequence[int]) -> float:
    """EasyEdit's teacher-forced accuracy: share of target positions whose argmax is right."""
    if len(pred) != len(gold) or not gold:
        raise EditInputError(f"length mismatch: {len(pred)} predictions for {len(gold)} targets")
    return sum(int(a == b) for a, b in zip(pred, gold, strict=True)) / len(gold)


def teacher_forced_acc(
    model: Any, tok: Any, prompts: Sequence[str], targets: Sequence[str]
) -> list[float]:
    """``acc(x, y) = (1/m) sum_t 1[argmax p(. | x, y_<t) = y_t]`` per pair."""
    if len(prompts) != len(targets):
        raise EditInputError(f"{len(prompts)} prompts but {len(targets)} targets")
    return [
        token_accuracy(p, g)
        for p, g in target_argmax(model, tok, list(zip(prompts, targets, strict=True)))
    ]


def locality_acc(post: Sequence[int], original: Sequence[int]) -> float:
    """Share of positions where the post-edit argmax equals the original model's argmax."""
    return token_accuracy(post, original)


def normalize(s: str) -> str:
    s = s.lower().strip()
    s = re.sub(r"[^\w\s]", " ", s)
    return " ".join(s.split())


def match(pred: str, gold: str, matcher: str = "em", judge: Any = None) -> bool:
    """``em`` (normalised exact match of the first len(gold) words), ``contains`` or ``judge``
    (a judge backend answers whether ``pred`` agrees with ``gold``)."""
    if matcher == "em":
        p, g = normalize(pred).split(), normalize(gold).split()
        return p[: len(g)] == g
    if matcher == "contains":
        return normalize(gold) in normalize(pred)
    if matcher == "judge":
        if judge is None:
            raise JudgeUnavailableError(
                "matcher='judge' needs a judge backend (any llmcore GenerationBackend, e.g. "
                "get_backend('openai', ...)); refusing to fall back to exact match"
            )
        return judge_match(judge, pred, gold)
    raise EditInputError(f"matcher={matcher!r}: use 'em', 'contains' or 'judge'")


def judge_match(judge: Any, pred: str, gold: str) -> bool:
    from llmcore.generation import SamplingParams

    q = (f"Reference answer: {gold}\nModel answer: {pred}\nIs the model answer semantically "
         "consistent with the reference? Answer Yes or No.\nAnswer:")  # fmt: skip
    try:
        out = judge.generate([q], SamplingParams(max_new_tokens=3))
    except (
        Exception
    ) as e:  # the backend's own errors (connection refused, HTTP) all mean "unreachable"
        raise JudgeUnavailableError(f"the judge model is unreachable: {e}") from e
    return out[0][0].text.strip().lower().startswith("yes")


@torch.no_grad()
def greedy(model: Any, tok: Any, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
    """Greedy continuations (through the generator's prompt transform), special tokens dropped."""
    hf, tf = transform_of(model)
    outs = []
    dev = core.device_of(hf)
    for p in prompts:
        ids = torch.tensor([core.encode(tok, tf(p))], device=dev)
        g = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                        max_new_tokens=max_new_tokens, pad_token_id=core.pad_id(tok))  # fmt: skip
        outs.append(tok.decode(g[0, ids.shape[1] :], skip_special_tokens=True).strip())
    return outs


def average(row: dict[str, Any]) -> float:
    """Average of Rel, Gen, Loc, Port over the dimensions that were measured."""
    vals = [row[k] for k in ("rel", "gen", "loc", "port") if row.get(k) is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def reasoning_accuracy(model: Any, tok: Any, problems: Sequence[tuple[str, str]]) -> float:
    """Share of problems whose full worked answer (plus eos) is the greedy continuation, via one
    teacher-forced pass (every target argmax right <=> greedy decoding emits it)."""
    res = target_argmax(model, tok, problems, eos=True)
    return sum(p == g for p, g in res) / len(res)
