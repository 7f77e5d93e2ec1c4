"""Asymmetry curves: generation accuracy and self-verification accuracy per checkpoint of a run."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

__all__ = ["asymmetry", "write_csv"]


def asymmetry(
    run_dir: str | Path,
    *,
    data: str | Path,
    every: int = 25,
    limit: int = 500,
    style: str = "plain",
) -> list[dict[str, Any]]:
    """One row per ``checkpoint-N`` folder of ``run_dir`` (every ``every`` steps, plus the
    final model in ``run_dir`` itself; LoRA adapter folders load on their base model): step, greedy generation accuracy on ``data``'s test split
    and balanced accuracy on a self-verification set sampled from that checkpoint."""
    from llmcore.data import read_jsonl
    from selfverify_rl.evaluate import (
        generation_accuracy,
        self_verification_set,
        verification_metrics,
    )
    from selfverify_rl.lora import is_adapter_dir, load_policy

    run = Path(run_dir)
    ckpts = []
    for p in run.glob("checkpoint-*"):
        m = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if m and int(m.group(1)) % every == 0:
            ckpts.append((int(m.group(1)), p))
    if (run / "config.json").exists() or is_adapter_dir(run):
        ckpts.append((10**9, run))
    test = list(read_jsonl(Path(data) / "test.jsonl"))[:limit]
    rows = []
    for step, path in sorted(ckpts):
        model, tok = load_policy(str(path))
        g = generation_accuracy(model, tok, test, style=style)  # type: ignore[arg-type]
        samples = self_verification_set(model, tok, test, n=8, style=style)  # type: ignore[arg-type]
        v = verification_metrics(model, tok, samples) if samples else {}
        rows.append({"step": step if step < 10**9 else "final", "gen_acc": g["acc"],
                     "self_ver_balanced_acc": v.get("balanced_acc", float("nan")),
                     "self_ver_n": len(samples)})  # fmt: skip
    return rows


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write asymmetry rows as CSV."""
    path = Path(path)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["step"])
        w.writeheader()
        w.writerows(rows)
    return path
