"""``cuda-analyst bench``: CPU benchmark of the evaluator and the analysis layer.

1. Evaluator throughput (C backend, CPU), cold and warm cache, 1 and 2 workers; the NumPy and
   Triton-interpreter backends (1 worker; Triton: correctness only) for comparison.
2. Timing protocol: min/median of candidate and baseline, speedup, STREAM-style copy bandwidth.
3. Frozen vs end-to-end ablation on the same 8 masks: across-seed std, LLM calls, tokens, time.
4. Exact vs permutation-sampled Shapley for n = 3..6 players (error, coalitions evaluated).
Every number is a CPU measurement tagged with its backend, never a GPU speedup.
"""

from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np


def _throughput(n: int = 12) -> list[dict[str, Any]]:
    from cuda_analyst.backends import CBackend
    from cuda_analyst.evaluator import EvalCache, Evaluator
    from cuda_analyst.tasks import get_task

    task = get_task("vector_add")
    srcs = [task.baseline_src + f"/* variant {k} {time.time_ns()} */\n" for k in range(n)]
    rows = []
    for workers in (1, 2):
        cache = EvalCache()
        ev = Evaluator(task, CBackend(), cache=cache)
        batch = [s + f"/* w{workers} */\n" for s in srcs]
        for phase in ("cold", "warm"):
            t0 = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                res = list(pool.map(ev.evaluate, batch))
            dt = time.perf_counter() - t0
            rows.append({"backend": "c", "workers": workers, "cache": phase, "candidates": n,
                         "seconds": round(dt, 3), "candidates_per_s": round(n / dt, 2),
                         "statuses": sorted({r.status for r in res})})  # fmt: skip
    return rows + _python_throughput()


_PY_SRC = {
    "numpy": "def kernel(x, y, out, n):\n    np.add(x, y, out=out)\n",
    "triton-interpret": """import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def kernel(x, y, out, n):
    _add[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
""",
}


def _python_throughput(n: int = 3) -> list[dict[str, Any]]:
    """Cold/warm throughput of the Python-runner backends (one sandboxed interpreter start per
    check, plus one per timing run for NumPy)."""
    from cuda_analyst.backends import get_backend
    from cuda_analyst.errors import ToolUnavailableError
    from cuda_analyst.evaluator import EvalCache, Evaluator
    from cuda_analyst.tasks import get_task

    rows = []
    for name, src in _PY_SRC.items():
        try:
            be = get_backend(name)
        except ToolUnavailableError:
            continue
        ev = Evaluator(get_task("vector_add"), be, cache=EvalCache())
        batch = [src + f"# variant {k} {time.time_ns()}\n" for k in range(n)]
        for phase in ("cold", "warm"):
            t0 = time.perf_counter()
            res = [ev.evaluate(s) for s in batch]
            dt = time.perf_counter() - t0
            rows.append({"backend": name, "workers": 1, "cache": phase, "candidates": n,
                         "seconds": round(dt, 3), "candidates_per_s": round(n / dt, 2),
                         "statuses": sorted({r.status for r in res})})  # fmt: skip
    return rows


def _timing(cache) -> list[dict[str, Any]]:
    from cuda_analyst.candidates import CLAIM_TASKS, candidate
    from cuda_analyst.experiment import make_evaluators

    evs = make_evaluators(CLAIM_TASKS, cache)
    rows = []
    for t, ev in evs.items():
        r = ev.evaluate(candidate(t, "fast"))
        tm = r.timing
        rows.append({"backend": "c", "task": t, "cand_min_us": round(tm["cand_min"] / 1e3, 1),
                     "cand_median_us": round(tm["cand_median"] / 1e3, 1), "base_min_us": round(tm["base_min"] / 1e3, 1),
                     "speedup": round(r.combined_score, 2), "status": r.status,
                     "copy_GBps": round((tm.get("copy_bytes_per_s") or 0) / 1e9, 1)})  # fmt: skip
    return rows


def _frozen_vs_e2e(cache, tasks) -> dict[str, Any]:
    from cuda_analyst.experiment import make_evaluators

    evs = make_evaluators(tasks, cache)
    with tempfile.TemporaryDirectory(prefix="cuda-analyst-bench-") as tmp:
        return _frozen_vs_e2e_in(evs, tasks, Path(tmp))


