"""Generation and evaluation runs in the official record format, resumable.

``generate`` writes ``generate.json`` (a list of ``{"data", "prompt", "response", "thought",
"usage"}`` + ``id``, ``method``, ``calls``, ``empty_response``, ``missing_think_close``) and
``generate_usage.json``; ``evaluate`` adds ``"eval"`` to every record, writes
``<judge>_evaluate.json`` and ``<judge>_score.json``. Both append finished items to a
``*.partial.jsonl`` next to the output (llmcore ``ResultsWriter``) and skip them on restart.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from spec_align.backends import Backend
from spec_align.data import PromptItem, Scenario, parse_prompts
from spec_align.errors import DataFormatError, JudgeParseError, SpecAlignError, SpecConfigError
from spec_align.judge import RESPONSE_MAX_CHARS, Judge, Verdict
from spec_align.scoring import ALPHA, ScoreReport, aggregate, item_score
from spec_align.ttd import TTDMethod


def _chunks(items: list, size: int) -> list[tuple[int, list]]:
    return [(k // size, items[k : k + size]) for k in range(0, len(items), size)]


def generate(
    s: Scenario,
    method: TTDMethod,
    backend: Backend,
    *,
    adversarial: bool = True,
    limit: int | None = None,
    batch_size: int = 16,
    seed: int = 0,
    out: str | Path | None = None,
    strict: bool = False,
    progress: bool = True,
    samples: int = 1,
    **gen: Any,
) -> list[dict[str, Any]]:
    """Run ``method`` on the scenario's items (``samples`` times each, seeds differ) and return
    official generation records; with ``out``, write ``generate.json`` and resume from the
    partial file of an interrupted run."""
    from tqdm.auto import tqdm

    from llmcore.data import ResultsWriter, atomic_write_json

    if batch_size < 1 or samples < 1:
        raise SpecConfigError("batch_size and samples must be >= 1")
    items = s.items[:limit] if limit is not None else list(s.items)
    if not items:
        raise DataFormatError(f"scenario {s.name!r} has no prompts to generate for")
    jobs = [(it, k) for k in range(samples) for it in items]
    writer = None
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        writer = ResultsWriter(Path(str(out) + ".partial.jsonl"), id_key="id")
    done: dict[str, dict] = {}
    if writer is not None:
        from llmcore.data import read_jsonl

        if writer.path.exists():
            done = {r["id"]: r for r in read_jsonl(writer.path)}
    records: dict[str, dict] = dict(done)
    bar = tqdm(total=len(jobs), desc=f"generate {method.name}", disable=not progress)
    bar.update(len(done))
    for ci, chunk in _chunks(jobs, batch_size):
        todo = [(it, k) for it, k in chunk if _rid(it, k, samples) not in records]
        if not todo:
            continue
        t0 = time.perf_counter()
        res = method.run_batch(
            [it for it, _ in todo],
            s,
            backend,
            adversarial=adversarial,
            **{**gen, "seed": seed + ci},
        )
        dt = (time.perf_counter() - t0) / len(todo)
        for (it, k), r in zip(todo, res, strict=True):
            if strict and not r.response.strip():
                raise SpecAlignError(f"empty response for item {it.id} (--strict)")
            rec = {
                "id": _rid(it, k, samples),
                "data": it.to_official(),
                "prompt": it.adversarial_prompt if adversarial else it.prompt,
                "response": r.response,
                "thought": r.thought,
                "usage": {k2: int(v) for k2, v in r.usage.items()},
                "method": method.name,
                "calls": r.calls,
                "sample": k,
                "empty_response": not r.response.strip(),
                "missing_think_close": r.missing_think_close,
                "seconds": dt,
            }
            records[rec["id"]] = rec
            if writer is not None:
                writer.write(rec)
        bar.update(len(todo))
    bar.close()
    ordered = [records[_rid(it, k, samples)] for it, k in jobs]
    if out is not None:
        atomic_write_json(out, ordered)
        usage = {
            k: sum(r["usage"].get(k, 0) for r in ordered)
            for k in ("prompt_tokens", "completion_tokens", "total_tokens")
        }
        atomic_write_json(str(out).removesuffix(".json") + "_usage.json", usage)
    return ordered


def _rid(it: PromptItem, k: int, samples: int) -> str:
    return it.id if samples == 1 else f"{it.id}#{k}"


def record_item(rec: dict[str, Any], index: int) -> PromptItem:
    """The :class:`PromptItem` of a generation record (``data`` holds the official item)."""
    data = rec.get("data")
    if not isinstance(data, dict) or data.get("label") not in ("safe", "unsafe"):
        raise DataFormatError(f"generation record {index} lacks data.label ('safe'/'unsafe')")
    return parse_prompts([data], "record", f"record {index}", adversarial=False)[0]


def judge_name(judge: Judge) -> str:
    """File-name-safe judge name (``<judge>_evaluate.json``)."""
    name = judge.name.split("@")[0].rstrip("/").split("/")[-1].split(":")[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "judge"


def verdict_record(
    v: Verdict,
    judge: Judge,
    item: PromptItem,
    response: str,
    s: Scenario,
    alpha: float,
    na_policy: str,
) -> dict[str, Any]:
    from spec_align.judge import LLMJudge, build_joint_prompt

    if isinstance(judge, LLMJudge) and judge.mode == "sequential":
        eval_prompt: Any = [u for _, u in judge._calls(item, response, s)]
    else:
        eval_prompt = build_joint_prompt(item, response, s)[1]
    return {
        "eval_prompt": eval_prompt,
        "result": {
            "eval_response": v.raw,
            "safety": {str(i + 1): x for i, x in enumerate(v.safety)},
            "behavioral": {str(i + 1): x for i, x in enumerate(v.behavioral)},
            "score": item_score(v.safety, v.behavioral, alpha, na_policy),
        },
        "usage": v.usage,
    }


def evaluate(
    records: list[dict[str, Any]],
    s: Scenario,
    judge: Judge,
    *,
    num_threads: int = 1,
    batch_size: int = 16,
    on_failure: str = "record",
    alpha: float = ALPHA,
    na_policy: str = "official",
    out_dir: str | Path | None = None,
    check_count: bool = False,
    progress: bool = True,
) -> tuple[list[dict[str, Any]], ScoreReport]:
    """Judge every record; returns the evaluated records and the :class:`ScoreReport`.

    ``on_failure="record"`` marks items whose judging failed ``max_retries`` times with
    ``judge_status="failed"`` (excluded from the means, counted in ``failed_count``);
    ``"raise"`` re-raises :class:`JudgeParseError` with the raw judge text."""
    from tqdm.auto import tqdm

    from llmcore.data import ResultsWriter, atomic_write_json, read_jsonl

    if on_failure not in ("record", "raise"):
        raise SpecConfigError(f"on_failure={on_failure!r}; valid: record, raise")
    if not 0 <= alpha <= 1:
        raise SpecConfigError(f"alpha={alpha} must be in [0, 1]")
    items = [record_item(r, i) for i, r in enumerate(records)]
    if check_count and s.items and len(records) != len(s.items):
        raise DataFormatError(
            f"{len(records)} generation records but scenario {s.name!r} has {len(s.items)} items"
        )
    ids = [str(r.get("id", f"{s.name}-{i}")) for i, r in enumerate(records)]
    if len(set(ids)) != len(ids):
        ids = [f"{x}@{i}" for i, x in enumerate(ids)]
    name = judge_name(judge)
    writer = None
    done: dict[str, dict] = {}
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        writer = ResultsWriter(Path(out_dir) / f"{name}_evaluate.partial.jsonl", id_key="id")
        if writer.path.exists():
            done = {r["id"]: r for r in read_jsonl(writer.path)}
        other = {r.get("scenario") for r in done.values()} - {s.name}
        if other:
            raise DataFormatError(
                f"{writer.path} holds judged items of scenario {sorted(map(str, other))}, not "
                f"{s.name!r}: use another output folder or delete the file"
            )
    out: dict[str, dict] = dict(done)
    order = list(range(len(records)))
    bar = tqdm(total=len(order), desc=f"judge {name}", disable=not progress)
    bar.update(len(done))
    size = max(batch_size, num_threads)
    for _, chunk in _chunks(order, size):
        todo = [i for i in chunk if ids[i] not in out]
        if not todo:
            continue
        responses = [records[i]["response"] for i in todo]
        verdicts = judge.judge_many([items[i] for i in todo], responses, s)
        for i, v in zip(todo, verdicts, strict=True):
            rec = {k: val for k, val in records[i].items() if k != "eval"}
            rec["id"] = ids[i]
            rec["scenario"] = s.name
            rec["truncated"] = len(records[i]["response"]) > RESPONSE_MAX_CHARS
            rec["empty_response"] = not records[i]["response"].strip()
            if isinstance(v, JudgeParseError):
                if on_failure == "raise":
                    raise v
                rec["judge_status"] = "failed"
                rec["eval"] = {"error": str(v), "raw": v.raw}
            else:
                rec["judge_status"] = "ok"
                rec["eval"] = verdict_record(
                    v, judge, items[i], records[i]["response"], s, alpha, na_policy
                )
            out[ids[i]] = rec
            if writer is not None:
                writer.write(rec)
        bar.update(len(todo))
    bar.close()
    evaluated = [out[x] for x in ids]
    for r in evaluated:  # resumed items: score with this call's alpha / NA policy
        if r.get("judge_status") == "ok":
            res = r["eval"]["result"]
            res["score"] = item_score(
                list(res["safety"].values()), list(res["behavioral"].values()), alpha, na_policy
            )
    report = aggregate(evaluated)
    if out_dir is not None:
        atomic_write_json(Path(out_dir) / f"{name}_evaluate.json", evaluated)
        atomic_write_json(Path(out_dir) / f"{name}_score.json", report.to_official())
    return evaluated, report
