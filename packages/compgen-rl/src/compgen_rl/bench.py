"""``compgen-rl bench``: every arm on the routing-context CPU setting, one table, JSON and plot.

Arms: SFT-only, SFT->RL (GRPO, compound RL data), SFT->RFT (same sample budget), and the RL-data
ablations ``rl_atomic`` and ``rl_overlap``. Reported per arm: accuracy per split and depth,
step accuracy, atomic recovery, gain over SFT; for GRPO the step time split into generation,
reward and update, the rollout share and completion tokens/s; data generation and reward
throughput.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

ARMS = ("sft", "sft_rl", "sft_rft", "rl_atomic", "rl_overlap")


def throughput(n: int = 20_000) -> dict[str, float]:
    """Data generation (examples/s, pure-Python executor) and reward (completions/s)."""
    from compgen_rl.data import SplitConfig, build_rows
    from compgen_rl.rewards import exact_match_reward

    cfg = SplitConfig.routing_context_cpu(n_sft=n, n_rl=0, n_test=0, n_ood=0, n_probe=0)
    build_rows(cfg)  # warm: signatures
    t0 = time.perf_counter()
    rows, _ = build_rows(cfg)
    data_s = time.perf_counter() - t0
    comps = [r["completion"] for r in rows["sft"]] * 5
    answers = [r["answer"] for r in rows["sft"]] * 5
    t0 = time.perf_counter()
    exact_match_reward(comps, answers)
    rew_s = time.perf_counter() - t0
    return {"data_examples_per_s": n / data_s, "reward_completions_per_s": len(comps) / rew_s}


def run_bench(
    out: str | Path = "compgen-bench", arms: tuple[str, ...] = ARMS, plot: bool = True
) -> dict[str, Any]:
    """Run the arms, print the table, write ``out/bench.json`` (and ``out/accuracy_vs_depth.png``)."""
    from compgen_rl.evaluate import atomic_recovery
    from compgen_rl.tiny import CLAIM_GRPO, build_sft, claim_split, split_rows
    from compgen_rl.train import ProtocolConfig, run_protocol
    from llmcore.cli import print_table
    from llmcore.data import atomic_write_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rep = run_protocol(
        ProtocolConfig(arms=tuple(arms), grpo=dict(CLAIM_GRPO), out=str(out / "protocol.json"))
    )
    rows, _ = split_rows(claim_split())
    table = []
    for arm, m in rep["arms"].items():
        row = {"arm": arm}
        for s in ("test_seen", "test_unseen", "test_ood", "probe_atomic"):
            row[s.replace("test_", "acc_")] = round(m[s]["acc"], 3)
        row["step_unseen"] = round(m["test_unseen"]["step_acc"], 3)
        row["gain_unseen"] = round(m.get("gain", {}).get("test_unseen", 0.0), 3)
        table.append(row)
    print_table(table)
    timing = []
    for arm, st in rep["train"].items():
        if isinstance(st, dict) and "rollout_share" in st:
            steps = max(st["steps"], 1)
            tokens = st["completions"] * (st.get("mean_completion_tokens") or 0.0)
            timing.append(
                {
                    "arm": arm,
                    "s/step": round(st["seconds"] / steps, 3),
                    "gen s/step": round(st["seconds_generation"] / steps, 3),
                    "reward s/step": round(st["seconds_reward"] / steps, 4),
                    "update s/step": round(st["seconds_update"] / steps, 3),
                    "rollout share": round(st["rollout_share"], 3),
                    "completion tok/s": round(tokens / max(st["seconds_generation"], 1e-9), 1),
                }
            )
    if timing:
        print_table(timing)
    thr = throughput()
    print_table([{k: round(v) for k, v in thr.items()}])
    sft_model, sft_tok = build_sft().load()
    rec = atomic_recovery(sft_model, sft_tok, rows["probe_atomic"])
    result = {
        "table": table,
        "timing": timing,
        "throughput": thr,
        "sft_atomic_recovery": rec,
        "report": rep,
        "seconds": time.perf_counter() - t0,
    }
    atomic_write_json(out / "bench.json", json.loads(json.dumps(result, default=str)))
    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed (pip install 'compgen-rl[plot]'); no plot written")
        else:
            fig, ax = plt.subplots(figsize=(5, 3.5))
            for arm, m in rep["arms"].items():
                xs = [1, 2, 3]
                ys = [m["probe_atomic"]["acc"], m["test_unseen"]["acc"], m["test_ood"]["acc"]]
                ax.plot(xs, ys, marker="o", label=arm)
            ax.set_xticks([1, 2, 3], ["1 (atomic)", "2 (unseen)", "3 (OOD)"])
            ax.set_xlabel("composition depth")
            ax.set_ylabel("greedy exact match")
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(out / "accuracy_vs_depth.png", dpi=120)
            plt.close(fig)
    return result
