"""Export QA pairs: dedup, 90/10 split per scene type, ``datasets.Dataset`` and verl parquet.

Follows the paper's export (Sec. 3.4): records keep the text, answer, kind, simulation mapping
and symbol mapping; verl rows use ``data_source`` ``math_p_numeric`` / ``math_p_reverse`` /
``math_p_symbolic`` with rule-based ground truth, written through
``llmcore.rl.write_verl_parquet``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sim2reason.errors import QAError
from sim2reason.qa import QAPair, evaluate_solution

__all__ = [
    "INSTRUCTION",
    "check_exportable",
    "prompt_text",
    "read_jsonl_qas",
    "read_verl_parquet",
    "split_train_test",
    "to_dataset",
    "write_jsonl_qas",
    "write_verl_parquet",
]

INSTRUCTION = {
    "numeric": " Reason step by step and put the final answer, a number in SI units, in \\boxed{}.",
    "reverse": " Reason step by step and put the final answer, a number in SI units, in \\boxed{}.",
    "symbolic": " Reason step by step and put the final answer, a LaTeX expression, in \\boxed{}.",
}


def check_exportable(qa: QAPair) -> None:
    """Refuse non-finite answers and symbolic questions whose mapping cannot evaluate them."""
    if not isinstance(qa.answer, int | float) or not math.isfinite(qa.answer):
        raise QAError(f"question {qa.text[-60:]!r}: answer {qa.answer!r} is not finite")
    if qa.kind == "symbolic":
        if not qa.given_variable_mapping:
            raise QAError(
                f"symbolic question {qa.text[-60:]!r} has no given_variable_mapping; "
                "symbolic answers are checked by substituting it"
            )
        if qa.solution:
            evaluate_solution(qa.solution, qa.given_variable_mapping)  # raises on a gap


def prompt_text(qa: QAPair, instruction: bool = True) -> str:
    return qa.text + (INSTRUCTION.get(qa.kind, "") if instruction else "")


def to_dataset(qas: Sequence[QAPair], instruction: bool = True, style: str = "chat") -> Any:
    """A ``datasets.Dataset`` with columns ``prompt, answer, kind, given_variable_mapping,
    scene_type`` (mapping as JSON text); ``style="chat"`` makes ``prompt`` a user message list."""
    from datasets import Dataset

    if style not in ("chat", "plain"):
        raise QAError(f"style={style!r}: use 'chat' or 'plain'")
    rows = []
    for qa in qas:
        check_exportable(qa)
        text = prompt_text(qa, instruction)
        rows.append({
            "prompt": [{"role": "user", "content": text}] if style == "chat" else text,
            "answer": float(qa.answer),
            "kind": qa.kind,
            "given_variable_mapping": json.dumps(qa.given_variable_mapping),
            "scene_type": qa.scene_type,
        })  # fmt: skip
    return Dataset.from_list(rows)


def split_train_test(qas: Sequence[QAPair], train_fraction: float = 0.9, seed: int = 0
                     ) -> tuple[list[QAPair], list[QAPair]]:  # fmt: skip
    """Shuffle and split each scene type ``train_fraction`` / rest (the paper's 90/10)."""
    if not 0.0 < train_fraction <= 1.0:
        raise QAError(f"train_fraction={train_fraction!r}: must be in (0, 1]")
    by_type: dict[str, list[QAPair]] = {}
    for qa in qas:
        by_type.setdefault(qa.scene_type, []).append(qa)
    rng = random.Random(seed)
    train, test = [], []
    for key in sorted(by_type):
        items = by_type[key][:]
        rng.shuffle(items)
        cut = round(len(items) * train_fraction)
        train += items[:cut]
        test += items[cut:]
    return train, test


def write_verl_parquet(qas: Sequence[QAPair], path: str | Path, *, split: str = "train",
                       instruction: bool = True) -> Path:  # fmt: skip
    """verl RL rows (one file; ``data_source`` per row kind) via ``llmcore.rl``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from llmcore.rl import write_verl_parquet as _write

    rows = []
    for qa in qas:
        check_exportable(qa)
        rows.append({"prompt": prompt_text(qa, instruction), "answer": repr(float(qa.answer)),
                     "kind": qa.kind,
                     "extra_info": {"given_variable_mapping": json.dumps(qa.given_variable_mapping),
                                    "scene_type": qa.scene_type, "kind": qa.kind,
                                    "simulation_mapping": json.dumps(qa.simulation_mapping),
                                    "reference": qa.reference}})  # fmt: skip
    if not rows:
        raise QAError("no QA pairs to export")
    path = Path(path)
    # One data_source per kind: write per kind, then concatenate into the one file.
    tables = []
    for kind in sorted({r["kind"] for r in rows}):
        part = [r for r in rows if r["kind"] == kind]
        tmp = _write(part, path.with_suffix(f".{kind}.tmp.parquet"), data_source=f"math_p_{kind}",
                     split=split)  # fmt: skip
        t = pq.read_table(tmp)
        tmp.unlink()
        tables.append(t.append_column("scene_type", pa.array([r["extra_info"]["scene_type"]
                                                              for r in part])))  # fmt: skip
    table = pa.concat_tables(tables)
    idx = pa.array(range(table.num_rows))
    extra = table.column("extra_info").combine_chunks()
    fields = {f.name: extra.field(f.name) for f in extra.type}
    fields["index"] = idx
    table = table.set_column(table.schema.get_field_index("extra_info"), "extra_info",
                             pa.StructArray.from_arrays(list(fields.values()), list(fields)))  # fmt: skip
    pq.write_table(table, path)
    return path


def read_verl_parquet(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a verl parquet file as dicts (``prompt`` text, ``answer``, ``kind``, mapping)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise QAError(f"parquet file {str(path)!r} does not exist")
    out = []
    for r in pq.read_table(path).to_pylist():
        extra = r.get("extra_info") or {}
        prompt = r["prompt"]
        out.append({
            "prompt": prompt[-1]["content"] if isinstance(prompt, list) else prompt,
            "answer": float(r["reward_model"]["ground_truth"]),
            "kind": extra.get("kind", str(r.get("data_source", "")).replace("math_p_", "")),
            "given_variable_mapping": extra.get("given_variable_mapping", "{}"),
            "scene_type": r.get("scene_type") or extra.get("scene_type", ""),
            "data_source": r.get("data_source", ""),
        })  # fmt: skip
    return out


def write_jsonl_qas(qas: Iterable[QAPair], path: str | Path) -> Path:
    from llmcore.data import write_jsonl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(path, [qa.to_dict() for qa in qas])
    return path


def read_jsonl_qas(path: str | Path) -> list[QAPair]:
    from llmcore.data import read_jsonl

    return [QAPair.from_dict(r) for r in read_jsonl(path)]
