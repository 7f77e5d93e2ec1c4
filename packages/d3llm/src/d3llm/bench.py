"""``d3llm bench``: every decoder on the fixture's held-out prompts in one run.

Vanilla (one token per forward), Fast-dLLM confidence 0.9, single-block entropy 0.5, entropy
multi-block on the teacher and the student (0.5 / 0.1 / 0.95), the student with and without the
delayed KV cache (delay 1, refresh 3, blocks of 4), and the causal baseline of the same
architecture through ``llmcore``'s HF backend. Each run reports accuracy, TPF, NFE, tokens
processed per forward, tokens/s and peak memory (the rise in resident memory during the run on
CPU, sampled every millisecond; allocated CUDA memory on a GPU), with ratios to vanilla and to
the AR baseline. TPF against output length compares the demo task (6-token answers) with the
fixture task (8-token answers). Writes ``bench.json``, ``points.yaml`` (AUP layout, thresholds
0.1/0.3/0.5/0.8 plus the rho = 1 vanilla point per model), ``table.md`` and, with the ``plot``
extra, ``accuracy_vs_tpf.png``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

THRESHOLDS = (0.1, 0.3, 0.5, 0.8)
KV_BLOCK = 4
"""Blocks of the KV-cache runs (several blocks, so finished ones can join the cached prefix)."""


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def peak_memory(fn: Callable[[], Any], device: str = "cpu") -> tuple[Any, float | None]:
    """Run ``fn`` and return ``(its result, peak memory in MiB)``: on CUDA the peak allocated
    memory above the allocation before the run, on CPU the peak rise of the process's resident
    memory, sampled every millisecond from ``/proc`` (``None`` where that is unavailable)."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn()
        torch.cuda.synchronize()
        return out, (torch.cuda.max_memory_allocated() - base) / 2**20
    base = _rss_bytes()
    if base is None:
        return fn(), None
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes() or 0)
            stop.wait(0.001)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out = fn()
    finally:
        stop.set()
        th.join()
    peak[0] = max(peak[0], _rss_bytes() or 0)
    return out, (peak[0] - base) / 2**20


def _ar_eval(entry: Any, xs: list[str], task: Any) -> dict[str, Any]:
    from llmcore.generation import HFBackend, SamplingParams

    model, tok = entry.load()
    backend = HFBackend(model, tok, batch_size=len(xs), progress=False)
    prompts = [tok.bos_token + task.prompt(x) for x in xs]
    t0 = time.perf_counter()
    outs = backend.generate(prompts, SamplingParams(max_new_tokens=task.gen_length))
    sec = time.perf_counter() - t0
    texts = [o[0].text.strip() for o in outs]
    acc = sum(t == task.answer(x) for t, x in zip(texts, xs, strict=True)) / len(xs)
    tokens = sum(len(o[0].token_ids) for o in outs)
    return {"method": "ar", "accuracy": acc, "tpf": 1.0, "nfe_mean": tokens / len(xs),
            "tokens_mean": tokens / len(xs), "seconds": sec,
            "tokens_per_second": tokens / max(sec, 1e-9)}  # fmt: skip


def _round(v: float | None) -> float | str:
    return "-" if v is None else round(v, 1)


def _ratio(a: float | None, b: float | None) -> float | str:
    return "-" if a is None or b is None or b <= 0 else round(a / b, 2)


def tpf_by_length(
    n: int = 128, mb: dict | None = None, done: dict[str, dict[str, dict]] | None = None
) -> list[dict[str, Any]]:
    """TPF against output length: vanilla and multi-block (0.5) TPF of the teacher and the
    student of the demo setup (3 digits, 6-token answers, 8 positions) and of the fixture (4
    digits, 8-token answers, 12 positions); each task has one answer length. ``done`` maps a
    setup to runs already measured on the same ``n`` prompts (keys ``"<model>/vanilla"`` and
    ``"<model>/multiblock-0.5"``, as :func:`run_bench` names them), which are reused."""
    from d3llm.tiny import eval_inputs, evaluate, load_mdlm_entry, setup

    mb = mb or {"block_add_threshold": 0.1, "decoded_token_threshold": 0.95}
    done = done or {}
    rows = []
    for size in ("demo", "fixture"):
        env = setup(size)
        task = env["task"]
        xs = eval_inputs(task, n=n)
        row: dict[str, Any] = {"setup": size, "answer tokens": task.answer_length,
                               "positions": task.gen_length}  # fmt: skip
        for name in ("teacher", "student"):
            if size in done:
                van, mbr = done[size][f"{name}/vanilla"], done[size][f"{name}/multiblock-0.5"]
            else:
                m, tok = load_mdlm_entry(env[name])
                van = evaluate(m, tok, "vanilla", task=task, inputs=xs)
                mbr = evaluate(m, tok, "multiblock", task=task, inputs=xs, threshold=0.5, **mb)
            row[f"{name} vanilla TPF"] = round(van["tpf"], 2)
            row[f"{name} multi-block TPF"] = round(mbr["tpf"], 2)
            row[f"{name} multi-block acc"] = round(mbr["accuracy"], 3)
        rows.append(row)
    return rows


