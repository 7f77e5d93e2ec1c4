"""The lm-eval model ``monica-hf`` on the packaged ``monica_synth`` task (two documents)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_monica_hf_on_monica_synth(model_tok, fitted):
    pytest.importorskip("lm_eval")
    from monica_syco.lm_eval_model import MonicaHFLM

    from llmcore import lmeval

    model, tok = model_tok
    mon, cal, _ = fitted
    lm = MonicaHFLM(pretrained=model, tokenizer=tok, monitor=mon, calibrator=cal, batch_size=1)
    out = lmeval.evaluate_model(
        lm,
        tok,
        ["monica_synth"],
        include_path=str(lmeval.task_path("monica_syco")),
        limit=4,
    )
    scores = lmeval.scores(out)["monica_synth"]
    assert "syc_rate" in scores and "acc_clean" in scores
    assert lm.monica_stats["requests"] == 4
