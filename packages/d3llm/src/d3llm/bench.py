"""``d3llm bench``: every decoder on the fixture's held-out prompts in one run.

Vanilla (one token per forward), Fast-dLLM confidence 0.9, single-block entropy 0.5, entropy
multi-block on the teacher and the student (0.5 / 0.1 / 0.95), the student with the delayed KV
cache (delay 1, refresh 3), and the causal baseline of the same architecture through
``llmcore``'s HF backend. Writes ``bench.json``, ``points.yaml`` (AUP layout, thresholds
0.1/0.3/0.5/0.8 plus the rho = 1 vanilla point per model), ``table.md`` and, with the ``plot``
extra, ``accuracy_vs_tpf.png``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

THRESHOLDS = (0.1, 0.3, 0.5, 0.8)


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
    runs: dict[str, dict] = {}
    for name, m in (("teacher", teacher), ("student", student)):
        runs[f"{name}/vanilla"] = evaluate(m, tok, "vanilla", task=task, inputs=xs)
        for thr in THRESHOLDS:
            runs[f"{name}/multiblock-{thr}"] = evaluate(m, tok, "multiblock", task=task, inputs=xs,
                                                        threshold=thr, **mb)  # fmt: skip
    runs["teacher/confidence-0.9"] = evaluate(teacher, tok, "threshold", task=task, inputs=xs,
                                              mode="confidence", threshold=0.9)  # fmt: skip
    runs["teacher/entropy-0.5"] = evaluate(
        teacher, tok, "threshold", task=task, inputs=xs, threshold=0.5
    )
    runs["student/multiblock-0.5-kv"] = evaluate(
        student, tok, "multiblock", task=task, inputs=xs, threshold=0.5, use_kv_cache=True,
        cache_delay_iter=1, refresh_interval=3, **mb,
    )  # fmt: skip
    if ar:
        runs["ar/greedy"] = _ar_eval(env["ar"](), xs, task)
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
            "tok/fwd": round(r.get("tokens_processed_per_sample", 0) / max(r["nfe_mean"], 1e-9), 1),
            "tok/s": round(r["tokens_per_second"], 1),
            "TPF/van": round(r["tpf"] / max(van["tpf"], 1e-9), 2),
            "tok/s vs van": round(r["tokens_per_second"] / van["tokens_per_second"], 2),
        }
        if arr:
            row["tok/s vs AR"] = round(r["tokens_per_second"] / arr["tokens_per_second"], 2)
        rows.append(row)
        r.pop("texts", None)
    print_table(rows)
    print({k: round(v, 2) for k, v in aups.items()})
    head = list(rows[0])
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(r.get(h, "")) for h in head) + " |" for r in rows]
    (out / "table.md").write_text("\n".join(md) + f"\n\nAUP: {json.dumps(aups)}\n")
    payload = {"runs": runs, "aup": aups, "n": n, "targets": {
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
