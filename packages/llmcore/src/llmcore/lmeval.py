"""lm-evaluation-harness helpers: evaluate an in-memory HF model, find and write YAML task folders.

Needs the optional extra ``icml26-llmcore[lm-eval]``; lm-eval is imported inside the functions.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import importlib.resources
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmcore.errors import ConfigError, MissingExtraError

__all__ = [
    "TASK_DIR_NAMES",
    "evaluate_model",
    "scores",
    "task_path",
    "write_generate_until_task",
]

#: Sub-folders of a package searched by :func:`task_path`, in order: the convention
#: (``lmeval_tasks``) first, then the names packages already use.
TASK_DIR_NAMES: tuple[str, ...] = ("lmeval_tasks", "lm_eval_tasks", "lmeval")


def _require_lm_eval(feature: str) -> Any:
    try:
        import lm_eval
        import lm_eval.models.huggingface  # the HF backend also needs accelerate
    except ImportError as e:
        raise MissingExtraError(feature, "lm-eval") from e
    return lm_eval


def _unknown_tasks(task_manager: Any, tasks: Sequence[Any]) -> list[str]:
    """Names in ``tasks`` that ``task_manager`` cannot resolve (dict configs always resolve)."""
    known = task_manager.all_tasks
    known_set = set(known)
    missing: list[str] = []
    for t in tasks:
        if not isinstance(t, str) or t in known_set or os.path.isfile(t):
            continue
        if any(ch in t for ch in "*?[") and fnmatch.filter(known, t):
            continue
        missing.append(t)
    return missing


def _unknown_task_error(task_manager: Any, name: str) -> ConfigError:
    known = list(task_manager.all_tasks)
    near = difflib.get_close_matches(name, known, n=8, cutoff=0.6)
    near += [k for k in known if name.lower() in k.lower() and k not in near][: 8 - len(near)]
    return ConfigError(
        f"unknown lm-eval task {name!r}; near matches: {near or 'none'} "
        f"({len(known)} tasks/groups/tags known; a local task folder needs include_path=)"
    )


def evaluate_model(
    model: Any,
    tokenizer: Any,
    tasks: str | Sequence[str | Mapping[str, Any]],
    *,
    include_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    include_defaults: bool | None = None,
    limit: int | float | None = None,
    batch_size: int | str = 1,
    num_fewshot: int | None = None,
    gen_kwargs: Mapping[str, Any] | None = None,
    log_samples: bool = False,
    max_length: int | None = None,
    **simple_evaluate_kwargs: Any,
) -> dict[str, Any]:
    """Run lm-eval ``tasks`` on an in-memory HF causal LM and return ``simple_evaluate``'s dict.

    The model is wrapped as ``lm_eval.models.huggingface.HFLM(pretrained=model,
    tokenizer=tokenizer)``, so it is evaluated where it already lives (CPU included; no reload,
    quantised or patched models keep their modifications); an ``lm_eval`` ``LM`` instance (e.g. an
    ``HFLM`` subclass with its own ``generate_until``) is used as is and ``tokenizer``, ``batch_size``
    and ``max_length`` are ignored. ``include_path`` adds folders of YAML
    tasks (see :func:`task_path`). Indexing lm-eval's ~15k built-in tasks takes seconds to minutes,
    so with ``include_defaults=None`` (default) and an ``include_path`` the local folders are tried
    alone first and the built-ins are indexed only if a task is not found there; ``True``/``False``
    force either. Unknown task names raise a
    :class:`~llmcore.errors.ConfigError` listing near matches before anything runs. Remaining
    keyword arguments go to ``lm_eval.simple_evaluate`` (e.g. ``apply_chat_template=True``,
    ``bootstrap_iters=0``). Per-task metrics are in ``result["results"][task]`` keyed
    ``"metric,filter"``; :func:`scores` flattens them.
    """
    lm_eval = _require_lm_eval("llmcore.lmeval.evaluate_model")
    from lm_eval.api.model import LM
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    if not isinstance(model, LM) and tokenizer is None:
        raise ConfigError("tokenizer=None: lm-eval needs the model's tokenizer")
    if isinstance(tasks, str):
        tasks = [tasks]
    if not tasks:
        raise ConfigError("tasks is empty: name at least one lm-eval task")
    paths: list[str] | None = None
    if include_path is not None:
        raw = [include_path] if isinstance(include_path, str | os.PathLike) else list(include_path)
        paths = [str(Path(p).resolve()) for p in raw]
        for p in paths:
            if not Path(p).is_dir():
                raise ConfigError(f"include_path {p!r} is not a directory of lm-eval YAML tasks")
    task_list = list(tasks)
    tm = None
    if include_defaults is None and paths:
        tm = TaskManager(include_path=paths, include_defaults=False)
        if _unknown_tasks(tm, task_list):
            tm = None
    if tm is None:
        tm = TaskManager(include_path=paths, include_defaults=include_defaults is not False)
    missing = _unknown_tasks(tm, task_list)
    if missing:
        raise _unknown_task_error(tm, missing[0])
    lm_kwargs: dict[str, Any] = {"batch_size": batch_size}
    if max_length is not None:
        lm_kwargs["max_length"] = max_length
    lm = (
        model if isinstance(model, LM) else HFLM(pretrained=model, tokenizer=tokenizer, **lm_kwargs)
    )
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=task_list,
        limit=limit,
        num_fewshot=num_fewshot,
        gen_kwargs=dict(gen_kwargs) if gen_kwargs else None,
        log_samples=log_samples,
        task_manager=tm,
        **simple_evaluate_kwargs,
    )
    if out is None:  # non-zero ranks under multi-process accelerate return None
        return {}
    return dict(out)


def scores(results: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` from an :func:`evaluate_model` result, dropping stderr entries
    and the ``,none`` filter suffix (other filters stay as ``metric,filter``)."""
    table: dict[str, dict[str, float]] = {}
    for task, res in results.get("results", {}).items():
        row: dict[str, float] = {}
        for key, value in res.items():
            if "," not in key or "_stderr" in key or not isinstance(value, int | float):
                continue
            metric, filt = key.split(",", 1)
            row[metric if filt == "none" else key] = float(value)
        table[task] = row
    return table


