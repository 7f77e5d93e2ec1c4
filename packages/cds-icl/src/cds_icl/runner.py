"""Few-shot CoT evaluation: one selector, k demos, several seeds, greedy decoding with
repetition penalty 1.1, graded per task; results resumable through ``llmcore.data.ResultsWriter``.

Fixed-block selectors give every query the same demo block, so the HF backend runs the block
once per batch and continues each row from a copy of its KV cache (``prefix_cache=True``; vLLM's
``enable_prefix_caching`` on GPUs).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cds_icl.errors import CDSInputError, ContextLengthError, unknown_choice
from cds_icl.pool import Demo, DemoPool
from cds_icl.prompts import CUE, INSTRUCTION, build_prompt, wrap_chat

log = logging.getLogger(__name__)
TASK_FAMILIES = ("synthetic", "math", "gsm8k")
MATH_SUBTASKS = ("algebra", "counting_and_probability", "geometry", "intermediate_algebra",
                 "number_theory", "prealgebra", "precalculus")  # fmt: skip


@dataclass
class TaskData:
    """Test items ``{id, problem, gold}``, the demo pool and the prompt settings of a task."""

    name: str
    items: list[dict[str, Any]]
    pool: DemoPool
    instruction: str = INSTRUCTION
    cue: str = CUE
    stop: tuple[str, ...] = ()


def _check_task(task: str) -> tuple[str, str | None]:
    fam, _, sub = task.partition(":")
    if fam not in TASK_FAMILIES:
        raise unknown_choice(
            "task", task, ("synthetic", "gsm8k", *(f"math:{s}" for s in MATH_SUBTASKS))
        )
    if fam == "math" and sub not in MATH_SUBTASKS:
        raise unknown_choice("MATH subtask", sub, MATH_SUBTASKS)
    return fam, sub or None


def load_task(task: str, n_pool: int = 128, seed: int = 71) -> TaskData:
    """``synthetic`` (local, no download), ``math:<subtask>`` (``EleutherAI/hendrycks_math``) or
    ``gsm8k`` (``openai/gsm8k``) via ``datasets``; the pool is the first ``n_pool`` training
    items shuffled with ``seed``."""
    fam, sub = _check_task(task)
    if fam == "synthetic":
        from cds_icl.synthetic import INSTRUCTION_SYNTH, synthetic_split

        pool_items, test = synthetic_split()
        pool = DemoPool.from_dataset(pool_items, n=min(n_pool, len(pool_items)), seed=seed)
        items = [{"id": f"synth-{t['idx']}", "problem": t["problem"], "gold": t["answer"]}
                 for t in test]  # fmt: skip
        return TaskData(task, items, pool, INSTRUCTION_SYNTH, "", ("###",))
    from datasets import load_dataset

    if fam == "math":
        ds = load_dataset("EleutherAI/hendrycks_math", sub)
        pool = DemoPool.from_dataset(ds["train"], n=n_pool, seed=seed)
        items = [{"id": f"{sub}-{i}", "problem": r["problem"], "gold": r["solution"]}
                 for i, r in enumerate(ds["test"])]  # fmt: skip
        return TaskData(task, items, pool)
    ds = load_dataset("openai/gsm8k", "main")
    pool = DemoPool.from_dataset(ds["train"], "question", "answer", n=n_pool, seed=seed,
                                 answer_kind="gsm8k")  # fmt: skip
    items = [{"id": f"gsm8k-{i}", "problem": r["question"], "gold": r["answer"]}
             for i, r in enumerate(ds["test"])]  # fmt: skip
    return TaskData(task, items, pool)


@dataclass
class EvalResult:
    """Accuracy over all seeds, per seed, the order-induced std (population std over seeds),
    the per-item records, and the prompt tokens the HF backend reused from a shared prefix."""

    acc: float
    per_seed: dict[int, float]
    std: float
    records: list[dict[str, Any]] = field(default_factory=list)
    prefill_tokens: int = 0


def cut(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop string (applied after greedy decoding, which equals
    stopping there: later tokens never change earlier ones)."""
    for s in stop:
        j = text.find(s)
        if j >= 0:
            text = text[:j]
    return text


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def context_limit(model: Any) -> int | None:
    cfg = getattr(model, "config", None)
    return getattr(cfg, "max_position_embeddings", None)


def check_context(tokenizer: Any, prompts: Sequence[str], limit: int | None, max_new_tokens: int,
                  k: int) -> None:  # fmt: skip
    """Refuse prompts that do not fit ``limit`` positions with ``max_new_tokens`` to generate,
    naming the token count and the k that would fit."""
    if not limit:
        return
    lengths = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    worst = max(lengths)
    if worst + max_new_tokens > limit:
        per_demo = worst / max(k, 1)
        fit = max(0, int((limit - max_new_tokens) / max(per_demo, 1e-9)) - 1)
        raise ContextLengthError(
            f"a prompt has {worst} tokens + {max_new_tokens} new tokens > the model's context of "
            f"{limit}; about k = {fit} demonstrations would fit (or lower max_new_tokens)"
        )


def make_prompts(
    data: TaskData,
    items: Sequence[dict[str, Any]],
    selector: Any,
    k: int,
    seed: int,
    tokenizer: Any = None,
    chat: bool = False,
    enable_thinking: bool | None = None,
) -> tuple[list[str], list[list[int]]]:
    """Prompts for ``items`` and the pool positions of their demos (one block for fixed-block
    selectors)."""
    pool = data.pool
    fixed = getattr(selector, "fixed_block", True)
    block = selector.select(pool, None, k, seed) if fixed else None
    prompts, chosen = [], []
    for it in items:
        pos = block if block is not None else selector.select(pool, it["problem"], k, seed)
        demos: list[Demo] = [pool[i] for i in pos]
        p = build_prompt(demos, it["problem"], instruction=data.instruction, cue=data.cue)
        if chat:
            p = wrap_chat(tokenizer, p, enable_thinking)
        prompts.append(p)
        chosen.append(list(pos))
    return prompts, chosen


