"""evaluate_leak end to end on the world model: official layout, resume, CSV."""

from __future__ import annotations

import json

import pytest
from unlearn_leakk.config import DecodingConfig
from unlearn_leakk.errors import LeakDataError
from unlearn_leakk.evaluate import evaluate_leak, generations_path, leak_curve_from_rows
from unlearn_leakk.judges import RougeRecallJudge


def test_evaluate_leak_files_and_resume(world_model, world, tmp_path):
    model, tok = world_model
    items = world.qa_items([0])
    dec = DecodingConfig(1.0, 1.0, n=8, max_new_tokens=12, seed=5, batch_size=8)
    judges = {"exact": __import__("unlearn_leakk").ExactPhraseJudge(), "rouge": RougeRecallJudge()}
    rep = evaluate_leak(
        model,
        items,
        dec,
        judges,
        ks=[1, 2, 8],
        out_dir=tmp_path,
        label="orig",
        tokenizer=tok,
        chat_template=False,
    )
    path = generations_path(tmp_path, "orig", dec)
    assert path.parts[-3:] == ("forget", "temperature=1top_p=1", "generations_n8.json")
    row = json.loads(path.read_text().splitlines()[0])
    assert {"id", "prompt", "ground_truth", "responses", "best_answer", "decoding"} <= set(row)
    assert {"response", "rougeL_recall", "exact_match"} <= set(row["responses"][0])
    df = rep.table()
    assert list(df.columns[:5]) == ["model", "judge", "temperature", "top_p", "n"]
    assert set(df.judge) == {"exact_match", "rougeL_recall"}
    exact = df[df.judge == "exact_match"].iloc[0]
    assert exact["Leak@1"] <= exact["Leak@2"] <= exact["Leak@8"]
    csv = (tmp_path / "orig" / "model_evaluation_metrics.csv").read_text().splitlines()
    assert csv[0].startswith("Model,Leak@1,Leak@2,Leak@8")
    # resume: a second run reuses the file and gives the same report
    before = path.read_text()
    rep2 = evaluate_leak(
        model,
        items,
        dec,
        judges,
        ks=[1, 2, 8],
        out_dir=tmp_path,
        label="orig",
        tokenizer=tok,
        chat_template=False,
    )
    assert path.read_text() == before and rep2.rows == rep.rows


def test_missing_judge_field():
    rows = [{"id": "a", "ground_truth": "x", "responses": [{"response": "x", "exact_match": 1}]}]
    with pytest.raises(LeakDataError, match="judge field 'ES' is missing"):
        leak_curve_from_rows(rows, "ES", [1])
    curve, counts = leak_curve_from_rows(rows, "exact_match", [1])
    assert curve == {1: 1.0} and counts == {"a": 1}
