"""Accuracy of a model on physics QA: mean@n, pass@n and per-scene-type accuracy.

Any local set works (``.jsonl`` or ``.parquet`` with question/answer columns, e.g. a
user-provided IPhO file); answers are graded by the same checker as the RL reward
(:mod:`sim2reason.rewards`), at a 1 % tolerance by default (the paper's evaluation tolerance;
see :func:`sim2reason.rewards.eval_reward` for how it differs from the official path).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sim2reason.errors import QAError

__all__ = ["accuracy", "load_eval_rows"]

_Q_KEYS = ("prompt", "question", "problem", "text")
_A_KEYS = ("answer", "ground_truth", "final_answer", "solution")


def load_eval_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows ``{prompt, answer, kind, given_variable_mapping, scene_type}`` from a local
    ``.jsonl``/``.parquet`` file (verl rows, our exports, or any question/answer columns)."""
    path = Path(path)
    if not path.is_file():
        raise QAError(f"evaluation file {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        raw = pq.read_table(path).to_pylist()
    elif path.suffix in (".jsonl", ".json"):
        from llmcore.data import read_jsonl

        raw = read_jsonl(path)
    else:
        raise QAError(f"evaluation file {path.name!r}: use .jsonl or .parquet")
    out = []
    for i, r in enumerate(raw):
        if "reward_model" in r:  # verl row
            extra = r.get("extra_info") or {}
            prompt = r["prompt"]
            out.append({"prompt": prompt[-1]["content"] if isinstance(prompt, list) else prompt,
                        "answer": r["reward_model"]["ground_truth"],
                        "kind": extra.get("kind", "numeric"),
                        "given_variable_mapping": extra.get("given_variable_mapping"),
                        "scene_type": r.get("scene_type") or extra.get("scene_type")
                        or r.get("data_source", "")})  # fmt: skip
            continue
        q = next((r[k] for k in _Q_KEYS if k in r), None)
        a = next((r[k] for k in _A_KEYS if k in r), None)
        if q is None or a is None:
            raise QAError(
                f"{path.name} row {i}: need a question column ({'/'.join(_Q_KEYS)}) and an "
                f"answer column ({'/'.join(_A_KEYS)}); got {sorted(r)}"
            )
        if isinstance(q, list):
            q = q[-1]["content"]
        out.append({"prompt": q, "answer": a, "kind": r.get("kind", "numeric"),
                    "given_variable_mapping": r.get("given_variable_mapping"),
                    "scene_type": r.get("scene_type", "")})  # fmt: skip
    return out


def accuracy(model: Any, tokenizer: Any, ds: Any, n: int = 1, temperature: float = 0.0,
             rel: float = 0.01, *, max_new_tokens: int = 512, batch_size: int = 16,
             format_prompt: Callable[[str], str] | None = None, seed: int = 0,
             backend: Any = None) -> dict[str, Any]:  # fmt: skip
    """mean@n (average per-sample accuracy), pass@n (any of n correct) and accuracy per scene
    type under the magnitude rule at tolerance ``rel``.

    ``ds`` is a ``datasets.Dataset`` or a list of rows with ``prompt`` (text or chat messages)
    and ``answer``. Prompts go through the tokenizer's chat template when it has one, unless
    ``format_prompt`` is given; ``backend`` (an ``llmcore.generation`` backend, e.g. vLLM)
    replaces in-process generation.
    """
    from llmcore.generation import HFBackend, SamplingParams
    from sim2reason.rewards import check_answer

    if n < 1:
        raise QAError(f"n={n!r}: need at least one sample per question")
    if temperature == 0.0 and n > 1:
        raise QAError("n > 1 needs temperature > 0 (greedy samples are identical)")
    rows: Sequence[dict[str, Any]] = list(ds)
    texts = [_format(tokenizer, r["prompt"], format_prompt) for r in rows]
    backend = backend or HFBackend(model, tokenizer, batch_size=batch_size, progress=False)
    params = SamplingParams(n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    outs = backend.generate(texts, params)
    per_type: dict[str, list[float]] = defaultdict(list)
    means, passes = [], []
    for r, o in zip(rows, outs, strict=True):
        scores = [check_answer(x.text, r["answer"], r.get("kind") or "numeric",
                               r.get("given_variable_mapping"), rel=rel)["reward"] for x in o]  # fmt: skip
        means.append(sum(scores) / len(scores))
        passes.append(float(any(scores)))
        per_type[r.get("scene_type") or ""].append(means[-1])
    return {"n_questions": len(rows), "n": n, f"mean@{n}": sum(means) / max(1, len(means)),
            f"pass@{n}": sum(passes) / max(1, len(passes)),
            "per_scene_type": {k: sum(v) / len(v) for k, v in sorted(per_type.items())}}  # fmt: skip


def _format(tokenizer: Any, prompt: Any, fmt: Callable[[str], str] | None) -> str:
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    if fmt is not None:
        return fmt(prompt)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                             tokenize=False, add_generation_prompt=True)  # fmt: skip
    return prompt


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2)
