"""The lm-eval task grades generations with the package's checker."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_lmeval_task_uses_the_checker(tmp_path):
    pytest.importorskip("lm_eval")
    from sim2reason.lmeval import process_results, write_task

    from llmcore.lmeval import evaluate_model, scores
    from llmcore.zoo import train_bpe_tokenizer
    from llmcore.zoo.recipes import ModelSpec
    from llmcore.zoo.train import build_model

    assert process_results({"answer": 2.5}, [r"so \boxed{2.49}"]) == {"acc": 1.0}
    assert process_results({"answer": 2.5}, ["2.47"]) == {"acc": 0.0}
    rows = [{"prompt": f"v of block{i}?", "answer": 1.0 + i} for i in range(3)]
    data = tmp_path / "qa.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    write_task(tmp_path / "tasks", data, max_gen_toks=4)
    tok = train_bpe_tokenizer(["v of block0? 1"], 264)
    model = build_model(ModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
                        tok, seed=0)  # fmt: skip
    out = evaluate_model(model, tok, "sim2reason_synthetic_numeric",
                         include_path=tmp_path / "tasks", bootstrap_iters=0, log_samples=True)  # fmt: skip
    acc = next(
        v for k, v in scores(out)["sim2reason_synthetic_numeric"].items() if k.startswith("acc")
    )
    samples = out["samples"]["sim2reason_synthetic_numeric"]
    assert len(samples) == 3
    mine = [process_results(s["doc"], [s["filtered_resps"][0]])["acc"] for s in samples]
    assert acc == pytest.approx(sum(mine) / 3)
