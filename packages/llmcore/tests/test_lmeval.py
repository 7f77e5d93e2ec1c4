"""llmcore.lmeval: a local generate_until task written, loaded and run on a tiny in-code model."""

from __future__ import annotations

import json
import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is local
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
pytest.importorskip("lm_eval")

from llmcore import lmeval
from llmcore.errors import ConfigError, MissingExtraError


@pytest.fixture(scope="module")
def tiny_lm():
    """A 2-layer, hidden-32 Llama and a BPE tokenizer trained on synthetic sums (built in code)."""
    from tinymodels import random_llama, sums_corpus, toy_tokenizer

    tok = toy_tokenizer(sums_corpus())
    return random_llama(tok, hidden=32, max_positions=128), tok


@pytest.fixture
def sums_task(tmp_path):
    data = tmp_path / "sums.jsonl"
    rows = [{"question": f"what is {a} plus 1?", "answer": str(a + 1)} for a in range(5)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    folder = tmp_path / "tasks"
    path = lmeval.write_generate_until_task(
        folder,
        task="toy_sums",
        data_files=data,
        doc_to_text="{{question}} it is",
        doc_to_target="{{answer}}",
        generation_kwargs={"max_gen_toks": 4},
    )
    return folder, path


def test_written_task_loads(sums_task):
    from lm_eval.tasks import TaskManager

    folder, path = sums_task
    assert path == folder / "toy_sums.yaml"
    tm = TaskManager(include_path=str(folder), include_defaults=False)
    assert "toy_sums" in tm.all_tasks
    task = tm.load(["toy_sums"])["tasks"]["toy_sums"]
    assert task.OUTPUT_TYPE == "generate_until"
    docs = list(task.eval_docs)
    assert len(docs) == 5
    assert task.doc_to_text(docs[2]) == "what is 2 plus 1? it is"
    assert task.doc_to_target(docs[2]) == "3"


def test_evaluate_model_runs_local_task(tiny_lm, sums_task):
    """Runs offline in seconds: the local folder alone resolves the task, so lm-eval's ~15k
    built-in tasks are never indexed."""
    model, tok = tiny_lm
    folder, _ = sums_task
    out = lmeval.evaluate_model(model, tok, ["toy_sums"], include_path=folder, limit=2)
    res = out["results"]["toy_sums"]
    assert 0.0 <= res["exact_match,none"] <= 1.0
    assert out["n-samples"]["toy_sums"]["effective"] == 2
    assert lmeval.scores(out)["toy_sums"]["exact_match"] == res["exact_match,none"]
    assert "samples" not in out  # log_samples=False by default

    logged = lmeval.evaluate_model(
        model, tok, "toy_sums", include_path=folder, include_defaults=False, limit=2,
        log_samples=True,
    )  # fmt: skip
    samples = logged["samples"]["toy_sums"]
    assert [s["target"] for s in samples] == ["1", "2"]
    assert all(isinstance(s["resps"][0][0], str) for s in samples)

    # a ready lm-eval LM (e.g. an HFLM subclass with its own decoding) is used as is
    from lm_eval.models.huggingface import HFLM

    class Shouting(HFLM):
        def generate_until(self, requests, disable_tqdm=False):
            return ["LOUD" for _ in requests]

    custom = lmeval.evaluate_model(
        Shouting(pretrained=model, tokenizer=tok), None, "toy_sums", include_path=folder,
        limit=2, log_samples=True,
    )  # fmt: skip
    assert [s["resps"][0][0] for s in custom["samples"]["toy_sums"]] == ["LOUD", "LOUD"]
    assert custom["results"]["toy_sums"]["exact_match,none"] == 0.0


def test_unknown_task_lists_near_matches(tiny_lm, sums_task):
    model, tok = tiny_lm
    folder, _ = sums_task
    with pytest.raises(ConfigError, match=r"unknown lm-eval task 'toy_sum'.*toy_sums"):
        lmeval.evaluate_model(model, tok, ["toy_sum"], include_path=folder, include_defaults=False)
    with pytest.raises(ConfigError, match="not a directory"):
        lmeval.evaluate_model(model, tok, ["toy_sums"], include_path=folder / "missing")


def test_write_task_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        lmeval.write_generate_until_task(
            tmp_path, task="t", data_files=tmp_path / "nope.jsonl", doc_to_text="x",
            doc_to_target="y",
        )  # fmt: skip
    with pytest.raises(ConfigError, match="task="):
        lmeval.write_generate_until_task(
            tmp_path, task="a b", data_files=tmp_path, doc_to_text="x", doc_to_target="y"
        )


def test_task_path(tmp_path, monkeypatch):
    pkg = tmp_path / "pkgs"
    (pkg / "has_tasks" / "lmeval_tasks").mkdir(parents=True)
    (pkg / "has_tasks" / "__init__.py").write_text("")
    (pkg / "has_tasks" / "lmeval_tasks" / "t.yaml").write_text("task: t\n")
    (pkg / "legacy_pkg" / "lm_eval_tasks").mkdir(parents=True)
    (pkg / "legacy_pkg" / "__init__.py").write_text("")
    (pkg / "legacy_pkg" / "lm_eval_tasks" / "u.yaml").write_text("task: u\n")
    (pkg / "no_tasks").mkdir()
    (pkg / "no_tasks" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(pkg))

    assert lmeval.task_path("has_tasks") == pkg / "has_tasks" / "lmeval_tasks"
    assert lmeval.task_path("legacy-pkg") == pkg / "legacy_pkg" / "lm_eval_tasks"
    with pytest.raises(ConfigError, match="ships no lm-eval tasks"):
        lmeval.task_path("no_tasks")
    with pytest.raises(ConfigError, match="not installed"):
        lmeval.task_path("surely_not_a_package_xyz")


def test_missing_lm_eval_raises_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # makes `import lm_eval` raise ImportError
    with pytest.raises(MissingExtraError, match=r"icml26-llmcore\[lm-eval\]"):
        lmeval.evaluate_model(None, None, ["x"])
