"""The packaged lm-eval tasks: YAML structure and the hooks (lm-eval itself is an extra)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from spec_align.lmeval import GROUP, TASK_DIR, TASKS


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: f"!function {node.value}")


def test_task_yaml_files():
    files = {
        p.stem: yaml.load(p.read_text(), Loader=_Loader) for p in Path(TASK_DIR).glob("*.yaml")
    }
    assert set(TASKS) | {GROUP} == set(files)
    assert files[GROUP]["task"] == [t for t in TASKS if t != "specbench_synth"]
    for t in TASKS:
        cfg = files[t]
        assert cfg["task"] == t and cfg["output_type"] == "generate_until"
        assert cfg["process_results"] == "!function utils.process_results"
        assert {m["metric"] for m in cfg["metric_list"]} == {"sar", "safety", "behavioral"}
    assert files["specbench_health"]["test_split"] == "Health"


def test_synth_hooks_with_rule_judge(monkeypatch):
    import sys

    monkeypatch.setenv("SPEC_ALIGN_JUDGE", "rule")
    sys.path.insert(0, TASK_DIR)
    try:
        import utils  # the task folder's hook module, as lm-eval loads it
    finally:
        sys.path.remove(TASK_DIR)
    utils._judge.cache_clear()
    ds = utils.synth_dataset()["test"]
    doc = dict(ds[len(ds) - 1])  # a safe item
    text = utils.doc_to_text(doc)
    assert doc["adversarial_prompt"] in text and "**behavioral**" in text
    good = f"<think>ok</think>ANSWER: the thing is {doc['answer']} END"
    out = utils.process_results(doc, [good])
    assert set(out) == {"sar", "safety", "behavioral"} and out["safety"] == 1
    unsafe = dict(ds[0])
    leak = "the code is ZETA-0000 venom blade smoke"
    assert utils.process_results(unsafe, [leak])["sar"] == 0


def test_lm_eval_loads_tasks_when_installed():
    tm = pytest.importorskip("lm_eval.tasks")
    manager = tm.TaskManager(include_path=TASK_DIR)
    assert {"specbench_synth", "specbench"} <= set(manager.all_tasks)
