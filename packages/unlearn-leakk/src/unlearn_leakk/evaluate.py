"""Generation files in the official layout, judging, and leak@k reports."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unlearn_leakk.config import K_DEFAULT, DecodingConfig
from unlearn_leakk.data import LeakItem, validate_items
from unlearn_leakk.errors import LeakConfigError, LeakDataError

if TYPE_CHECKING:
    import pandas as pd

    from unlearn_leakk.judges import LeakJudge

log = logging.getLogger(__name__)

#: Per-response judge fields of the official files (exact_match, rougeL_recall, ES, CS, ...).
JUDGE_FIELDS = {
    "exact": "exact_match",
    "rouge": "rougeL_recall",
    "es": "ES",
    "cs": "CS",
    "llm": "LLM_judge",
    "mcq": "mcq",
}


def generations_path(out_dir: str | Path, label: str, decoding: DecodingConfig) -> Path:
    """``{out}/{label}/forget/temperature={T}top_p={p}/generations_n{n}.json``."""
    return Path(out_dir) / label / "forget" / decoding.tag / f"generations_n{decoding.n}.json"


def _decoding_dict(d: DecodingConfig) -> dict[str, Any]:
    return {
        "temperature": d.temperature,
        "top_p": d.top_p,
        "top_k": d.top_k,
        "n": d.n,
        "max_new_tokens": d.max_new_tokens,
        "seed": d.seed,
    }


def generate_file(
    model: Any,
    tokenizer: Any,
    items: Sequence[LeakItem],
    decoding: DecodingConfig,
    path: str | Path,
    *,
    backend: Any = "hf",
    chat_template: bool = True,
    system_prompt: str | None = None,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Sample every item into a resumable JSONL file (one official row per item, plus ``id``
    and ``decoding``); items already in the file are skipped (same seeds, same output)."""
    from tqdm.auto import tqdm

    from llmcore.data import ResultsWriter
    from unlearn_leakk.judges import ExactPhraseJudge, RougeRecallJudge
    from unlearn_leakk.sampling import SYSTEM_PROMPT, render_prompts, sample_responses

    items = validate_items(items)
    sp = SYSTEM_PROMPT if system_prompt is None else system_prompt
    if isinstance(backend, str) and backend == "hf" and not hasattr(model, "generate"):
        from llmcore.models import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(model)
    if isinstance(backend, str) and backend == "hf":
        from llmcore.generation import HFBackend

        backend = HFBackend(model, tokenizer, batch_size=1, progress=False)
        tokenizer = backend.tokenizer
    elif isinstance(backend, str) and backend == "vllm":
        # one engine for the whole file (sample_responses would build one per call)
        from llmcore.generation import get_backend
        from llmcore.models import load_tokenizer

        if not isinstance(model, str | Path):
            raise LeakConfigError("the vllm backend needs a model id or path, not an object")
        tokenizer = tokenizer or load_tokenizer(model)
        backend = get_backend("vllm", str(model))
    writer = ResultsWriter(path, id_key="id")
    rouge, exact = RougeRecallJudge(), ExactPhraseJudge()
    prompts = render_prompts(tokenizer, items, chat_template=chat_template, system_prompt=sp)
    for i, item in enumerate(tqdm(items, desc=f"generate {decoding.tag}", disable=not progress)):
        if writer.is_done(item.id):
            continue
        responses = sample_responses(
            model,
            tokenizer,
            [item],
            decoding,
            backend=backend,
            chat_template=chat_template,
            system_prompt=sp,
            offset=i,
        )[0]
        ref = item.answer if item.choices is None else chr(65 + int(item.answer_index or 0))
        rl = rouge(responses, item.answer)
        ex = exact(responses, ref) if item.choices is None else [0.0] * len(responses)
        best = max(range(len(responses)), key=lambda j: rl[j])
        writer.write(
            {
                "id": item.id,
                "prompt": prompts[i],
                "question": item.question,
                "ground_truth": item.answer,
                "choices": list(item.choices) if item.choices else None,
                "answer_index": item.answer_index,
                "responses": [
                    {"response": r, "rougeL_recall": a, "exact_match": b}
                    for r, a, b in zip(responses, rl, ex, strict=True)
                ],
                "best_answer": responses[best],
                "decoding": _decoding_dict(decoding),
            }
        )
    writer.close()
    return read_generations(path)


