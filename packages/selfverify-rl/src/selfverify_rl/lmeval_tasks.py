"""lm-evaluation-harness tasks ``selfverify_gen`` and ``selfverify_verify`` over local files.

``selfverify_gen`` scores generation (Sec. 2.1's reward: the last ``\\boxed{}`` of the response
tail, normalised, against the ground truth); ``selfverify_verify`` scores verdicts on a balanced
candidate set (``\\boxed{Yes}``/``\\boxed{No}`` against the label; Sec. 2.6's accuracy and the Yes
rate). Both are ``generate_until`` tasks written through
``llmcore.lmeval.write_generate_until_task``, with this package's graders as
``process_results``; the prompts are rendered here (plain or chat style), so lm-eval sees the
same text as :mod:`selfverify_rl.evaluate`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TASKS", "write_tasks"]

TASKS = ("selfverify_gen", "selfverify_verify")

_UTILS = '''"""Written by selfverify-rl: graders of the selfverify_gen / selfverify_verify tasks."""

from selfverify_rl.rewards import parse_verdict, score_generation


def process_gen(doc, results):
    score, valid, _ = score_generation(results[0], doc["answer"])
    return {"acc": float(score), "valid_rate": float(valid)}


def process_verify(doc, results):
    verdict = parse_verdict(results[0])
    return {"acc": float(verdict == doc["label"]), "yes_rate": float(verdict == "Yes")}
'''


def _metrics(names: Sequence[str]) -> list[dict[str, Any]]:
    return [{"metric": m, "aggregation": "mean", "higher_is_better": True} for m in names]


def write_tasks(
    problems: Sequence[Mapping[str, Any]],
    candidates: Sequence[Mapping[str, Any]],
    out_dir: str | Path,
    *,
    style: str = "plain",
    tokenizer: Any = None,
    max_gen_toks: int = 64,
) -> list[Path]:
    """Write both task YAMLs, their data and graders into ``out_dir`` (lm-eval's
    ``include_path``); returns the YAML paths.

    ``problems`` are ``problem_id, question, answer`` rows; ``candidates`` are
    ``question, candidate, label`` rows (e.g. a balanced set from
    :func:`selfverify_rl.evaluate.self_verification_set`). ``tokenizer`` renders the chat style
    and supplies a tiny model's BOS prefix (:func:`selfverify_rl.evaluate.model_prefix`).
    """
    from llmcore.lmeval import write_generate_until_task
    from selfverify_rl.errors import SelfVerifyDataError
    from selfverify_rl.evaluate import model_prefix
    from selfverify_rl.prompts import generation_prompt, verification_prompt
    from selfverify_rl.tasks import check_rows

    problems = check_rows(problems, where="lm-eval problems")
    if not candidates:
        raise SelfVerifyDataError("lm-eval candidates: no rows (give question/candidate/label)")
    for i, c in enumerate(candidates):
        missing = [k for k in ("question", "candidate", "label") if k not in c]
        if missing or c.get("label") not in ("Yes", "No"):
            raise SelfVerifyDataError(
                f"lm-eval candidates: row {i} lacks {missing} or has label {c.get('label')!r}; "
                "every row needs question, candidate and label 'Yes' or 'No'"
            )
    pre = model_prefix(tokenizer) if tokenizer is not None and style == "plain" else ""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    gen_rows = [
        {"prompt": pre + generation_prompt(p["question"], style, tokenizer), "answer": p["answer"]}
        for p in problems
    ]
    ver_rows = [
        {
            "prompt": pre
            + verification_prompt(c["question"], str(c["candidate"]), style, tokenizer),
            "label": c["label"],
        }
        for c in candidates
    ]
    stop = ["\n"] if style == "plain" else []
    paths = []
    for task, rows, metrics, fn in (
        ("selfverify_gen", gen_rows, ("acc", "valid_rate"), "process_gen"),
        ("selfverify_verify", ver_rows, ("acc", "yes_rate"), "process_verify"),
    ):
        data = out / f"{task}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        path = write_generate_until_task(
            out,
            task=task,
            data_files=data,
            doc_to_text="{{prompt}}",
            doc_to_target="{{answer}}" if task == "selfverify_gen" else "{{label}}",
            metric=_metrics(metrics),
            generation_kwargs={"until": stop, "max_gen_toks": max_gen_toks, "do_sample": False},
            target_delimiter="",
            tag="selfverify",
        )
        text = path.read_text(encoding="utf-8").rstrip("\n")
        path.write_text(
            text + f"\nprocess_results: !function selfverify_utils.{fn}\n", encoding="utf-8"
        )
        paths.append(path)
    (out / "selfverify_utils.py").write_text(_UTILS, encoding="utf-8")
    return paths
