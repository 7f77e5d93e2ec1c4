"""Loaders from local files and item validation."""

from __future__ import annotations

import json
import warnings

import pytest
from unlearn_leakk.config import DecodingConfig, RULEConfig, UnlearnConfig
from unlearn_leakk.data import (
    LeakItem,
    load_dataset_items,
    load_jsonl,
    load_muse,
    load_tofu,
    load_wmdp,
    validate_items,
)
from unlearn_leakk.errors import LeakConfigError, LeakDataError


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_tofu_from_local_dir(tmp_path):
    rows = [
        {"question": f"q{i}", "paraphrased_question": f"pq{i}", "answer": f"a{i}"} for i in range(3)
    ]
    _jsonl(tmp_path / "forget10_perturbed.jsonl", rows)
    items = load_tofu("forget10", source=tmp_path)
    assert [it.question for it in items] == ["pq0", "pq1", "pq2"]
    assert items[0].answer == "a0" and items[0].split == "forget"
    with pytest.raises(LeakDataError, match="unknown TOFU split"):
        load_tofu("forget11", source=tmp_path)
    with pytest.raises(LeakDataError, match="unknown TOFU question_key"):
        load_tofu("forget10", question_key="prompt", source=tmp_path)
    with pytest.raises(LeakDataError, match="no file"):
        load_tofu("retain90", question_key="question", source=tmp_path)


def test_muse_and_wmdp_from_files(tmp_path):
    k = tmp_path / "muse"
    k.mkdir()
    _jsonl(k / "forget_qa.jsonl", [{"question": "Who?", "answer": "Ann"}])
    items = load_muse("News", "knowmem", source=k)
    assert items[0].stop == ("\n\n", "\nQuestion", "Question:")
    with pytest.raises(LeakDataError, match="unknown MUSE kind"):
        load_muse("News", "privleak", source=k)
    w = _jsonl(
        tmp_path / "wmdp.jsonl", [{"question": "Q", "choices": ["a", "b", "c", "d"], "answer": 2}]
    )
    items = load_wmdp("bio", source=w)
    assert items[0].answer == "c" and items[0].answer_index == 2
    bad = _jsonl(tmp_path / "wmdp_bad.jsonl", [{"question": "Q", "choices": ["a"], "answer": 3}])
    with pytest.raises(LeakDataError, match="answer index 3"):
        load_wmdp("bio", source=bad)


def test_jsonl_and_bad_items(tmp_path):
    p = _jsonl(tmp_path / "f.jsonl", [{"id": "x", "question": "q", "answer": "a"}])
    assert load_jsonl(p)[0].id == "x"
    with pytest.raises(LeakDataError, match="no field 'answer'"):
        load_jsonl(_jsonl(tmp_path / "g.jsonl", [{"question": "q"}]))
    with pytest.raises(LeakDataError, match="empty answer"):
        load_jsonl(_jsonl(tmp_path / "h.jsonl", [{"question": "q", "answer": " "}]))
    with pytest.raises(LeakDataError, match="duplicate item id 'd'"):
        validate_items([LeakItem("d", "q", "a"), LeakItem("d", "q2", "a2")])
    with pytest.raises(LeakDataError, match="empty question"):
        validate_items([LeakItem("d", "", "a")])
    with pytest.raises(LeakDataError, match="no items"):
        validate_items([])
    with pytest.raises(LeakDataError, match="no such JSONL"):
        load_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(LeakDataError, match="unknown dataset"):
        load_dataset_items("squad")


def test_decoding_config_validation():
    with pytest.raises(LeakConfigError, match=r"temperature=-0\.1"):
        DecodingConfig(temperature=-0.1)
    for p in (0.0, 1.5):
        with pytest.raises(LeakConfigError, match="top_p"):
            DecodingConfig(top_p=p)
    with pytest.raises(LeakConfigError, match="n=0"):
        DecodingConfig(n=0)
    with pytest.warns(UserWarning, match="all samples are identical"):
        DecodingConfig(temperature=0.0, n=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = DecodingConfig(temperature=0.0, top_p=0.0, n=1)
    assert d.is_greedy and d.tag == "temperature=0top_p=0"


def test_unlearn_and_rule_config_validation():
    with pytest.raises(LeakConfigError, match="unknown unlearning method 'KLMin'"):
        UnlearnConfig("KLMin")
    assert UnlearnConfig("NPO").beta == 0.5 and UnlearnConfig("SimNPO").beta == 4.5
    with pytest.raises(LeakConfigError, match="retain_loss_type"):
        UnlearnConfig(retain_loss_type="MSE")
    with pytest.raises(LeakConfigError, match="rounds=0"):
        RULEConfig(rounds=0)
    with pytest.raises(LeakConfigError, match="n_mine=0"):
        RULEConfig(n_mine=0)
    with pytest.raises(LeakConfigError, match="weighting"):
        RULEConfig(weighting="inverse")
    assert RULEConfig(n_mine=8).mine_decoding.n == 8
