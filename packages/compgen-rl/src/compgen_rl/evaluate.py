"""Evaluation: exact-match accuracy per split and depth, step accuracy, atomic recovery, gain.

``acc@split`` is greedy exact match of the final answer; ``step_acc`` the share of trace lines
equal to the executor's values (a decomposition diagnostic); ``atomic_recovery`` the accuracy on
depth-1 probes of each module; ``gain = acc(SFT->RL) - acc(SFT)``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from compgen_rl.errors import CompgenError
from compgen_rl.rewards import exact_match_reward, step_accuracy

__all__ = ["evaluate", "gain", "generate", "model_prompts", "paired_gain"]


def model_prompts(tokenizer: Any, prompts: Sequence[str]) -> list[str]:
    """Prompts as the model reads them: plain prompts get the tokenizer's BOS text when it does
    not add one itself; chat prompts (``Input: ...``) go through the chat template."""
    out = []
    bos = getattr(tokenizer, "bos_token", None)
    adds_bos = False
    if bos:
        try:
            ids = tokenizer("x")["input_ids"]
            adds_bos = bool(ids) and ids[0] == tokenizer.bos_token_id
        except Exception:
            adds_bos = False
    for p in prompts:
        if p.startswith("Input: ") and getattr(tokenizer, "chat_template", None):
            out.append(
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
                )
            )
        else:
            out.append(p if (adds_bos or not bos) else bos + p)
    return out


def check_prompt_fit(
    tokenizer: Any, prompts: Sequence[str], context: int | None, max_new_tokens: int
) -> None:
    """Raise :class:`CompgenError` when a prompt cannot be encoded (unknown characters) or when
    prompt + completion exceeds the model context."""
    unk = getattr(tokenizer, "unk_token_id", None)
    longest = 0
    for p in prompts[:2000]:
        ids = tokenizer(p, add_special_tokens=False)["input_ids"]
        if unk is not None and unk in ids:
            raise CompgenError(
                f"the tokenizer cannot encode prompt {p[:60]!r} (maps a character to {tokenizer.unk_token!r}); "
                "use a byte-level tokenizer or an inventory whose alphabet it covers"
            )
        longest = max(longest, len(ids))
    if context is not None and longest + max_new_tokens > context:
        raise CompgenError(
            f"prompts of up to {longest} tokens + {max_new_tokens} new tokens exceed the model context of "
            f"{context}; shorten inputs / programs or lower max_new_tokens"
        )


def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    n: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 32,
    batch_size: int = 64,
    seed: int = 0,
    backend: Literal["hf", "vllm"] = "hf",
) -> list[list[str]]:
    """``n`` completions per prompt (greedy at temperature 0) through llmcore's backends."""
    from llmcore.generation import SamplingParams, get_backend

    params = SamplingParams(n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    texts = model_prompts(tokenizer, prompts)
    if backend == "hf":
        from llmcore.generation import HFBackend

        be: Any = HFBackend(
            model, tokenizer, batch_size=max(1, batch_size // max(n, 1)), progress=False
        )
    elif backend == "vllm":
        if not isinstance(model, str):
            raise CompgenError("backend='vllm' needs a model path or hub id, not a loaded model")
        be = get_backend("vllm", model)
    else:
        raise CompgenError(f"backend must be 'hf' or 'vllm', got {backend!r}")
    out = be.generate(texts, params)
    return [[c.text for c in row] for row in out]


def evaluate(
    model: Any,
    tokenizer: Any,
    ds: Any,
    batch_size: int = 64,
    greedy: bool = True,
    backend: Literal["hf", "vllm"] = "hf",
    *,
    max_new_tokens: int | None = None,
    k: int = 1,
    temperature: float = 1.0,
    seed: int = 0,
    return_rows: bool = False,
) -> dict[str, Any]:
    """Accuracy and step accuracy of ``model`` on a split (rows with prompt/answer/program).

    Greedy by default; ``greedy=False`` samples ``k`` completions at ``temperature`` and reports
    mean@k. Returns ``acc``, ``step_acc``, ``n``, ``mean_completion_chars``, ``by_depth``,
    ``by_tag``, ``by_heldout`` and, with ``return_rows``, per-prompt ``correct``/``step``."""
    rows = ds if isinstance(ds, list) else [dict(r) for r in ds]
    if not rows:
        raise CompgenError("evaluate() got an empty split")
    if max_new_tokens is None:
        max_new_tokens = max(len(r["completion"]) for r in rows) + 4
    cfg = getattr(model, "config", None)
    check_prompt_fit(
        tokenizer,
        [r["prompt"] for r in rows],
        getattr(cfg, "max_position_embeddings", None),
        max_new_tokens,
    )
    n = 1 if greedy else k
    comps = generate(
        model,
        tokenizer,
        [r["prompt"] for r in rows],
        n=n,
        temperature=0.0 if greedy else temperature,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        seed=seed,
        backend=backend,
    )
    flat = [c for row in comps for c in row]
    rep = [r for r in rows for _ in range(n)]
    em = exact_match_reward(flat, [r["answer"] for r in rep])
    st = step_accuracy(flat, [r["program"] for r in rep], input=[r["input"] for r in rep])
    correct = [sum(em[i * n : (i + 1) * n]) / n for i in range(len(rows))]
    step = [sum(st[i * n : (i + 1) * n]) / n for i in range(len(rows))]
    out: dict[str, Any] = {
        "acc": sum(correct) / len(rows),
        "step_acc": sum(step) / len(rows),
        "n": len(rows),
        "mean_completion_chars": sum(len(c) for c in flat) / len(flat),
    }
    for key, name in (("depth", "by_depth"), ("split_tag", "by_tag"), ("heldout", "by_heldout")):
        groups: dict[str, list[float]] = defaultdict(list)
        for r, c in zip(rows, correct, strict=True):
            groups[str(r.get(key, ""))].append(c)
        out[name] = {g: sum(v) / len(v) for g, v in sorted(groups.items())}
    if return_rows:
        out["correct"] = correct
        out["step"] = step
        out["signature"] = [r["signature"] for r in rows]
    return out


def atomic_recovery(model: Any, tokenizer: Any, probe_rows: Any, **kw: Any) -> dict[str, float]:
    """Accuracy on the depth-1 probes of each module (does RL extract modules from compounds?)."""
    rows = probe_rows if isinstance(probe_rows, list) else [dict(r) for r in probe_rows]
    res = evaluate(model, tokenizer, rows, return_rows=True, **kw)
    per: dict[str, list[float]] = defaultdict(list)
    for r, c in zip(rows, res["correct"], strict=True):
        for m in r["modules"]:
            per[m].append(c)
    return {"mean": res["acc"], **{m: sum(v) / len(v) for m, v in sorted(per.items())}}


def gain(after: dict[str, Any], before: dict[str, Any], key: str = "acc") -> float:
    """``after[key] - before[key]``."""
    return float(after[key]) - float(before[key])


def paired_gain(
    before: Sequence[float], after: Sequence[float], clusters: Sequence[str] | None = None
) -> dict[str, float]:
    """Mean paired difference of per-prompt scores with its standard error, and (with
    ``clusters``) the cluster-robust SE (clusters = signatures, the unit of generalisation)."""
    if len(before) != len(after) or not before:
        raise CompgenError(
            f"paired_gain needs equal non-empty lists, got {len(before)} and {len(after)}"
        )
    d = [a - b for a, b in zip(after, before, strict=True)]
    m = sum(d) / len(d)
    var = sum((x - m) ** 2 for x in d) / max(len(d) - 1, 1)
    out = {"gain": m, "se": math.sqrt(var / len(d)), "n": float(len(d))}
    if clusters is not None:
        sums: dict[str, float] = defaultdict(float)
        for x, c in zip(d, clusters, strict=True):
            sums[c] += x - m
        g = len(sums)
        out["se_clustered"] = math.sqrt(
            g / max(g - 1, 1) * sum(v * v for v in sums.values())
        ) / len(d)
        out["clusters"] = float(g)
    return out
