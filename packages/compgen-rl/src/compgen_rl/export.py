"""verl export in the prior work's row format (``codeio``-style ground truth) via llmcore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compgen_rl.data import load_splits


def verl_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the prior work's ground-truth JSON (ref_input, ref_output, ref_code, funcname)
    and ``extra_info.depth``."""
    out = []
    for r in rows:
        truth = {
            "ref_input": {"x": r["input"]},
            "ref_output": r["answer"],
            "ref_code": r["program"],
            "funcname": "main_solution",
        }
        out.append(
            {
                "prompt": r["prompt"],
                "answer": json.dumps(truth, sort_keys=True),
                "extra_info": {"depth": int(r["depth"]), "signature": r["signature"]},
            }
        )
    return out


def export_verl(
    data_dir: str | Path,
    out_dir: str | Path,
    splits: tuple[str, ...] = ("rl", "test_unseen", "test_ood"),
) -> list[Path]:
    """Write ``out_dir/{split}.parquet`` for verl with ``llmcore.rl.write_verl_parquet``;
    ``data_source`` is ``codeio-forward-incomplete-depth{d}`` of the split's deepest row."""
    from llmcore.rl import write_verl_parquet

    data = load_splits(data_dir, splits)
    paths = []
    for s in splits:
        rows = data[s]
        if not rows:
            continue
        depth = max(int(r["depth"]) for r in rows)
        paths.append(
            write_verl_parquet(
                verl_rows(rows),
                Path(out_dir) / f"{s}.parquet",
                data_source=f"codeio-forward-incomplete-depth{depth}",
                ability="reasoning",
                split=s,
            )
        )
    return paths
