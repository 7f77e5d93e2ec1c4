"""Input rows, scores files and their metadata (``scores.meta.json``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ptdi.errors import PTDIInputError
from ptdi.scoring import ORIENTATION

ROLES = ("calibration", "test")


def meta_path(scores_path: str | Path) -> Path:
    """``scores.jsonl`` -> ``scores.meta.json``."""
    p = Path(scores_path)
    return p.with_suffix(".meta.json")


def load_rows(data: str, text_key: str = "text", split: str | None = None) -> list[dict[str, Any]]:
    """Rows ``{id, text, role, label}`` from a JSONL file or a Hugging Face dataset (WikiMIA
    columns ``input``/``label``; role left empty)."""
    p = Path(data)
    if p.exists():
        from llmcore.data import read_jsonl

        raw = read_jsonl(p)
    else:
        try:
            import datasets
        except ImportError as exc:  # pragma: no cover - declared dependency
            raise PTDIInputError("loading a hub dataset needs the 'datasets' package") from exc
        from llmcore.data import from_dataset

        raw = from_dataset(datasets.load_dataset(data, split=split))
    rows = []
    for i, r in enumerate(raw):
        text = r.get(text_key, r.get("input"))
        if not isinstance(text, str):
            raise PTDIInputError(f"row {i} of {data} has no text field {text_key!r} (or 'input')")
        rows.append(
            {"id": r.get("id", i), "text": text, "role": r.get("role"), "label": r.get("label")}
        )
    validate_rows(rows)
    return rows


def validate_rows(rows: Sequence[dict[str, Any]]) -> None:
    """Labels in {0, 1, null}; unique ids; roles known; calibration rows are not labelled
    members; no text in both calibration and test (exact hash)."""
    seen: set[Any] = set()
    for r in rows:
        if r["label"] not in (0, 1, None) or isinstance(r["label"], bool):
            raise PTDIInputError(f"row {r['id']!r}: label must be 0, 1 or null, got {r['label']!r}")
        if r["role"] not in (*ROLES, None):
            raise PTDIInputError(f"row {r['id']!r}: role must be one of {ROLES}, got {r['role']!r}")
        if r["id"] in seen:
            raise PTDIInputError(f"duplicate id {r['id']!r}: ids must be unique")
        seen.add(r["id"])
    bad = [r["id"] for r in rows if r["role"] == "calibration" and r["label"] == 1]
    if bad:
        raise PTDIInputError(
            f"calibration rows labelled 1 (member): {bad[:10]}; calibration must hold known "
            "non-members only"
        )
    if "text" in (rows[0] if rows else {}):
        cal = {hashlib.sha256(r["text"].encode()).hexdigest(): r["id"] for r in rows
               if r["role"] == "calibration"}  # fmt: skip
        shared = [
            (cal[h], r["id"])
            for r in rows
            if r["role"] == "test" and (h := hashlib.sha256(r["text"].encode()).hexdigest()) in cal
        ]
        if shared:
            raise PTDIInputError(
                f"identical text in calibration and test (calibration id, test id): {shared[:10]}; "
                "remove the duplicates"
            )


def write_scores(
    out: str | Path, rows: Sequence[dict[str, Any]], scores: dict[str, np.ndarray], meta: dict
) -> Path:
    """Scores JSONL ``{id, role, label, <score>: float}`` and its metadata file."""
    from llmcore.data import atomic_write_json, write_jsonl

    names = list(scores)
    write_jsonl(
        out,
        (
            {"id": r["id"], "role": r["role"], "label": r["label"],
             **{s: float(scores[s][i]) for s in names}}
            for i, r in enumerate(rows)
        ),
    )  # fmt: skip
    full = {**meta, "scores": names, "orientation": {s: ORIENTATION for s in names}}
    mp = meta_path(out)
    atomic_write_json(mp, full)
    return mp


def read_scores(path: str | Path, score: str) -> tuple[list[dict[str, Any]], np.ndarray, dict]:
    """Rows, the member-oriented values of ``score`` and the metadata. The orientation must be
    recorded in the metadata: it is never guessed."""
    from llmcore.data import read_jsonl

    mp = meta_path(path)
    if not mp.exists():
        raise PTDIInputError(
            f"no metadata file {mp} next to {path}: the score orientation is unknown; write "
            'scores with `ptdi score` or add {"orientation": {"<score>": "higher_is_member"}}'
        )
    meta = json.loads(mp.read_text())
    orient = (meta.get("orientation") or {}).get(score)
    if orient not in ("higher_is_member", "lower_is_member"):
        raise PTDIInputError(
            f"{mp} records no orientation for score {score!r} (got {orient!r}); set it to "
            "'higher_is_member' or 'lower_is_member'"
        )
    rows = read_jsonl(path)
    if not rows:
        raise PTDIInputError(f"{path} holds no rows")
    missing = [r.get("id") for r in rows if score not in r]
    if missing:
        have = sorted(k for k in rows[0] if k not in ("id", "role", "label"))
        raise PTDIInputError(f"score column {score!r} missing for ids {missing[:10]}; have {have}")
    for r in rows:
        r.setdefault("role", None)
        r.setdefault("label", None)
    validate_rows(rows)
    vals = np.array([np.nan if r[score] is None else r[score] for r in rows], dtype=float)
    bad = [rows[i]["id"] for i in np.flatnonzero(~np.isfinite(vals))]
    if bad:
        raise PTDIInputError(f"NaN or infinite {score!r} scores for ids {bad[:20]}")
    if orient == "lower_is_member":
        vals = -vals
    return rows, vals, meta