def run_bench(
    out: str | Path, n: int = 128, plot: bool = True, ar: bool = True, size: str = "fixture"
) -> dict:
    """Run the benchmark on the ``size`` setup (:func:`d3llm.tiny.setup`) and write its files
    into ``out``; returns the JSON payload."""
    from d3llm.metrics import aup_table, write_points
    from d3llm.tiny import eval_inputs, evaluate, load_mdlm_entry, setup
    from llmcore.cli import print_table

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = setup(size)
    task = env["task"]
    xs = eval_inputs(task, n=n)
    teacher, tok = load_mdlm_entry(env["teacher"])
    student, _ = load_mdlm_entry(env["student"])
    mb = {"block_add_threshold": 0.1, "decoded_token_threshold": 0.95}
    dev = str(teacher.device)
    runs: dict[str, dict] = {}

    def run(key: str, fn: Callable[[], dict]) -> None:
        r, mem = peak_memory(fn, dev)
        runs[key] = {**r, "peak_mib": mem}

    for name, m in (("teacher", teacher), ("student", student)):
        run(f"{name}/vanilla", lambda m=m: evaluate(m, tok, "vanilla", task=task, inputs=xs))
        for thr in THRESHOLDS:
            run(f"{name}/multiblock-{thr}", lambda m=m, thr=thr: evaluate(
                m, tok, "multiblock", task=task, inputs=xs, threshold=thr, **mb))  # fmt: skip
    run("teacher/confidence-0.9", lambda: evaluate(teacher, tok, "threshold", task=task, inputs=xs,
                                                   mode="confidence", threshold=0.9))  # fmt: skip
    run("teacher/entropy-0.5", lambda: evaluate(teacher, tok, "threshold", task=task, inputs=xs,
                                                threshold=0.5))  # fmt: skip
    kv = {"threshold": 0.5, "block_size": KV_BLOCK, **mb}
    run(f"student/multiblock-0.5-b{KV_BLOCK}", lambda: evaluate(
        student, tok, "multiblock", task=task, inputs=xs, **kv))  # fmt: skip
    run(f"student/multiblock-0.5-b{KV_BLOCK}-kv", lambda: evaluate(
        student, tok, "multiblock", task=task, inputs=xs, use_kv_cache=True, cache_delay_iter=1,
        refresh_interval=3, **kv))  # fmt: skip
    if ar:
        ar_entry = env["ar"]()
        run("ar/greedy", lambda: _ar_eval(ar_entry, xs, task))
    by_length = tpf_by_length(n=n, mb=mb, done={size: runs})
    points = {"parity": {
        name: [[1.0, 100 * runs[f"{name}/vanilla"]["accuracy"]]]
        + [[runs[f"{name}/multiblock-{t}"]["tpf"], 100 * runs[f"{name}/multiblock-{t}"]["accuracy"]]
           for t in THRESHOLDS]
        for name in ("teacher", "student")
    }}  # fmt: skip
    write_points(out / "points.yaml", points)
    aups = aup_table(points)["parity"]
    van = runs["teacher/vanilla"]
    arr = runs.get("ar/greedy")
    rows = []
    for key, r in runs.items():
        row = {
            "run": key,
            "acc": round(r["accuracy"], 3),
            "TPF": round(r["tpf"], 2),
            "TPF_content": round(r.get("tpf_content", 1.0), 2),
            "NFE": round(r["nfe_mean"], 2),
            "tok/fwd": round(r["tokens_processed_per_sample"] / max(r["nfe_mean"], 1e-9), 1)
            if "tokens_processed_per_sample" in r
            else "-",
            "tok/s": round(r["tokens_per_second"], 1),
            "TPF/van": round(r["tpf"] / max(van["tpf"], 1e-9), 2),
            "tok/s vs van": round(r["tokens_per_second"] / van["tokens_per_second"], 2),
            "peak MiB": _round(r.get("peak_mib")),
            "mem vs van": _ratio(r.get("peak_mib"), van.get("peak_mib")),
        }
        if arr:
            row["tok/s vs AR"] = round(r["tokens_per_second"] / arr["tokens_per_second"], 2)
            row["mem vs AR"] = _ratio(r.get("peak_mib"), arr.get("peak_mib"))
        rows.append(row)
        r.pop("texts", None)
    print_table(rows)
    print({k: round(v, 2) for k, v in aups.items()})
    head = list(rows[0])
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(r.get(h, "")) for h in head) + " |" for r in rows]
    lhead = list(by_length[0])
    md += ["", "TPF against output length (answer tokens):", "",
           "| " + " | ".join(lhead) + " |", "|" + "---|" * len(lhead)]  # fmt: skip
    md += ["| " + " | ".join(str(r[h]) for h in lhead) + " |" for r in by_length]
    print_table(by_length)
    (out / "table.md").write_text("\n".join(md) + f"\n\nAUP: {json.dumps(aups)}\n")
    payload = {"runs": runs, "aup": aups, "n": n, "tpf_by_length": by_length, "targets": {
        "multiblock_tpf_min": 2.0, "accuracy_drop_max": 0.05, "distill_tpf_gain": 1.2}}  # fmt: skip
    (out / "bench.json").write_text(json.dumps(payload, indent=1, default=str))
    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib missing (pip install 'd3llm[plot]'): no plot written")
        else:
            fig, ax = plt.subplots(figsize=(5, 3.5))
            for name, pts in points["parity"].items():
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=name)
            ax.set_xlabel("TPF")
            ax.set_ylabel("accuracy (%)")
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / "accuracy_vs_tpf.png", dpi=120)
    return payload
