"""``selfverify-rl bench``: every mode from one warm-up at equal steps, on CPU.

Per mode: wall time per round by phase (candidate sampling, verification rounds, generation
rounds), rollouts/s, tokens/s, overhead against ``gen`` beside the theoretical
``1 + (looplen / k) * (c_ver / c_gen)`` (Sec. 7 of the method), peak memory, final metrics, and
verification-guided vs plain majority@8. Writes ``bench.json``, ``bench.md`` and (with
matplotlib) ``asymmetry.png``.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

BENCH_MODES: tuple[tuple[str, str, int], ...] = (
    ("gen", "gen", 5),
    ("verify", "verify", 5),
    ("alternate-i5", "alternate", 5),
    ("alternate-i2", "alternate", 2),
    ("stagewise", "stagewise", 5),
    ("mixed", "mixed", 5),
)


def run_bench(
    out: str | Path, *, steps: int = 20, plot: bool = True, n_eval: int = 200
) -> dict[str, Any]:
    """Run every mode for ``steps`` steps from the warm-up fixture (all training prompts, no
    prefilter, 8 prompts x 8 generations) and write the reports; metrics on ``n_eval``
    problems and ``n_eval`` Yes plus ``n_eval`` No fixed candidates, majority@8 on up to 64
    problems."""
    import torch

    from selfverify_rl.evaluate import (
        generation_accuracy,
        guided_majority_vote,
        verification_metrics,
    )
    from selfverify_rl.experiments import ARMS, build_evalset, build_warmup, load_evalset, train_arm

    torch.set_num_threads(1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    warm = build_warmup()
    problems, samples = load_evalset(build_evalset())
    problems = problems[:n_eval]
    # a balanced slice: the stored candidates are all Yes first, then all No
    samples = [s for s in samples if s.label == "Yes"][:n_eval] + [
        s for s in samples if s.label == "No"
    ][:n_eval]
    rows: dict[str, dict[str, Any]] = {}
    # one untimed step first, so trl/accelerate's first-trainer setup is not billed to ``gen``
    train_arm(*warm.load(), replace(ARMS["gen"], steps=1, prefilter=0))
    for name, mode, interval in BENCH_MODES:
        model, tok = warm.load()
        arm = replace(
            ARMS["gen"], mode=mode, steps=steps, verification_interval=interval, prefilter=0
        )
        t0 = time.perf_counter()
        trainer = train_arm(model, tok, arm)
        wall = time.perf_counter() - t0
        kinds = [k for _, k, _ in trainer.round_log]
        n_rollouts = len(kinds) * arm.prompts_per_step * arm.num_generations
        ph = dict(trainer.phase_seconds)
        n_ver = max(sum(k == "verify" for k in kinds), 1)
        n_gen = max(sum(k in ("gen", "mixed") for k in kinds), 1)
        m = trainer.model.eval()
        g = generation_accuracy(m, tok, problems)
        v = verification_metrics(m, tok, samples)
        vote = guided_majority_vote(m, tok, problems[: min(64, n_eval)], k=8, m=1)
        rows[name] = {
            "mode": mode, "interval": interval, "steps": steps, "wall_s": round(wall, 2),
            "s_per_round": round(wall / steps, 3),
            "gen_round_s": round(ph.get("gen_round", 0.0) / n_gen, 3),
            "verify_round_s": round(ph.get("verify_round", 0.0) / n_ver, 3),
            "sample_candidates_s": round(ph.get("sample_candidates", 0.0) / n_ver, 3),
            "verification_rounds": sum(k == "verify" for k in kinds),
            "rollouts_per_s": round(n_rollouts / wall, 1),
            "tokens_per_s": round(trainer.state.num_input_tokens_seen / wall, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "gen_acc": round(g["acc"], 3), "ver_acc": round(v["acc"], 3),
            "ver_balanced_acc": round(v["balanced_acc"], 3),
            "guided_maj8": vote["guided_acc"], "plain_maj8": vote["plain_acc"],
        }  # fmt: skip
    base = rows["gen"]["wall_s"]
    c_ratio = rows["verify"]["verify_round_s"] / max(rows["gen"]["gen_round_s"], 1e-9)
    for r in rows.values():
        r["overhead_vs_gen"] = round(r["wall_s"] / base, 3)
        if r["mode"] == "alternate":
            r["overhead_theory"] = round(1 + (1 / r["interval"]) * c_ratio, 3)
    (out / "bench.json").write_text(json.dumps(rows, indent=1))
    cols = ["wall_s", "s_per_round", "gen_round_s", "verify_round_s", "sample_candidates_s",
            "rollouts_per_s", "tokens_per_s", "overhead_vs_gen", "overhead_theory", "gen_acc",
            "ver_acc", "guided_maj8", "plain_maj8", "peak_rss_mb"]  # fmt: skip
    lines = ["| mode | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, r in rows.items():
        lines.append(f"| {name} | " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    table = "\n".join(lines)
    (out / "bench.md").write_text(table + "\n")
    print(table)
    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib missing (pip install 'selfverify-rl[plot]'); no plot")
        else:
            fig, ax = plt.subplots(figsize=(4, 4))
            for name, r in rows.items():
                ax.scatter(r["gen_acc"], r["ver_acc"])
                ax.annotate(name, (r["gen_acc"], r["ver_acc"]), fontsize=7)
            ax.set_xlabel("generation accuracy")
            ax.set_ylabel("verification accuracy (fixed set)")
            fig.tight_layout()
            fig.savefig(out / "asymmetry.png", dpi=120)
    return rows
