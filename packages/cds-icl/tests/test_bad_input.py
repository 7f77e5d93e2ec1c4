"""Bad input gets clear errors naming the value and the fix."""

from __future__ import annotations

import numpy as np
import pytest
from cds_icl.embed import embed
from cds_icl.errors import CDSInputError, ContextLengthError, OfflineEncoderError
from cds_icl.pool import Demo, DemoPool, OrderFile
from cds_icl.selectors import RandomSelector, make_selector
from cds_icl.tsp import cds_order, cost_matrix


def small_pool(n=5):
    return DemoPool([Demo(f"p{i}", f"s{i}", str(i), {"idx": i}) for i in range(n)])


@pytest.mark.parametrize("k", [0, -1, 6, 2.5])
def test_k_out_of_range(k):
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 5\]"):
        RandomSelector().select(small_pool(), None, k, 0)


def test_empty_pool_and_duplicate_ids():
    with pytest.raises(ValueError, match="empty"):
        DemoPool([])
    with pytest.raises(ValueError, match="duplicate demonstration ids"):
        DemoPool([Demo("a", "b", meta={"idx": 1}), Demo("c", "d", meta={"idx": 1})])


def test_non_finite_embeddings():
    E = np.ones((5, 3))
    E[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN/inf in rows \[2\]"):
        cds_order(E)
    with pytest.raises(ValueError, match="2-D"):
        cds_order(np.ones(4))


def test_fewer_than_three_points_identity_with_warning():
    with pytest.warns(UserWarning, match="identity order"):
        assert cds_order(np.eye(2)) == ([0, 1], 0.0)


def test_duplicate_points_warn():
    E = np.random.default_rng(0).normal(size=(6, 3))
    E[3] = E[1]
    with pytest.warns(UserWarning, match="duplicate embeddings"):
        order, _ = cds_order(E)
    assert sorted(order) == list(range(6))


def test_unknown_choices_are_listed():
    with pytest.raises(ValueError, match="choose one of: cds, high_curvature"):
        cost_matrix(np.eye(3), "smooth")
    with pytest.raises(ValueError, match=r"unknown selector 'bm25'.*random, original, kate"):
        make_selector("bm25")
    with pytest.raises(
        ValueError, match=r"unknown embed backend 'tfidf'.*st, hf-mean, openai, hash"
    ):
        embed(["a"], "tfidf")
    from cds_icl.runner import load_task

    with pytest.raises(ValueError, match="unknown MATH subtask 'topology'"):
        load_task("math:topology")
    with pytest.raises(ValueError, match="unknown task 'mmlu'"):
        load_task("mmlu")


def test_network_encoder_offline():
    with pytest.raises(OfflineEncoderError, match=r"unreachable.*'hash'"):
        embed(["a"], "openai", model="emb", base_url="http://127.0.0.1:9/v1")


def test_st_encoder_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(OfflineEncoderError, match="hf-mean"):
        embed(["a"], "st", model="BAAI/bge-m3-not-cached")


def test_mismatched_order_file(tmp_path):
    pool = small_pool(5)
    with pytest.raises(ValueError, match="n = 4 demos but the pool has 5"):
        OrderFile([0, 1, 2, 3], 0.1, "cds", "hash", 71, 4).check(pool)
    pool.seed = 72
    with pytest.raises(ValueError, match=r"seed 71.*seed 72"):
        OrderFile([0, 1, 2, 3, 4], 0.1, "cds", "hash", 71, 5).check(pool)
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ValueError, match="not an order file"):
        OrderFile.load(tmp_path / "x.json")


def test_pool_without_gold_answers():
    rows = [{"problem": "p", "solution": "no box"}, {"problem": "q", "solution": "\\boxed{1}"}]
    assert len(DemoPool.from_dataset(rows, seed=None)) == 1
    with pytest.raises(ValueError, match="no pool item has a parsable gold answer"):
        DemoPool.from_dataset(rows[:1], seed=None)


def test_prompt_over_context_names_k_that_fits(tiny):
    from cds_icl.runner import evaluate, load_task

    data = load_task("synthetic", n_pool=64)
    with pytest.raises(
        ContextLengthError, match=r"tokens \+ 48 new tokens > .* 768; about k = \d+"
    ):
        evaluate(tiny, data, "original", k=64, limit=2, max_new_tokens=48)


def test_cli_errors(capsys):
    from cds_icl.cli import main

    assert main(["order"]) == 2
    assert "needs --pool" in capsys.readouterr().err
    assert main(["eval", "--model", "x", "--seeds", "a,b"]) == 2
    assert CDSInputError.__mro__[1].__name__ == "CDSError"