def evaluate(
    model_or_id: Any,
    task: str | TaskData = "synthetic",
    selector: Any = "random",
    k: int = 16,
    seeds: Sequence[int] = (71,),
    limit: int | None = None,
    backend: str = "hf",
    tokenizer: Any = None,
    max_new_tokens: int = 64,
    repetition_penalty: float = 1.1,
    chat: bool = False,
    enable_thinking: bool | None = None,
    batch_size: int = 8,
    prefix_cache: bool = True,
    out: str | Path | None = None,
    embedder: Any = None,
    progress: bool = False,
) -> EvalResult:
    """Greedy few-shot accuracy of ``model_or_id`` with ``selector``'s demos (Sec. 2.3/2.4).

    ``selector`` is a selector object or a name from :data:`cds_icl.selectors.SELECTORS`
    (``embedder`` for the embedding-based ones). With ``out`` the per-item rows and a summary
    line go to a resumable JSONL (finished ids are skipped on rerun)."""
    from cds_icl.grading import grade, prediction
    from cds_icl.selectors import check_k, make_selector
    from llmcore.generation import SamplingParams

    data = load_task(task) if isinstance(task, str) else task
    model, tok = _load(model_or_id, tokenizer, backend)
    if isinstance(selector, str):
        selector = make_selector(selector, embedder=embedder, model=model, tokenizer=tok)
    check_k(data.pool, k)
    items = data.items[:limit] if limit else data.items
    if not items:
        raise CDSInputError("no test items to evaluate (limit = 0 or an empty task)")
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens,
                            repetition_penalty=repetition_penalty)  # fmt: skip
    gen = _backend(backend, model, tok, batch_size, prefix_cache, progress)
    writer = None
    if out is not None:
        from llmcore.data import ResultsWriter

        writer = ResultsWriter(out)
    sel_name = getattr(selector, "name", type(selector).__name__)
    records: list[dict[str, Any]] = []
    per_seed: dict[int, float] = {}
    prefill = 0
    for seed in seeds:
        prompts, chosen = make_prompts(data, items, selector, k, seed, tok, chat, enable_thinking)
        if backend == "hf":
            check_context(tok, prompts, context_limit(model), max_new_tokens, k)
        ids = [f"{sel_name}:k{k}:s{seed}:{it['id']}" for it in items]
        todo = [i for i, rid in enumerate(ids) if writer is None or not writer.is_done(rid)]
        outs = gen.generate([prompts[i] for i in todo], params) if todo else []
        prefill += sum(getattr(gen, "last_prefix_lengths", []) or [])
        texts = {i: cut(o[0].text, data.stop) for i, o in zip(todo, outs, strict=True)}
        seed_rows = []
        for i, it in enumerate(items):
            if i in texts:
                resp = texts[i]
                row = {"id": ids[i], "prompt_hash": prompt_hash(prompts[i]), "response": resp,
                       "pred": prediction(data.name, resp), "gold": it["gold"],
                       "correct": bool(grade(data.name, resp, it["gold"])), "seed": int(seed),
                       "selector": sel_name, "k": k, "demos": chosen[i]}  # fmt: skip
                if writer is not None:
                    writer.write(row)
            else:
                row = next(r for r in _read(out) if r.get("id") == ids[i])
            seed_rows.append(row)
        per_seed[int(seed)] = float(np.mean([r["correct"] for r in seed_rows]))
        records.extend(seed_rows)
    accs = list(per_seed.values())
    res = EvalResult(float(np.mean(accs)), per_seed, float(np.std(accs)), records, prefill)
    if writer is not None:
        summary_id = f"summary:{sel_name}:k{k}:s{','.join(map(str, seeds))}"
        if not writer.is_done(summary_id):
            writer.write({"id": summary_id, "acc": res.acc, "std": res.std, "seeds": list(seeds),
                          "selector": sel_name, "k": k, "per_seed": per_seed})  # fmt: skip
    return res


def _read(path: Any) -> list[dict[str, Any]]:
    from llmcore.data import read_jsonl

    return read_jsonl(path)


def _load(model_or_id: Any, tokenizer: Any, backend: str) -> tuple[Any, Any]:
    if backend not in ("hf", "vllm"):
        raise unknown_choice("backend", backend, ("hf", "vllm"))
    if isinstance(model_or_id, tuple):
        return model_or_id
    if backend == "vllm" or not isinstance(model_or_id, str | Path):
        if tokenizer is None and isinstance(model_or_id, str | Path):
            from llmcore.models import load_tokenizer

            tokenizer = load_tokenizer(str(model_or_id))
        return model_or_id, tokenizer
    from llmcore.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(str(model_or_id))
    return model, tokenizer or tok


def _backend(backend: str, model: Any, tok: Any, batch_size: int, prefix_cache: bool,
             progress: bool) -> Any:  # fmt: skip
    if backend == "vllm":
        from llmcore.generation import get_backend

        return get_backend("vllm", str(model), enable_prefix_caching=True)
    from llmcore.generation import HFBackend

    return HFBackend(model, tok, batch_size=batch_size, progress=progress,
                     prefix_cache=prefix_cache)  # fmt: skip
