"""The packaged lm-eval tasks: YAML structure, the hooks, and a real lm-eval run on the tiny model."""

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


def test_task_path_is_the_packaged_folder():
    from llmcore.lmeval import task_path

    assert task_path("spec_align") == Path(TASK_DIR)


def test_lm_eval_runs_specbench_synth_on_the_tiny_model(tiny, monkeypatch):
    """lm-eval (``simple_evaluate`` through llmcore) generates with the tiny model on the
    synthetic task and scores each sample with the rule judge; every logged sample's metrics
    equal what the package's own hook gives for the same response, and the task means are the
    means of those samples."""
    from llmcore.lmeval import evaluate_model, scores, task_path

    monkeypatch.setenv("SPEC_ALIGN_JUDGE", "rule")
    out = evaluate_model(
        tiny.core.model,
        tiny.tokenizer,
        ["specbench_synth"],
        include_path=task_path("spec_align"),
        limit=4,
        gen_kwargs={"max_gen_toks": 48},
        log_samples=True,
        apply_chat_template=True,
        bootstrap_iters=0,
    )
    row = scores(out)["specbench_synth"]
    samples = out["samples"]["specbench_synth"]
    assert len(samples) == 4
    import sys

    sys.path.insert(0, TASK_DIR)
    try:
        import utils
    finally:
        sys.path.remove(TASK_DIR)
    utils._judge.cache_clear()
    for metric in ("sar", "safety", "behavioral"):
        per = [s[metric] for s in samples]
        assert all(0.0 <= v <= 1.0 for v in per)
        assert row[metric] == pytest.approx(sum(per) / len(per))
    for s in samples:
        again = utils.process_results(s["doc"], [s["resps"][0][0]])
        assert again == {k: s[k] for k in again}