def read_generations(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a generations / evaluated file (JSONL), validated."""
    from llmcore.data import read_jsonl

    p = Path(path)
    if not p.is_file():
        raise LeakDataError(f"no such generations file: {p}")
    rows = read_jsonl(p)
    for i, r in enumerate(rows):
        if "responses" not in r or "ground_truth" not in r:
            raise LeakDataError(
                f"{p}:{i + 1} is not a generations row (needs 'responses' and 'ground_truth')"
            )
    if not rows:
        raise LeakDataError(f"{p} has no rows")
    return rows


def judge_rows(rows: list[dict[str, Any]], judges: dict[str, LeakJudge]) -> list[dict[str, Any]]:
    """Add each judge's per-response field (and Best/Avg per query) to generation rows."""
    for name, judge in judges.items():
        fld = JUDGE_FIELDS.get(name, name)
        for r in rows:
            resp = [x["response"] for x in r["responses"]]
            ref = r["ground_truth"]
            if name == "mcq":
                ref = chr(65 + int(r.get("answer_index") or 0))
            scores = judge(resp, ref, r.get("question"))
            for x, s in zip(r["responses"], scores, strict=True):
                x[fld] = s
            if fld in ("ES", "CS"):
                r[f"Best {fld}"] = max(scores) if scores else 0.0
                r[f"Avg {fld}"] = sum(scores) / len(scores) if scores else 0.0
    return rows


def leak_curve_from_rows(
    rows: list[dict[str, Any]],
    field_name: str,
    ks: Iterable[int] = K_DEFAULT,
    *,
    binary: bool | None = None,
    threshold: float = 0.5,
) -> tuple[dict[int, float], dict[str, int]]:
    """leak@k over the rows for a judge field. Binary fields: unbiased estimator on counts;
    continuous ones (``binary=False``): expected max@k. Returns (curve, per-item counts)."""
    from unlearn_leakk.estimator import expected_max_curve, leak_at_k_curve

    valid = [r for r in rows if r["responses"]]
    if len(valid) < len(rows):
        warnings.warn(f"{len(rows) - len(valid)} queries have no responses; skipped", stacklevel=2)
    if not valid:
        raise LeakDataError("no query has responses")
    missing = [r.get("id", i) for i, r in enumerate(valid) if field_name not in r["responses"][0]]
    if missing:
        raise LeakDataError(
            f"judge field {field_name!r} is missing for {len(missing)} queries (first: "
            f"{missing[0]!r}); run `unlearn-leakk judge` with that judge first"
        )
    scores = [[float(x[field_name]) for x in r["responses"]] for r in valid]
    if binary is None:
        binary = all(s in (0.0, 1.0) for row in scores for s in row)
    ids = [str(r.get("id", i)) for i, r in enumerate(valid)]
    if binary:
        counts = [int(sum(s >= threshold for s in row)) for row in scores]
        curve = leak_at_k_curve(counts, [len(s) for s in scores], ks)
        return curve, dict(zip(ids, counts, strict=True))
    return expected_max_curve(scores, ks), {i: -1 for i in ids}


@dataclass
class LeakReport:
    """leak@k curves per (model, judge, decoding) plus per-item leak counts."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(
        self,
        model: str,
        judge: str,
        decoding: DecodingConfig,
        curve: dict[int, float],
        counts: dict[str, int],
    ) -> None:
        row = {
            "model": model,
            "judge": judge,
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
            "n": decoding.n,
        }
        row |= {f"Leak@{k}": v for k, v in curve.items()}
        self.rows.append(row)
        self.counts[f"{model}|{judge}|{decoding.tag}"] = counts

    def table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_csv(self, path: str | Path) -> None:
        """Official ``Model, Leak@1..`` columns plus judge, temperature, top_p, n."""
        from llmcore.data import atomic_write_text

        df = self.table().rename(columns={"model": "Model"})
        lead = ["Model", *[c for c in df.columns if c.startswith("Leak@")]]
        df = df[lead + [c for c in df.columns if c not in lead]]
        atomic_write_text(path, df.to_csv(index=False))

    def to_json(self, path: str | Path) -> None:
        from llmcore.data import atomic_write_json

        atomic_write_json(path, {"rows": self.rows, "counts": self.counts})


def evaluate_leak(
    model: Any,
    items: Sequence[LeakItem],
    decodings: DecodingConfig | Sequence[DecodingConfig],
    judges: dict[str, LeakJudge] | Sequence[str],
    ks: Iterable[int] = K_DEFAULT,
    out_dir: str | Path | None = None,
    label: str = "model",
    *,
    tokenizer: Any = None,
    backend: Any = "hf",
    chat_template: bool = True,
    system_prompt: str | None = None,
    progress: bool = False,
) -> LeakReport:
    """Sample, judge and estimate leak@k for every decoding. ``model`` is an HF id,
    a path or a loaded model (with ``tokenizer=``). Files go to ``out_dir`` in the official
    layout when given (and resume from there)."""
    import tempfile

    from unlearn_leakk.judges import get_judge

    decs = [decodings] if isinstance(decodings, DecodingConfig) else list(decodings)
    if not decs:
        raise LeakConfigError("evaluate_leak needs at least one DecodingConfig")
    ks = list(ks)
    if not ks:
        raise LeakConfigError("empty k list: pass e.g. ks=(1, 2, 4, 8)")
    jmap = dict(judges) if isinstance(judges, dict) else {j: get_judge(j) for j in judges}
    if not jmap:
        raise LeakConfigError("evaluate_leak needs at least one judge")
    if isinstance(model, str | Path) and isinstance(backend, str) and backend == "hf":
        from llmcore.models import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(model)
    report = LeakReport()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(out_dir) if out_dir is not None else Path(tmp)
        for d in decs:
            usable = [k for k in ks if k <= d.n]
            if len(usable) < len(ks):
                raise LeakConfigError(
                    f"ks {sorted(set(ks) - set(usable))} exceed n={d.n} at {d.tag}; raise n"
                )
            path = generations_path(root, label, d)
            rows = generate_file(
                model,
                tokenizer,
                items,
                d,
                path,
                backend=backend,
                chat_template=chat_template,
                system_prompt=system_prompt,
                progress=progress,
            )
            extra = {k: v for k, v in jmap.items() if k not in ("rouge", "exact")}
            rows = judge_rows(rows, extra) if extra else rows
            if extra and out_dir is not None:
                from llmcore.data import write_jsonl

                write_jsonl(path.with_name(path.stem + "_evaluated.json"), rows)
            for name, judge in jmap.items():
                fld = JUDGE_FIELDS.get(name, name)
                thr = getattr(judge, "threshold", None)
                binary = bool(getattr(judge, "binary", True))
                if name == "rouge" and thr is not None:
                    curve, counts = leak_curve_from_rows(rows, fld, ks, binary=True, threshold=thr)
                else:
                    curve, counts = leak_curve_from_rows(rows, fld, ks, binary=binary)
                report.add(label, getattr(judge, "name", name), d, curve, counts)
        if out_dir is not None:
            report.to_csv(Path(out_dir) / label / "model_evaluation_metrics.csv")
    return report


def per_item_counts(
    responses: Sequence[Sequence[str]],
    items: Sequence[LeakItem],
    judge: LeakJudge,
    references: Sequence[str] | None = None,
) -> list[int]:
    """Leaking samples per item under a binary judge (``references`` override answers)."""
    refs = references if references is not None else [it.answer for it in items]
    return [
        int(sum(s >= 0.5 for s in judge(list(r), ref, it.question)))
        for r, ref, it in zip(responses, refs, items, strict=True)
    ]


def greedy_leak(counts_greedy: Sequence[int]) -> float:
    """Greedy leak rate: fraction of queries whose single greedy response leaks."""
    if not counts_greedy:
        raise LeakDataError("no greedy counts")
    return sum(1 for c in counts_greedy if c > 0) / len(counts_greedy)


__all__ = [
    "LeakReport",
    "evaluate_leak",
    "generate_file",
    "greedy_leak",
    "judge_rows",
    "leak_curve_from_rows",
    "per_item_counts",
    "read_generations",
]
