"""Forget/retain items and loaders for TOFU, MUSE, WMDP (local files or the hub) and JSONL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from unlearn_leakk.errors import LeakDataError

#: Stop strings of MUSE knowmem/verbmem generations.
MUSE_STOP: tuple[str, ...] = ("\n\n", "\nQuestion", "Question:")
DATASETS: tuple[str, ...] = ("tofu", "muse-knowmem", "muse-verbmem", "wmdp-bio", "wmdp-cyber")


@dataclass(frozen=True)
class LeakItem:
    """One forget (or retain) query and its ground truth.

    ``choices``/``answer_index`` are set for multiple-choice items (WMDP); ``answer`` is then the
    correct choice's text. ``stop`` holds dataset stop strings; ``meta`` anything else.
    """

    id: str
    question: str
    answer: str
    split: str = "forget"
    choices: tuple[str, ...] | None = None
    answer_index: int | None = None
    stop: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate_items(items: Sequence[LeakItem], *, what: str = "items") -> list[LeakItem]:
    """Check non-empty question/answer and unique ids; returns the items as a list."""
    items = list(items)
    if not items:
        raise LeakDataError(f"no {what} given: pass at least one LeakItem")
    seen: set[str] = set()
    for i, it in enumerate(items):
        if not isinstance(it, LeakItem):
            raise LeakDataError(f"{what}[{i}] is {type(it).__name__}, expected LeakItem")
        if not isinstance(it.question, str) or not it.question.strip():
            raise LeakDataError(f"{what}[{i}] (id {it.id!r}) has an empty question")
        if not isinstance(it.answer, str) or not it.answer.strip():
            raise LeakDataError(
                f"{what}[{i}] (id {it.id!r}) has an empty answer; leak needs a ground truth"
            )
        if it.id in seen:
            raise LeakDataError(f"duplicate item id {it.id!r} in {what}: ids must be unique")
        if it.choices is not None and (
            it.answer_index is None or not 0 <= it.answer_index < len(it.choices)
        ):
            raise LeakDataError(
                f"{what}[{i}] (id {it.id!r}): answer_index={it.answer_index!r} is not a valid "
                f"index into {len(it.choices)} choices"
            )
        seen.add(it.id)
    return items


def _rows_from(source: str | Path, config: str | None, split: str) -> list[dict[str, Any]]:
    """Rows from a local JSONL/JSON/parquet file or directory, else the Hugging Face hub."""
    from llmcore.data import read_jsonl

    p = Path(source)
    if p.is_file():
        if p.suffix == ".parquet":
            import pandas as pd

            return pd.read_parquet(p).to_dict("records")
        if p.suffix == ".json":
            import json

            text = p.read_text()
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                return read_jsonl(p)
            return obj if isinstance(obj, list) else obj.get("data", [obj])
        return read_jsonl(p)
    if p.is_dir():
        stems = [split, f"{config}_{split}" if config else split, config or split]
        for stem in stems:
            for ext in (".jsonl", ".json", ".parquet"):
                for cand in (p / f"{stem}{ext}", p / (config or "") / f"{stem}{ext}"):
                    if cand.is_file():
                        return _rows_from(cand, config, split)
        raise LeakDataError(
            f"no file for config={config!r} split={split!r} under {p}; expected e.g. "
            f"{p / (split + '.jsonl')}"
        )
    try:
        import datasets

        ds = datasets.load_dataset(str(source), config, split=split)
    except Exception as exc:
        raise LeakDataError(
            f"cannot load {source!r} (config {config!r}, split {split!r}) from the hub: "
            f"{type(exc).__name__}: {str(exc)[:200]}. Download it and pass a local path."
        ) from exc
    return [dict(r) for r in ds]


def _items(
    rows: Iterable[dict[str, Any]],
    qkey: str,
    akey: str,
    *,
    prefix: str,
    split: str,
    stop: tuple[str, ...] = (),
    id_key: str | None = None,
) -> list[LeakItem]:
    out = []
    for i, r in enumerate(rows):
        for key in (qkey, akey):
            if key not in r:
                raise LeakDataError(
                    f"row {i} of {prefix} has no field {key!r}; fields: {sorted(r)}. Pass the "
                    "right question/answer key"
                )
        rid = str(r[id_key]) if id_key and id_key in r else f"{prefix}-{i}"
        out.append(LeakItem(rid, str(r[qkey]), str(r[akey]), split=split, stop=stop))
    return validate_items(out, what=prefix)


def load_tofu(
    split: str = "forget10",
    question_key: str = "paraphrased_question",
    *,
    source: str | Path = "locuslab/TOFU",
) -> list[LeakItem]:
    """TOFU items. Forget splits read config ``{split}_perturbed`` (which has
    ``paraphrased_question``); ``question_key="question"`` reads plain ``{split}``."""
    valid = (
        "forget01",
        "forget05",
        "forget10",
        "retain90",
        "retain95",
        "retain99",
        "holdout01",
        "holdout05",
        "holdout10",
        "full",
    )
    if split not in valid:
        raise LeakDataError(f"unknown TOFU split {split!r}; valid: {', '.join(valid)}")
    config = f"{split}_perturbed" if question_key == "paraphrased_question" else split
    if question_key not in ("question", "paraphrased_question"):
        raise LeakDataError(
            f"unknown TOFU question_key {question_key!r}; use 'question' or 'paraphrased_question'"
        )
    rows = _rows_from(source, config, "train")
    kind = "forget" if split.startswith("forget") else "retain"
    return _items(rows, question_key, "answer", prefix=f"tofu-{split}", split=kind)


def load_muse(
    corpus: str = "News", kind: str = "knowmem", *, source: str | Path | None = None
) -> list[LeakItem]:
    """MUSE forget items: ``knowmem`` (forget_qa, question/answer) or ``verbmem`` (forget,
    prompt/gt), with the MUSE stop strings."""
    if corpus not in ("News", "Books"):
        raise LeakDataError(f"unknown MUSE corpus {corpus!r}; use 'News' or 'Books'")
    if kind == "knowmem":
        split, q, a = "forget_qa", "question", "answer"
    elif kind == "verbmem":
        split, q, a = "forget", "prompt", "gt"
    else:
        raise LeakDataError(f"unknown MUSE kind {kind!r}; use 'knowmem' or 'verbmem'")
    rows = _rows_from(source or f"muse-bench/MUSE-{corpus}", kind, split)
    return _items(
        rows, q, a, prefix=f"muse-{corpus.lower()}-{kind}", split="forget", stop=MUSE_STOP
    )


def load_wmdp(subset: str = "bio", *, source: str | Path = "cais/wmdp") -> list[LeakItem]:
    """WMDP multiple-choice items (fields question, choices, answer index)."""
    if subset not in ("bio", "cyber", "chem"):
        raise LeakDataError(f"unknown WMDP subset {subset!r}; use 'bio', 'cyber' or 'chem'")
    rows = _rows_from(source, f"wmdp-{subset}", "test")
    out = []
    for i, r in enumerate(rows):
        if not {"question", "choices", "answer"} <= set(r):
            raise LeakDataError(f"WMDP row {i} needs question, choices, answer; it has {sorted(r)}")
        choices = tuple(str(c) for c in r["choices"])
        idx = int(r["answer"])
        if not 0 <= idx < len(choices):
            raise LeakDataError(f"WMDP row {i}: answer index {idx} outside {len(choices)} choices")
        out.append(
            LeakItem(
                f"wmdp-{subset}-{i}",
                str(r["question"]),
                choices[idx],
                choices=choices,
                answer_index=idx,
            )
        )
    return validate_items(out, what=f"wmdp-{subset}")


def load_jsonl(
    path: str | Path,
    question_key: str = "question",
    answer_key: str = "answer",
    *,
    id_key: str = "id",
    split: str = "forget",
) -> list[LeakItem]:
    """Items from a local JSONL file (one object per line)."""
    from llmcore.data import read_jsonl

    p = Path(path)
    if not p.is_file():
        raise LeakDataError(f"no such JSONL file: {p}")
    return _items(
        read_jsonl(p), question_key, answer_key, prefix=p.stem, split=split, id_key=id_key
    )


def load_dataset_items(
    data: str,
    *,
    split: str = "forget10",
    question_key: str = "paraphrased_question",
    source: str | None = None,
) -> list[LeakItem]:
    """CLI dispatch: ``tofu``, ``muse-knowmem``, ``muse-verbmem``, ``wmdp-bio``,
    ``wmdp-cyber`` or ``jsonl:PATH``."""
    if data.startswith("jsonl:"):
        qk = "question" if question_key == "paraphrased_question" else question_key
        return load_jsonl(data[6:], qk)
    if data == "tofu":
        return load_tofu(split, question_key, source=source or "locuslab/TOFU")
    if data in ("muse-knowmem", "muse-verbmem"):
        corpus = split if split in ("News", "Books") else "News"
        return load_muse(corpus, data.split("-")[1], source=source)
    if data in ("wmdp-bio", "wmdp-cyber"):
        return load_wmdp(data.split("-")[1], source=source or "cais/wmdp")
    raise LeakDataError(f"unknown dataset {data!r}; valid: {', '.join(DATASETS)}, jsonl:PATH")
