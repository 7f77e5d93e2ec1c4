"""``cds-icl bench``: CDS ordering time (incremental vs full-recompute 2-opt), prefill tokens and
wall time of fixed-block selectors with shared-prefix reuse against KATE's per-query blocks,
grading throughput, and the tiny model's accuracy +- order-induced std per selector."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np


def bench_ordering(sizes: Sequence[int] = (64, 128, 256), dim: int = 64) -> list[dict[str, Any]]:
    """Seconds per CDS ordering (10 starts) of random unit vectors, ours vs the reference
    full-recompute 2-opt (the reference runs one start at n >= 128, scaled to 10)."""
    from cds_icl.tsp import cds_order

    rows = []
    for n in sizes:
        E = np.random.default_rng(n).normal(size=(n, dim))
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        t = time.perf_counter()
        order, _ = cds_order(E)
        ours = time.perf_counter() - t
        starts = 10 if n < 128 else 1
        t = time.perf_counter()
        ref, _ = cds_order(E, n_starts=starts, naive=True)
        naive = (time.perf_counter() - t) * (10 / starts)
        same = ref == order if starts == 10 else ref == cds_order(E, n_starts=1)[0]
        rows.append({"n": n, "cds_s": round(ours, 3), "naive_s": round(naive, 2),
                     "naive_starts_run": starts, "speedup": round(naive / ours, 1),
                     "same_order": bool(same)})  # fmt: skip
    return rows


def bench_prefill(model: Any, tok: Any, data: Any, k_count: int = 64, k_time: int = 16,
                  n_queries: int = 16) -> dict[str, Any]:  # fmt: skip
    """Prefill tokens per query at ``k_count`` (counted) and wall time at ``k_time`` (run):
    one fixed block with prefix reuse vs KATE's per-query blocks."""
    from cds_icl.embed import Embedder
    from cds_icl.runner import make_prompts
    from cds_icl.selectors import CDSSelector, KATESelector
    from llmcore.generation import HFBackend, SamplingParams

    items = data.items[:n_queries]
    emb = Embedder("hash")
    ntok = lambda p: len(tok(p, add_special_tokens=False)["input_ids"])  # noqa: E731
    out: dict[str, Any] = {}
    k_count = min(k_count, len(data.pool))
    fixed, _ = make_prompts(data, items, CDSSelector(emb), k_count, 71)
    kate, _ = make_prompts(data, items, KATESelector(emb), k_count, 71)
    prefix = ntok(fixed[0][: len(_common_prefix(fixed))])
    fixed_per_q = (prefix + sum(ntok(p) - prefix for p in fixed)) / len(fixed)
    kate_per_q = sum(ntok(p) for p in kate) / len(kate)
    out.update({"k_count": k_count, "fixed_prefill_per_query": round(fixed_per_q, 1),
                "kate_prefill_per_query": round(kate_per_q, 1),
                "prefill_ratio": round(kate_per_q / fixed_per_q, 2)})  # fmt: skip
    params = SamplingParams(max_new_tokens=8, repetition_penalty=1.1)
    fixed, _ = make_prompts(data, items, CDSSelector(emb), k_time, 71)
    kate, _ = make_prompts(data, items, KATESelector(emb), k_time, 71)
    be = HFBackend(model, tok, batch_size=n_queries, prefix_cache=True, progress=False)
    t = time.perf_counter()
    be.generate(fixed, params)
    out["fixed_wall_s"] = round(time.perf_counter() - t, 2)
    be2 = HFBackend(model, tok, batch_size=n_queries, prefix_cache=True, progress=False)
    t = time.perf_counter()
    be2.generate(kate, params)
    out["kate_wall_s"] = round(time.perf_counter() - t, 2)
    out["k_time"] = k_time
    return out


def _common_prefix(texts: Sequence[str]) -> str:
    """Longest common character prefix of ``texts``."""
    first, n = texts[0], len(texts[0])
    for t in texts[1:]:
        n = min(n, len(t))
        for i in range(n):
            if t[i] != first[i]:
                n = i
                break
    return first[:n]


