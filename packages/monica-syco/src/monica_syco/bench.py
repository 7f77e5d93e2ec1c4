"""``monica-syco bench`` (section 7): wall-clock of plain ``generate``, monitor only, monitor
+ calibrator (add / clamp / logit), ``always`` and ``answer_level`` on the world's tiny model;
forward passes, extra state memory, trigger counts, and offline ``score-trajectories``
throughput."""

from __future__ import annotations

import statistics
import time
from typing import Any

from monica_syco.config import BenchConfig

VARIANTS: tuple[tuple[str, str, str | None], ...] = (
    ("plain", "plain", None),
    ("monitor", "never", None),
    ("monica-add", "monitor", "add"),
    ("monica-clamp", "monitor", "clamp"),
    ("monica-logit", "monitor", "logit"),
    ("always", "always", "add"),
    ("answer_level", "answer_level", "add"),
)


def run_bench(cfg: BenchConfig | None = None, *, entry: Any = None) -> dict[str, Any]:
    """Median of ``repeats`` timed runs per variant and batch size (one warm-up each)."""
    import torch

    cfg = cfg or BenchConfig()

    from monica_syco.collect import collect_steps, fit_calibrator, fit_monitor
    from monica_syco.generate import encode_prompts, monica_generate, score_trajectory
    from monica_syco.world import TinyModelConfig, build_tiny_model, make_synthetic_world

    entry = entry or build_tiny_model(TinyModelConfig(n_entities=cfg.n_entities))
    model, tok = entry.load()
    world = make_synthetic_world(0, cfg.n_entities)
    layers = [2, 3] if model.config.num_hidden_layers >= 4 else [0, 1]
    ds = collect_steps(
        model,
        tok,
        world.items("train")[:128],
        layers,
        n_samples=2,
        max_new_tokens=72,
        batch_size=128,
    )
    mon = fit_monitor(ds, layers)
    cal = fit_calibrator(ds, layers)
    items = world.items("test", kinds=("strong",))
    kw = {"do_sample": False, "max_new_tokens": cfg.new_tokens, "min_new_tokens": cfg.new_tokens}
    rows = []
    for B in cfg.batch_sizes:
        batch = items[:B]
        prompts = [it.chat() for it in batch]
        enc = encode_prompts(tok, prompts, "cpu")
        base = None
        for name, policy, mode in VARIANTS:
            times = []
            out = None
            for r in range(cfg.repeats + 1):
                t0 = time.perf_counter()
                with torch.no_grad():
                    if name == "plain":
                        model.generate(**enc, pad_token_id=tok.pad_token_id, **kw)
                    else:
                        c = None if mode is None else cal.with_(mode=mode)
                        out = monica_generate(
                            model,
                            tok,
                            prompts,
                            mon,
                            c,
                            policy=policy,  # type: ignore[arg-type]
                            cued_answers=[it.cued_answer for it in batch],
                            **kw,
                        )
                if r:
                    times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            base = med if name == "plain" else base
            row = {
                "variant": name,
                "batch": B,
                "seconds": med,
                "ratio": med / base if base else 1.0,
            }
            if out is not None:
                row |= {
                    "n_forward": out.n_forward,
                    "triggers": sum(len(i) for i in out.interventions),
                    "state_bytes": 4
                    * B
                    * len(layers)
                    * model.config.hidden_size
                    * (2 + mon.window),
                }
            else:
                row |= {"n_forward": cfg.new_tokens, "triggers": 0, "state_bytes": 0}
            rows.append(row)
    # offline scoring throughput: one forward pass per trajectory
    out = monica_generate(
        model, tok, [it.chat() for it in items[:8]], mon, None, do_sample=False, max_new_tokens=72
    )
    enc = encode_prompts(tok, [it.chat() for it in items[:8]], "cpu")
    P = enc["input_ids"].shape[1]
    n_tok, t0 = 0, time.perf_counter()
    for b in range(len(out.texts)):
        pid = enc["input_ids"][b][enc["attention_mask"][b].bool()].tolist()
        gen = out.sequences[b, P:].tolist()
        score_trajectory(model, tok, mon, pid, gen)
        n_tok += len(pid) + len(gen)
    score_tps = n_tok / (time.perf_counter() - t0)
    return {
        "rows": rows,
        "score_trajectories_tokens_per_s": score_tps,
        "new_tokens": cfg.new_tokens,
        "repeats": cfg.repeats,
        "model": {"layers": model.config.num_hidden_layers, "hidden": model.config.hidden_size},
        "threads": torch.get_num_threads(),
    }


def format_table(res: dict[str, Any]) -> str:
    lines = [
        "| variant | batch | s (median) | x plain | forward passes | triggers | state bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['variant']} | {r['batch']} | {r['seconds']:.3f} | {r['ratio']:.3f} | "
            f"{r['n_forward']} | {r['triggers']} | {r['state_bytes']} |"
        )
    lines.append(f"\nscore-trajectories: {res['score_trajectories_tokens_per_s']:.0f} tokens/s")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Any) -> None:
    """Bar chart of the wall-clock ratios (extra ``plot``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError("the bench plot", "plot", package="monica-syco") from e
    fig, ax = plt.subplots(figsize=(7, 3))
    for i, B in enumerate(sorted({r["batch"] for r in res["rows"]})):
        rs = [r for r in res["rows"] if r["batch"] == B]
        xs = [j + 0.4 * i for j in range(len(rs))]
        ax.bar(xs, [r["ratio"] for r in rs], width=0.4, label=f"batch {B}")
        ax.set_xticks([j + 0.2 for j in range(len(rs))], [r["variant"] for r in rs], rotation=30)
    ax.axhline(1.15, ls="--", c="k", lw=0.8)
    ax.set_ylabel("wall-clock / plain")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
