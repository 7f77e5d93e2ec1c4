"""``unlearn-leakk bench``: sampling throughput (batched ``num_return_sequences`` vs a
per-sample loop), and leak@k curves of unlearning methods, RULE and the compute-matched control
on the fictitious-author world at four decoding settings."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

#: Decoding settings of the NPO / method leak curves.
BENCH_PAIRS: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.2, 0.2), (0.8, 1.0), (1.0, 1.0))


def throughput(
    model: Any, tok: Any, items: list, n: int = 32, max_new_tokens: int = 16, seed: int = 0
) -> dict[str, float]:
    """Samples/s and tokens/s for n samples per prompt: one ``generate`` call with
    ``num_return_sequences=n`` (one prefill per prompt) vs n calls with one sample each."""
    from llmcore.generation import HFBackend, SamplingParams
    from unlearn_leakk.sampling import render_prompts

    be = HFBackend(model, tok, batch_size=1, progress=False)
    prompts = render_prompts(tok, items, chat_template=False)
    out: dict[str, float] = {}
    for mode in ("batched", "loop"):
        t0 = time.perf_counter()
        toks = samples = 0
        for i, p in enumerate(prompts):
            if mode == "batched":
                res = be.generate(
                    [p],
                    SamplingParams(
                        n=n, temperature=1.0, seed=seed + i, max_new_tokens=max_new_tokens
                    ),
                )[0]
            else:
                res = [
                    be.generate(
                        [p],
                        SamplingParams(
                            n=1, temperature=1.0, seed=seed + i + j, max_new_tokens=max_new_tokens
                        ),
                    )[0][0]
                    for j in range(n)
                ]
            samples += len(res)
            toks += sum(len(c.token_ids) for c in res)
        dt = time.perf_counter() - t0
        out[f"{mode}_samples_per_s"] = samples / dt
        out[f"{mode}_tokens_per_s"] = toks / dt
        out[f"{mode}_seconds"] = dt
    out["speedup"] = out["batched_samples_per_s"] / out["loop_samples_per_s"]
    return out


def estimator_cost(n_queries: int = 400, n: int = 200) -> float:
    """Seconds for leak@k curves (k = 1..128) over 400 x 200 = 80k responses."""
    import numpy as np

    from unlearn_leakk.config import K_DEFAULT
    from unlearn_leakk.estimator import leak_at_k_curve

    counts = np.random.default_rng(0).integers(0, n + 1, n_queries)
    t0 = time.perf_counter()
    leak_at_k_curve(counts, n, K_DEFAULT)
    return time.perf_counter() - t0


def _curves(
    model: Any,
    tok: Any,
    world: Any,
    forget: list,
    retain: list,
    cfg: Any,
    label: str,
    pairs: tuple[tuple[float, float], ...],
) -> list[dict[str, Any]]:
    from unlearn_leakk.config import DecodingConfig
    from unlearn_leakk.experiment import measure

    rows = []
    for t, p in pairs:
        n = 1 if t == 0 else cfg.n
        dec = DecodingConfig(
            t,
            p if t > 0 else 1.0,
            n=n,
            max_new_tokens=cfg.max_new_tokens,
            seed=1000 + cfg.seed,
            batch_size=max(n, 1),
        )
        m = measure(model, tok, world, forget, retain, cfg, decoding=dec)
        row = {
            "method": label,
            "seed": cfg.seed,
            "temperature": t,
            "top_p": p,
            "n": n,
            "greedy_forget_acc": m["greedy_forget_acc"],
            "greedy_retain_acc": m["greedy_retain_acc"],
        }
        row |= {k: v for k, v in m.items() if k.startswith(("leak@", "chance@"))}
        rows.append(row)
    return rows


def run_bench(
    out_dir: str | Path = "bench-out",
    *,
    seeds: list[int] | None = None,
    n: int = 32,
    throughput_n: int = 32,
    quick: bool = False,
) -> dict[str, Any]:
    """Run everything, print the tables, write ``bench.json`` (and ``leak_curves.png``)."""
    import torch

    from llmcore.data import atomic_write_json
    from unlearn_leakk.experiment import (
        WorldConfig,
        baseline_checkpoint,
        baseline_config,
        rule_config,
        world_model,
    )
    from unlearn_leakk.rule import rule_unlearn
    from unlearn_leakk.trainers import UnlearnResult, unlearn

    torch.set_num_threads(1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seeds = seeds or [0]
    model0, tok, world = world_model()
    forget0 = world.qa_items(world.forget_authors(0))
    tp = throughput(model0, tok, forget0, n=throughput_n)
    est = estimator_cost()
    rows: list[dict[str, Any]] = []
    timing: list[dict[str, Any]] = []
    pairs = BENCH_PAIRS if not quick else ((0.0, 0.0), (1.0, 1.0))
    methods = ["GradDiff", "NPO", "SimNPO"] if not quick else ["GradDiff"]
    for seed in seeds:
        cfg = WorldConfig(seed=seed, n=n)
        pair = seed % 3
        forget = world.qa_items(world.forget_authors(pair))
        retain = world.qa_items(world.retain_authors(pair), split="retain")
        rows += _curves(model0, tok, world, forget, retain, cfg, "original", pairs)
        for method in methods:
            mcfg = dataclasses.replace(cfg, method=method)
            model, tok, _, info = baseline_checkpoint(mcfg)
            label = (
                f"{method} (greedy-stopped)"
                if info["base_stopped"]
                else f"{method} ({info['base_steps']} steps, no stop)"
            )
            rows += _curves(model, tok, world, forget, retain, cfg, label, pairs)
            timing.append(
                {
                    "method": method,
                    "seed": seed,
                    "steps": info["base_steps"],
                    "stopped": info["base_stopped"],
                    "seconds": info["base_seconds"],
                }
            )
            if method != "GradDiff":
                continue
            snap = copy.deepcopy(model.state_dict())
            t0 = time.perf_counter()
            model, hist = rule_unlearn(
                model, tok, forget, retain, rule_config(cfg), init_unlearned=model
            )
            rule_s = time.perf_counter() - t0
            rows += _curves(model, tok, world, forget, retain, cfg, "RULE-GradDiff", pairs)
            model.load_state_dict(snap)
            ctrl = dataclasses.replace(
                baseline_config(cfg), early_stop=None, max_steps=max(1, hist.extra_steps)
            )
            cres = UnlearnResult()
            unlearn(model, tok, forget, retain, ctrl, result=cres)
            rows += _curves(
                model, tok, world, forget, retain, cfg, "control (GradDiff, same steps)", pairs
            )
            timing.append(
                {
                    "method": "RULE-GradDiff",
                    "seed": seed,
                    "steps": hist.extra_steps,
                    "seconds": rule_s,
                    "mine_seconds": sum(r.mine_seconds for r in hist.rounds),
                    "train_seconds": sum(r.train_seconds for r in hist.rounds),
                }
            )
            timing.append(
                {"method": "control", "seed": seed, "steps": cres.steps, "seconds": cres.seconds}
            )
    import pandas as pd

    df = pd.DataFrame(rows)
    keys = ["method", "temperature", "top_p", "n"]
    agg = df.drop(columns=["seed"]).groupby(keys, sort=False).mean().reset_index()
    result = {
        "throughput": tp,
        "estimator_seconds_80k": est,
        "curves": rows,
        "summary": agg.to_dict("records"),
        "timing": timing,
        "seeds": seeds,
    }
    base16 = agg[(agg.method == "GradDiff (greedy-stopped)") & (agg.temperature == 1.0)]
    rule16 = agg[(agg.method == "RULE-GradDiff") & (agg.temperature == 1.0)]
    if len(base16) and len(rule16) and "leak@16" in agg:
        b = float(base16["leak@16"].iloc[0])
        result["rule_over_baseline_leak16"] = float(rule16["leak@16"].iloc[0]) / b if b else None
    atomic_write_json(out / "bench.json", _clean(json.loads(json.dumps(result, default=float))))
    print(
        f"throughput (n={throughput_n} samples/prompt, 10 prompts): "
        f"batched {tp['batched_samples_per_s']:.1f} samples/s "
        f"({tp['batched_tokens_per_s']:.0f} tok/s), per-sample loop "
        f"{tp['loop_samples_per_s']:.1f} samples/s ({tp['loop_tokens_per_s']:.0f} tok/s), "
        f"speedup {tp['speedup']:.1f}x"
    )
    print(f"leak@k curves for 80k responses: {est * 1000:.1f} ms")
    cols = (
        keys
        + ["greedy_forget_acc", "greedy_retain_acc"]
        + [c for c in agg.columns if c.startswith(("leak@", "chance@16"))]
    )
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(agg[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for t in timing:
        print(t)
    _plot(agg, out / "leak_curves.png")
    return result


def _clean(obj: Any) -> Any:
    """NaN (absent leak@k for n < k rows) -> None, so the JSON is standard."""
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _plot(agg: Any, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (extra 'plot'): no PNG written")
        return
    sub = agg[(agg.temperature == 1.0) & (agg.top_p == 1.0)]
    ks = sorted(int(c.split("@")[1]) for c in sub.columns if c.startswith("leak@"))
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for _, r in sub.iterrows():
        ax.plot(ks, [r[f"leak@{k}"] for k in ks], marker="o", label=r["method"])
    ch = [sub[f"chance@{k}"].mean() for k in ks if f"chance@{k}" in sub]
    if len(ch) == len(ks):
        ax.plot(ks, ch, "k--", label="chance (wrong value)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("leak@k (exact phrase)")
    ax.set_title("fictitious-author world, T = p = 1")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")
