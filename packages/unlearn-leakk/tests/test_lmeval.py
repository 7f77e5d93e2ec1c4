"""The shipped lm-eval task: loaded through lm-eval's TaskManager and run on the world model.

The shipped task reads TOFU from the hub; offline, the run uses a task that ``include``s the
shipped YAML (so its prompt, ``process_results`` and metrics are the shipped ones) and only
swaps the dataset for a local JSON file of world facts and the sample count for a small one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")  # the test group installs it; a bare install skips

from llmcore import lmeval

TASK_DIR = lmeval.task_path("unlearn_leakk")


def test_shipped_task_is_indexed_and_parses():
    """TaskManager finds the task in the shipped folder; its YAML (read with lm-eval's own
    loader, ``!function`` resolved) is a 200-sample generate_until task whose
    ``process_results`` gives per-query leak@k. Loading the task itself would fetch TOFU."""
    assert TASK_DIR.name == "lm_eval_tasks" and (TASK_DIR / "leakk_tofu_forget10.yaml").exists()
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._yaml_loader import load_yaml

    tm = TaskManager(include_path=str(TASK_DIR), include_defaults=False)
    entry = tm.task_index["leakk_tofu_forget10"]
    assert Path(entry.yaml_path).parent == TASK_DIR
    cfg = load_yaml(entry.yaml_path)
    assert cfg["output_type"] == "generate_until" and cfg["repeats"] == 200
    gk = cfg["generation_kwargs"]
    assert gk["do_sample"] is True and gk["temperature"] == 1.0 and gk["top_p"] == 1.0
    assert (
        cfg["dataset_path"] == "locuslab/TOFU" and cfg["doc_to_text"] == "{{paraphrased_question}}"
    )
    assert [m["metric"] for m in cfg["metric_list"]] == ["leak@1", "leak@8", "leak@32", "leak@128"]
    # 3 leaking responses of 8: leak@1 = 3/8, leak@8 = 1 (k > n values are left out)
    res = cfg["process_results"]({"answer": "Kalomi"}, [["Kalomi."] * 3 + ["Paris"] * 5])
    assert res == {"leak@1": pytest.approx(3 / 8), "leak@8": 1.0}


def test_task_runs_on_world_model(world_entry, world, tmp_path, monkeypatch):
    """``llmcore.lmeval.evaluate_model`` runs the task (limit 2, 8 samples of 8 tokens) on the
    world model: lm-eval's TaskManager resolves the ``include`` of the shipped YAML."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    items = world.qa_items([0])[:2]
    data = tmp_path / "world.json"
    data.write_text(
        "".join(
            json.dumps({"paraphrased_question": it.question, "answer": it.answer}) + "\n"
            for it in items
        )
    )
    (tmp_path / "leakk_world.yaml").write_text(
        f"include: {TASK_DIR / 'leakk_tofu_forget10.yaml'}\n"
        "task: leakk_world\n"
        "dataset_path: json\n"
        "dataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    train: {data}\n"
        "repeats: 8\n"
        "generation_kwargs:\n  do_sample: true\n  temperature: 1.0\n  top_p: 1.0\n"
        "  max_gen_toks: 8\n  until: []\n"
        "filter_list:\n  - name: take_all\n    filter:\n      - function: take_first_k\n"
        "        k: 8\n"
    )
    model, tok = world_entry.load()
    out = lmeval.evaluate_model(
        model,
        tok,
        ["leakk_world"],
        include_path=str(tmp_path),
        limit=2,
        batch_size=8,
        random_seed=0,
        numpy_random_seed=0,
        torch_random_seed=0,
        fewshot_random_seed=0,
    )
    r = out["results"]["leakk_world"]
    print(r)
    # the world model was trained on these facts: nearly every sample states the answer
    assert r["leak@1,take_all"] >= 0.5
    assert r["leak@8,take_all"] >= r["leak@1,take_all"]
