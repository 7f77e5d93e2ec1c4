"""lm-eval integration: the registered ``d3llm`` model on a local generate_until task."""

from __future__ import annotations

import pytest

pytest.importorskip("lm_eval")


def test_registration_and_loglikelihood_refused():
    import d3llm.lm_eval_model as mod
    from lm_eval.api.registry import get_model

    assert get_model("d3llm") is mod.D3LLMEvalLM


@pytest.mark.slow
def test_lm_eval_task_matches_python_decode(tmp_path):
    """8 held-out parity prompts through ``simple_evaluate`` on the demo teacher with
    multi-block decoding: lm-eval's exact match equals the Python API's accuracy on the same
    prompts, and the model reports its TPF and NFE."""
    import lm_eval
    from d3llm.lm_eval_model import D3LLMEvalLM
    from d3llm.tiny import DEMO_BLOCK, DEMO_TASK, eval_inputs, evaluate, load_mdlm_entry, setup
    from lm_eval.tasks import TaskManager

    from llmcore import lmeval
    from llmcore.data import write_jsonl

    task = DEMO_TASK
    xs = eval_inputs(task, n=8)
    write_jsonl(tmp_path / "parity.jsonl", task.records(xs))
    lmeval.write_generate_until_task(
        tmp_path / "tasks",
        task="d3llm_parity",
        data_files=tmp_path / "parity.jsonl",
        doc_to_text="{{question}}",
        doc_to_target="{{gt_answer}}",
        generation_kwargs={"max_gen_toks": task.gen_length, "until": ["</s>"]},
    )
    entry = setup("demo")["teacher"]
    lm = D3LLMEvalLM(
        pretrained=str(entry.path), method="multiblock", gen_length=task.gen_length,
        block_size=DEMO_BLOCK, threshold=0.5,
    )  # fmt: skip
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=["d3llm_parity"],
        task_manager=TaskManager(include_path=str(tmp_path / "tasks"), include_defaults=False),
        bootstrap_iters=0,
    )
    em = lmeval.scores(out)["d3llm_parity"]["exact_match"]
    m, tok = load_mdlm_entry(entry)
    direct = evaluate(m, tok, "multiblock", task=task, inputs=xs, threshold=0.5)
    assert em == pytest.approx(direct["accuracy"])
    assert lm.decode_stats["samples"] == 8
    assert lm.decode_stats["tpf"] == pytest.approx(direct["tpf"])
    with pytest.raises(NotImplementedError):
        lm.loglikelihood([])