def _frozen_vs_e2e_in(evs, tasks, root: Path) -> dict[str, Any]:
    from cuda_analyst.experiment import drift_comparison, frozen_samples
    from cuda_analyst.intervene import intervene
    from cuda_analyst.llm import MockLLM
    from cuda_analyst.masks import coalition_masks

    samples = frozen_samples(evs, parents_per_task=10, seed=0, workdir=root)
    masks = [str(m) for m in coalition_masks()]
    llm = MockLLM("strong", 0)
    t0 = time.perf_counter()
    res = intervene(samples, masks, llm, evs, num_run=3, num_trials=5)
    t_frozen = time.perf_counter() - t0
    t0 = time.perf_counter()
    d = drift_comparison(samples, evs, res, seeds=3, generations=8, workdir=root / "e2e")
    t_e2e = time.perf_counter() - t0
    return {"backend": "c", "tasks": list(tasks), "frozen_std": round(d["frozen_std"], 4), "e2e_std": round(d["e2e_std"], 4),
            "std_ratio": round(d["ratio"], 2), "frozen_llm_calls": llm.calls, "frozen_tokens": llm.tokens,
            "frozen_seconds": round(t_frozen, 1), "e2e_llm_calls": d["e2e_llm_calls"], "e2e_tokens": d["e2e_tokens"],
            "e2e_seconds": round(t_e2e, 1)}  # fmt: skip


def _exact_vs_sampled() -> list[dict[str, Any]]:
    from cuda_analyst.attribution import shapley, shapley_sampled, subsets

    rows = []
    names = ("d", "a", "p", "r", "x", "y")
    for n in range(3, 7):
        players = names[:n]
        rng = np.random.default_rng(n)
        w, inter = rng.random(n) * 0.2, rng.random((n, n)) * 0.05

        def value(s, players=players, w=w, inter=inter):
            idx = [players.index(x) for x in s]
            # saturating (non-additive) game: higher-order interactions, like pass rates
            return float(
                np.tanh(2 * (w[idx].sum() + sum(inter[i, j] for i in idx for j in idx if i < j)))
            )

        t0 = time.perf_counter()
        exact = shapley({s: value(s) for s in subsets(players)}, players)
        te = time.perf_counter() - t0
        seen: set = set()

        def counted(s, seen=seen, value=value):
            seen.add(s)
            return value(s)

        t0 = time.perf_counter()
        est = shapley_sampled(counted, players, num_permutations=2 * n, seed=0)
        ts = time.perf_counter() - t0
        rows.append({"n": n, "exact_coalitions": 2**n, "sampled_permutations": 2 * n, "sampled_coalitions": len(seen),
                     "max_abs_error": round(max(abs(exact[x] - est[x]) for x in players), 4),
                     "exact_ms": round(te * 1e3, 2), "sampled_ms": round(ts * 1e3, 2)})  # fmt: skip
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def run_bench(
    json_out: str | None = None, plot: str | None = None, quick: bool = False
) -> dict[str, Any]:
    """Run the four parts, print Markdown tables, write JSON (and a PNG with ``plot``)."""
    from cuda_analyst.candidates import CLAIM_TASKS
    from cuda_analyst.fixtures import load_eval_cache

    cache, _ = load_eval_cache()
    out = {
        "throughput": _throughput(),
        "timing": _timing(cache),
        "frozen_vs_e2e": [_frozen_vs_e2e(cache, CLAIM_TASKS[:2] if quick else CLAIM_TASKS)],
        "exact_vs_sampled": _exact_vs_sampled(),
    }
    for k, rows in out.items():
        print(f"\n## {k}\n{_table(rows)}")
    if json_out:
        Path(json_out).write_text(json.dumps(out, indent=1))
    if plot:
        _plot(out, plot)
    return out


def _plot(out: dict[str, Any], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError(
            "cuda-analyst bench --plot", "plot", package="cuda-analyst"
        ) from None
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    tp = [r for r in out["throughput"] if r["cache"] == "cold" and r["backend"] == "c"]
    ax[0].bar([f"{r['workers']} worker(s)" for r in tp], [r["candidates_per_s"] for r in tp])
    ax[0].axhline(3, ls="--", c="k")
    ax[0].set_title("C evaluator, cold cache (CPU)")
    ax[0].set_ylabel("candidates / s")
    ev = out["exact_vs_sampled"]
    ax[1].plot([r["n"] for r in ev], [r["exact_coalitions"] for r in ev], "o-", label="exact")
    ax[1].plot(
        [r["n"] for r in ev],
        [r["sampled_coalitions"] for r in ev],
        "s-",
        label="sampled (2n perms)",
    )
    ax[1].set_xlabel("players n")
    ax[1].set_ylabel("mask runs")
    ax[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