def bench_grading(n: int = 1000) -> dict[str, Any]:
    """Answers graded per second (string/numeric matches, some symbolic)."""
    from cds_icl.grading import grade_math

    rows = [(f"so \\boxed{{{i % 50}}}", str(i % 50 if i % 3 else i % 7)) for i in range(n)]
    rows[:5] = [("\\boxed{\\frac{\\sqrt2}{2}}", "\\frac{1}{\\sqrt2}")] * 5
    grade_math(*rows[0])  # start the symbolic worker
    t = time.perf_counter()
    for r, g in rows:
        grade_math(r, g)
    return {"answers": n, "answers_per_s": round(n / (time.perf_counter() - t), 1)}


def bench_accuracy(model: Any, tok: Any, data: Any, k: int = 16, limit: int = 20,
                   seeds: Sequence[int] = (71, 72, 73, 74, 75)) -> list[dict[str, Any]]:  # fmt: skip
    """Accuracy and order-induced std (population std over seeds) per selector."""
    from cds_icl.embed import Embedder
    from cds_icl.runner import evaluate
    from cds_icl.selectors import make_selector

    emb = Embedder("hash")
    rows = []
    for name in ("random", "cds", "high_curvature", "kate", "complexity"):
        sel = make_selector(name, embedder=emb)
        s = seeds if name == "random" else seeds[:1]
        r = evaluate((model, tok), data, sel, k=k, seeds=s, limit=limit, max_new_tokens=48)
        rows.append({"selector": name, "k": k, "acc": round(r.acc, 3), "std": round(r.std, 3),
                     "seeds": len(s)})  # fmt: skip
    return rows


def run_bench(sizes: Sequence[int] = (64, 128, 256), json_out: str | None = "bench.json",
              plot: str | None = None, quick: bool = False) -> dict[str, Any]:  # fmt: skip
    """All four parts; prints tables, writes JSON (and PNGs with the plot extra)."""
    import torch

    from cds_icl.runner import load_task
    from cds_icl.tiny import build_tiny

    torch.set_num_threads(1)
    res: dict[str, Any] = {"ordering": bench_ordering(sizes)}
    _table("CDS ordering (10 starts, one core)", res["ordering"])
    res["grading"] = bench_grading()
    _table("grading", [res["grading"]])
    model, tok = build_tiny(progress=False).load()
    data = load_task("synthetic", n_pool=64)
    res["prefill"] = bench_prefill(model, tok, data)
    _table("prefill: fixed block + prefix reuse vs KATE", [res["prefill"]])
    res["accuracy"] = bench_accuracy(model, tok, data, limit=10 if quick else 20)
    _table("tiny-model accuracy (synthetic, k = 16)", res["accuracy"])
    if json_out:
        from llmcore.data import atomic_write_json

        atomic_write_json(json_out, res)
    if plot:
        _plot(res, plot)
    return res


def _table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r[k]) for k in keys))


def _plot(res: dict[str, Any], prefix: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the extra
        from cds_icl.errors import CDSInputError

        raise CDSInputError("--plot needs matplotlib: pip install 'cds-icl[plot]'") from e
    o = res["ordering"]
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([r["n"] for r in o], [r["cds_s"] for r in o], "o-", label="incremental")
    ax.plot([r["n"] for r in o], [r["naive_s"] for r in o], "s--", label="full recompute")
    ax.set(xlabel="n", ylabel="seconds", yscale="log", title="CDS ordering time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{prefix}_ordering.png", dpi=120)
    a = res["accuracy"]
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar([r["selector"] for r in a], [r["acc"] for r in a], yerr=[r["std"] for r in a])
    ax.set(ylabel="accuracy", title="accuracy +- order std")
    fig.tight_layout()
    fig.savefig(f"{prefix}_accuracy.png", dpi=120)
    print(json.dumps({"plots": [f"{prefix}_ordering.png", f"{prefix}_accuracy.png"]}))
