"""Side-by-side benchmark of the TTD methods.

One run, one backend, one judge: per method SAR, safety, behavioral, unsafe-subset safety,
model calls, completion and prefill tokens and wall-clock per item, each also as a ratio to
vanilla; a table, a JSON file and (extra ``plot``) the safety-vs-behavioral scatter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spec_align.backends import Backend
from spec_align.data import Scenario
from spec_align.errors import SpecConfigError
from spec_align.judge import Judge
from spec_align.pipeline import evaluate, generate
from spec_align.prompts import DEFAULT_TEMPLATES, Templates
from spec_align.scoring import macro_average
from spec_align.ttd import METHOD_NAMES, get_method

RATIO_KEYS = ("calls", "completion_tokens", "prefill_tokens", "seconds")


def _reward_for(judge: Judge, s: Scenario):
    from spec_align.scoring import item_score

    def reward(item, response: str) -> float:
        v = judge.judge(item, response, s)
        return item_score(v.safety, v.behavioral)["total"]

    return reward


def behavioral_pass_rate(records: list[dict[str, Any]]) -> float:
    """Share of applicable behavioral verdicts that are YES (NA excluded): the gate quantity
    "passes x of its behavioral specs" of the claim test's model-quality gate, apart from the official NA-as-fail score."""
    yes = total = 0
    for r in records:
        if r.get("judge_status") == "failed":
            continue
        for v in r["eval"]["result"]["behavioral"].values():
            if v != "NA":
                total += 1
                yes += v == "YES"
    return yes / total if total else float("nan")


def method_kwargs(name: str, cfg: dict[str, Any], reward) -> dict[str, Any]:
    kw = dict(cfg.get(name, {}))
    if name in ("best_of_n", "tpo"):
        kw["reward_fn"] = reward
    return kw


def run_bench(
    scenarios: Sequence[Scenario],
    backend: Backend,
    judge: Judge,
    *,
    methods: Sequence[str] = METHOD_NAMES,
    ttd_config: dict[str, Any] | None = None,
    templates: Templates = DEFAULT_TEMPLATES,
    reward_judge: Judge | None = None,
    samples: int = 1,
    batch_size: int = 16,
    seed: int = 0,
    progress: bool = False,
    warmup: bool = True,
    **gen: Any,
) -> dict[str, Any]:
    """Run every method on every scenario; returns ``{"methods": {name: row}, ...}``."""
    unknown = [m for m in methods if m not in METHOD_NAMES]
    if unknown:
        raise SpecConfigError(f"unknown methods {unknown}; valid: {', '.join(METHOD_NAMES)}")
    cfg = ttd_config or {}
    rows: dict[str, dict[str, Any]] = {}
    if warmup:  # one-time costs (allocator, kernels, connections) out of the first method's time
        backend.chat_many([[{"role": "user", "content": "hi"}]], max_new_tokens=2)
    for name in methods:
        reports, recs_all = {}, []
        calls0 = backend.calls
        t0 = time.perf_counter()
        for s in scenarios:
            reward = _reward_for(reward_judge or judge, s)
            method = get_method(name, templates=templates, **method_kwargs(name, cfg, reward))
            recs = generate(
                s,
                method,
                backend,
                batch_size=batch_size,
                seed=seed,
                samples=samples,
                progress=progress,
                **gen,
            )
            ev, rep = evaluate(recs, s, judge, batch_size=64, progress=progress)
            reports[s.name] = rep
            recs_all += ev
        wall = time.perf_counter() - t0
        rep = macro_average(reports)
        n = len(recs_all)
        rows[name] = {
            "SAR": rep.avg("SAR"),
            "safety": rep.avg("safety"),
            "behavioral": rep.avg("behavioral"),
            "unsafe_safety": rep.avg("safety", "unsafe_subset"),
            "safe_behavioral": rep.avg("behavioral", "safe_subset"),
            "calls": (backend.calls - calls0) / n,
            "completion_tokens": sum(r["usage"]["completion_tokens"] for r in recs_all) / n,
            "prefill_tokens": sum(r["usage"].get("prefill_tokens", 0) for r in recs_all) / n,
            "seconds": wall / n,
            "think_closed": sum(not r.get("missing_think_close") for r in recs_all) / n,
            "behavioral_pass": behavioral_pass_rate(recs_all),
            "empty": sum(r.get("empty_response", False) for r in recs_all) / n,
            "failed_judging": rep.failed_count,
            "n": n,
        }
    if "vanilla" in rows:
        base = rows["vanilla"]
        for row in rows.values():
            for k in RATIO_KEYS:
                row[f"{k}_x_vanilla"] = row[k] / base[k] if base[k] else float("nan")
    return {
        "methods": rows,
        "scenarios": [s.name for s in scenarios],
        "backend": backend.name,
        "judge": judge.name,
        "samples": samples,
        "gen": gen,
        "reward_is_eval_judge": reward_judge is None
        and any(m in ("best_of_n", "tpo") for m in methods),
    }


def format_table(result: dict[str, Any]) -> str:
    """Markdown table of a :func:`run_bench` result."""
    head = (
        "| method | SAR | safety | behavioral | unsafe safety | calls | compl. tok | "
        "prefill tok | s/item | tok × van. | prefill × van. | wall × van. |"
    )
    lines = [head, "|" + "---|" * 12]
    for name, r in result["methods"].items():
        lines.append(
            f"| {name} | {r['SAR']:.3f} | {r['safety']:.3f} | {r['behavioral']:.3f} | "
            f"{r['unsafe_safety']:.3f} | {r['calls']:.2f} | {r['completion_tokens']:.1f} | "
            f"{r['prefill_tokens']:.1f} | {r['seconds']:.3f} | "
            f"{r.get('completion_tokens_x_vanilla', float('nan')):.2f} | "
            f"{r.get('prefill_tokens_x_vanilla', float('nan')):.2f} | "
            f"{r.get('seconds_x_vanilla', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def write_outputs(result: dict[str, Any], out: str | Path, plot: bool = True) -> list[Path]:
    """Write ``bench.json`` (and ``bench.png`` when matplotlib is installed) under ``out``."""
    from llmcore.data import atomic_write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "bench.json"]
    atomic_write_text(written[0], json.dumps(result, indent=2, default=str))
    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return written
        fig, ax = plt.subplots(figsize=(5, 4))
        for name, r in result["methods"].items():
            ax.scatter(r["behavioral"], r["safety"])
            ax.annotate(name, (r["behavioral"], r["safety"]), fontsize=8)
        ax.set_xlabel("behavioral score")
        ax.set_ylabel("safety score")
        ax.set_title("safety vs behavioral per method")
        fig.tight_layout()
        fig.savefig(out / "bench.png", dpi=120)
        plt.close(fig)
        written.append(out / "bench.png")
    return written
