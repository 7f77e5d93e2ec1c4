"""Selective feedback injection on a frozen trajectory, generation-level sampling, replay.

For every mask, rollout and frozen sample: re-evaluate the frozen parent, build the mask's
reports, inject the decision block before the evolution-history anchor of the frozen user
prompt, sample ``num_trials`` completions, evaluate each and count the sample by its highest
status (Sec. 3). Records are appended to ``<out>/<mask>/records.jsonl`` (resumable by id) and
written in the official layout ``<out>/<mask>/run-<i>/<gen>/<pid>.json`` and
``<out>/<mask>.json`` (a list over rollouts of ``{gen: {total, fail, compile, pass, fast}}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from cuda_analyst.errors import AnalystValueError, FrozenDataError
from cuda_analyst.evaluator import STATUS_ORDER, Evaluator, status_rank
from cuda_analyst.feedback import build_reports
from cuda_analyst.masks import AnalysisMask
from cuda_analyst.prompting import Report, decision_block, extract_code, inject
from cuda_analyst.trajectory import generate_with_retries, load_frozen, stable_seed

Counts = dict[str, int]


def _empty() -> Counts:
    return {"total": 0, "fail": 0, "compile": 0, "pass": 0, "fast": 0}


def _evaluator_for(evaluators: Evaluator | Mapping[str, Evaluator], task: str) -> Evaluator:
    if isinstance(evaluators, Evaluator):
        return evaluators
    try:
        return evaluators[task]
    except KeyError:
        raise AnalystValueError(
            f"no evaluator for task {task!r}; have {sorted(evaluators)}"
        ) from None


def _load_replay(replay_from: Path) -> dict[str, dict[str, Any]]:
    f = replay_from / "records.jsonl"
    if not f.exists():
        raise FrozenDataError(
            f"replay source {replay_from} has no records.jsonl; point it at an intervene mask folder"
        )
    from llmcore.data import read_jsonl

    return {r["id"]: r for r in read_jsonl(f)}


def intervene(
    frozen: str | Path | Sequence[dict[str, Any]],
    masks: Sequence[AnalysisMask | str],
    llm: Any,
    evaluators: Evaluator | Mapping[str, Evaluator],
    *,
    num_run: int = 3,
    num_trials: int = 5,
    out_dir: str | Path | None = None,
    replay_from: str | Path | None = None,
    seed: int = 0,
    misaligned: bool = False,
    placebo: bool = False,
    progress: bool = False,
    max_new_tokens: int = 1024,
    max_workers: int = 2,
) -> dict[str, list[dict[str, Counts]]]:
    """Run every mask on the frozen samples; ``{mask: [ {gen: counts} per rollout ]}``.

    ``replay_from`` (a mask folder of an earlier run, e.g. with a stronger LLM) reuses its
    recorded decision blocks instead of building reports (plan transfer). ``misaligned``
    computes the reports on another sample's program (a control); ``placebo`` replaces the
    planner's roadmap by a content-free plan. Request seeds depend on (seed, rollout, sample)
    only, so all masks see the same sampling randomness. ``max_workers`` evaluates a sample's
    trials in parallel (each in its own sandboxed subprocess)."""
    samples = load_frozen(frozen) if isinstance(frozen, str | Path) else list(frozen)
    if not samples:
        raise FrozenDataError("no frozen samples given")
    if num_run < 1 or num_trials < 1:
        raise AnalystValueError(f"num_run and num_trials must be >= 1, got {num_run}, {num_trials}")
    masks = [AnalysisMask.parse(m) if isinstance(m, str) else m for m in masks]
    replay = _load_replay(Path(replay_from)) if replay_from else None
    out = Path(out_dir) if out_dir else None
    results: dict[str, list[dict[str, Counts]]] = {}
    for mask in masks:
        name = str(mask)
        writer = None
        if out is not None:
            from llmcore.data import ResultsWriter, read_jsonl

            (out / name).mkdir(parents=True, exist_ok=True)
            writer = ResultsWriter(out / name / "records.jsonl")
            done = (
                {r["id"]: r for r in read_jsonl(out / name / "records.jsonl")}
                if (out / name / "records.jsonl").exists()
                else {}
            )
        else:
            done = {}
        runs: list[dict[str, Counts]] = []
        it = tqdm(range(num_run), desc=name, disable=not progress)
        for run in it:
            per_gen: dict[str, Counts] = {}
            for k, s in enumerate(samples):
                rid = f"run-{run}/{s['key']}"
                rec = done.get(rid)
                if rec is None:
                    rec = _one(
                        s,
                        k,
                        samples,
                        mask,
                        run,
                        llm,
                        evaluators,
                        num_trials,
                        seed,
                        replay,
                        misaligned,
                        placebo,
                        max_new_tokens,
                    )
                    rec["id"] = rid
                    if writer is not None:
                        writer.write(rec)
                        p = (
                            out
                            / name
                            / f"run-{run}"
                            / str(s["generation"])
                            / f"{s['key'].replace('/', '_')}.json"
                        )
                        p.parent.mkdir(parents=True, exist_ok=True)
                        p.write_text(json.dumps(rec, indent=1))
                c = per_gen.setdefault(str(s["generation"]), _empty())
                c["total"] += 1
                c[rec["highest_status"].lower()] += 1
            runs.append(per_gen)
        results[name] = runs
        if out is not None:
            (out / f"{name}.json").write_text(json.dumps(runs, indent=1))
    return results


def _one(
    s,
    k,
    samples,
    mask,
    run,
    llm,
    evaluators,
    num_trials,
    seed,
    replay,
    misaligned,
    placebo,
    max_new_tokens,
) -> dict[str, Any]:
    ev = _evaluator_for(evaluators, s.get("task", ""))
    parent = ev.evaluate(s["code"])
    ctx_seed = stable_seed(seed, run, s["key"], "ctx")
    rid = f"run-{run}/{s['key']}"
    if replay is not None:
        src = replay.get(rid)
        if src is None:
            raise FrozenDataError(
                f"replay source has no record {rid!r}: the frozen samples or num_run differ"
            )
        block, reports = src["decision"], src.get("reports", [])
    else:
        code_for_reports, result_for_reports = s["code"], parent
        if misaligned:
            same = [o for o in samples if o.get("task") == s.get("task") and o["code"] != s["code"]]
            if same:
                other = same[k % len(same)]
                code_for_reports, result_for_reports = other["code"], ev.evaluate(other["code"])
        reps = build_reports(
            ev.task,
            code_for_reports,
            result_for_reports,
            mask,
            llm=llm,
            seed=ctx_seed,
            placebo=placebo,
        )
        block = decision_block(reps)
        reports = [{"name": r.name, "raw": r.raw, "summary": r.summary} for r in reps]
    prompt = inject(s["prompts"]["user"], block)
    texts, err = generate_with_retries(
        llm,
        s["prompts"].get("system", "") + "\n\n" + prompt,
        num_trials,
        stable_seed(seed, run, s["key"]),
        max_new_tokens,
    )
    results = []
    for t in texts:
        r = ev.evaluate(extract_code(t))
        results.append(
            {
                "status": r.status,
                "combined_score": r.combined_score,
                "error": r.error,
                "backend": r.backend,
            }
        )
    if not texts:
        results = [
            {
                "status": "FAIL",
                "combined_score": 0.0,
                "error": {"stage": "llm", "reason": err},
                "backend": "",
            }
        ] * num_trials
    counts = {x: sum(r["status"] == x for r in results) for x in STATUS_ORDER}
    best = max(results, key=lambda r: status_rank(r["status"]))["status"]
    return {"pid": s["id"], "generation": s["generation"], "task": s.get("task", ""), "status_counts": counts,
            "highest_status": best, "reports": reports, "decision": block, "prompt": prompt, "results": results,
            "old_profile": parent.metrics(), "error": err}  # fmt: skip


def load_results(gen_dir: str | Path) -> dict[str, list[dict[str, Counts]]]:
    """Read ``<gen_dir>/<mask>.json`` files (the official per-mask layout)."""
    root = Path(gen_dir)
    out = {}
    for p in sorted(root.glob("p*-d*-a*-p*.json")):
        AnalysisMask.parse(p.stem)
        out[p.stem] = json.loads(p.read_text())
    if not out:
        raise FrozenDataError(f"no per-mask result files (p*-d*-a*-p*.json) in {root}")
    return out


__all__ = ["Report", "intervene", "load_results"]