def task_path(package: str) -> Path:
    """Folder of lm-eval YAML tasks shipped inside an installed package, for ``include_path``.

    ``package`` is an import name (``spec_align``), a distribution name (``spec-align``) or a
    sub-package that is itself the task folder (``spec_align.lmeval``). The folder is the
    package's own directory if it holds ``*.yaml`` files, else its first sub-folder named in
    :data:`TASK_DIR_NAMES` that does. Raises :class:`~llmcore.errors.ConfigError` when the package
    is not installed or ships no tasks.
    """
    name = package.replace("-", "_")
    try:
        root = importlib.resources.files(name)
    except ModuleNotFoundError as e:
        raise ConfigError(f"package {package!r} is not installed (import {name!r} failed)") from e
    base = Path(str(root))
    for cand in (base, *(base / d for d in TASK_DIR_NAMES)):
        if cand.is_dir() and any(cand.glob("*.yaml")):
            return cand
    raise ConfigError(
        f"package {package!r} ships no lm-eval tasks: no *.yaml in {base} or its sub-folders "
        f"{list(TASK_DIR_NAMES)}; put the YAML files in {base / TASK_DIR_NAMES[0]}"
    )


def write_generate_until_task(
    path: str | os.PathLike[str],
    *,
    task: str,
    data_files: str | os.PathLike[str] | Mapping[str, str | os.PathLike[str]],
    doc_to_text: str,
    doc_to_target: str,
    dataset_path: str = "json",
    split: str = "test",
    metric: str | Sequence[str | Mapping[str, Any]] = "exact_match",
    generation_kwargs: Mapping[str, Any] | None = None,
    ignore_case: bool = True,
    ignore_punctuation: bool = False,
    target_delimiter: str = " ",
    description: str | None = None,
    tag: str | Sequence[str] | None = None,
    filter_regex: str | None = None,
) -> Path:
    """Write a small lm-eval ``generate_until`` task YAML over local data and return its path.

    ``path`` is a ``.yaml`` file or a folder (then ``<folder>/<task>.yaml``). ``data_files`` is a
    file (used as ``split``) or ``{split: file}``; paths are made absolute so the task loads from
    any working directory, through the ``datasets`` builder ``dataset_path`` (``"json"`` reads
    JSONL). ``doc_to_text``/``doc_to_target`` are Jinja templates over a row's fields, e.g.
    ``"Q: {{question}}\\nA:"`` and ``"{{answer}}"``. ``metric`` names lm-eval metrics
    (``exact_match`` gets ``ignore_case``/``ignore_punctuation``) or gives full ``metric_list``
    entries. ``generation_kwargs`` defaults to greedy, 32 new tokens, stop at a newline.
    ``filter_regex`` adds a regex filter (first capture group) applied before scoring.
    """
    import yaml

    if not task or not task.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"task={task!r}: use letters, digits, '_' or '-'")
    files = dict(data_files) if isinstance(data_files, Mapping) else {split: data_files}
    if split not in files:
        raise ConfigError(f"split={split!r} is not among the data_files splits {sorted(files)}")
    abs_files: dict[str, str] = {}
    for s, f in files.items():
        p = Path(f).expanduser().resolve()
        if not p.is_file():
            raise ConfigError(f"data file {str(p)!r} (split {s!r}) does not exist")
        abs_files[s] = str(p)
    metrics: list[dict[str, Any]] = []
    for m in [metric] if isinstance(metric, str) else list(metric):
        if isinstance(m, Mapping):
            metrics.append(dict(m))
            continue
        entry: dict[str, Any] = {"metric": m, "aggregation": "mean", "higher_is_better": True}
        if m == "exact_match":
            entry |= {"ignore_case": ignore_case, "ignore_punctuation": ignore_punctuation}
        metrics.append(entry)
    gen = {"until": ["\n"], "do_sample": False, "max_gen_toks": 32}
    gen |= dict(generation_kwargs or {})
    cfg: dict[str, Any] = {
        "task": task,
        "dataset_path": dataset_path,
        "dataset_kwargs": {"data_files": abs_files},
        "test_split": split,
        "output_type": "generate_until",
        "doc_to_text": doc_to_text,
        "doc_to_target": doc_to_target,
        "target_delimiter": target_delimiter,
        "generation_kwargs": gen,
        "metric_list": metrics,
        "metadata": {"version": 1.0},
    }
    if description is not None:
        cfg["description"] = description
    if tag is not None:
        cfg["tag"] = [tag] if isinstance(tag, str) else list(tag)
    if filter_regex is not None:
        cfg["filter_list"] = [
            {
                "name": "regex",
                "filter": [
                    {"function": "regex", "regex_pattern": filter_regex},
                    {"function": "take_first"},
                ],
            }
        ]
    out = Path(path)
    if out.suffix not in (".yaml", ".yml"):
        out = out / f"{task}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    os.replace(tmp, out)
    return out
