"""lm-eval tasks graded by the package's answer checker (extra ``lm-eval``).

:func:`write_task` writes a ``generate_until`` task folder over a local ``.jsonl`` of
questions (``prompt``/``question`` and ``answer`` columns, e.g. an export of synthetic QA or a
user physics set) whose ``process_results`` calls :func:`sim2reason.rewards.check_answer`, so
lm-eval scores exactly as ``sim2reason eval`` does. Run it with
``llmcore.lmeval.evaluate_model(model, tok, task, include_path=folder)``.
"""

from __future__ import annotations

import json
from pathlib import Path

from sim2reason.errors import ConfigError

__all__ = ["process_results", "write_task"]

_UTILS = '''"""Written by sim2reason.lmeval.write_task: grade with sim2reason's checker."""

from sim2reason.lmeval import process_results as _grade


def process_results(doc, results):
    return _grade(doc, results, rel={rel!r})
'''


def process_results(doc: dict, results: list[str], rel: float = 0.01) -> dict[str, float]:
    """lm-eval hook: ``{"acc": 1.0}`` when the generation passes the magnitude rule."""
    from sim2reason.rewards import check_answer

    mapping = doc.get("given_variable_mapping")
    res = check_answer(results[0], float(doc["answer"]), doc.get("kind") or "numeric",
                       mapping, rel=rel)  # fmt: skip
    return {"acc": res["reward"]}


def write_task(folder: str | Path, data_file: str | Path,
               task: str = "sim2reason_synthetic_numeric", *, rel: float = 0.01,
               question_key: str = "prompt", max_gen_toks: int = 512,
               suffix: str = "") -> Path:  # fmt: skip
    """Write ``<folder>/<task>.yaml`` (+ its grading hook) over ``data_file`` (JSONL)."""
    if not task.replace("_", "").isalnum():
        raise ConfigError(f"task={task!r}: use letters, digits and '_'")
    data = Path(data_file).expanduser().resolve()
    if not data.is_file():
        raise ConfigError(f"data file {str(data)!r} does not exist")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    utils = f"{task}_utils"
    (folder / f"{utils}.py").write_text(_UTILS.format(rel=float(rel)))
    yaml_text = "\n".join([
        f"task: {task}",
        "dataset_path: json",
        f"dataset_kwargs: {{data_files: {{test: {json.dumps(str(data))}}}}}",
        "test_split: test",
        "output_type: generate_until",
        f"doc_to_text: {json.dumps('{{' + question_key + '}}' + suffix)}",
        'doc_to_target: "{{answer}}"',
        f"generation_kwargs: {{until: [], do_sample: false, max_gen_toks: {int(max_gen_toks)}}}",
        f"process_results: !function {utils}.process_results",
        "metric_list:",
        "  - {metric: acc, aggregation: mean, higher_is_better: true}",
        "metadata: {version: 1.0}",
        "",
    ])  # fmt: skip
    path = folder / f"{task}.yaml"
    path.write_text(yaml_text)
    return path
