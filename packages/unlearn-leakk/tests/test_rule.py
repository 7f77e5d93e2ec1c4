"""RULE (reconstructed) mechanics: mining, augmentation, weights, history."""

from __future__ import annotations

import pytest
from unlearn_leakk.config import DecodingConfig, RULEConfig, UnlearnConfig
from unlearn_leakk.data import LeakItem
from unlearn_leakk.errors import LeakConfigError
from unlearn_leakk.rule import leakk_weights, mine_queries, rule_unlearn


def test_rule_round_mines_and_trains(world_model, world):
    model, tok = world_model
    forget = world.qa_items([0])
    retain = world.qa_items([8, 9], split="retain")
    base = UnlearnConfig("GradDiff", lr=1e-3, batch_size=8, grad_accum=1, warmup_epochs=0.0)
    cfg = RULEConfig(
        base=base,
        rounds=1,
        n_mine=4,
        epochs_per_round=1.0,
        mine_decoding=DecodingConfig(1.0, 1.0, n=4, max_new_tokens=12, seed=1),
    )
    model, hist = rule_unlearn(
        model, tok, forget, retain, cfg, init_unlearned=model, retain_eval=retain
    )
    (r,) = hist.rounds
    # the original model knows every forget fact, so mining finds leaks and training runs
    assert r.n_leaks > 0 and r.n_leak_items_total > 0 and r.train_steps >= 1
    assert r.leak_at_k[1] > 0 and 0.0 <= r.retain_acc <= 1.0
    assert hist.extra_steps == r.train_steps


def test_leakk_weights_and_mining_queries():
    items = [
        LeakItem("a", "q", "x"),
        LeakItem("a-leak1-0", "q", "x", meta={"source": "a"}),
        LeakItem("b-leak1-0", "q2", "y", meta={"source": "b"}),
    ]
    w = leakk_weights(items, {"a": 0.0, "b": 0.5}, k_target=4)
    assert sum(w) / len(w) == pytest.approx(1.0)
    assert w[1] > w[2]  # rarely leaking queries get the larger leak@k gradient weight
    q = mine_queries([LeakItem("a", "para", "x", meta={"question": "orig"})], True)
    assert [x.question for x in q] == ["para", "orig"]


def test_rule_bad_config(world_model, world):
    model, tok = world_model
    with pytest.raises(LeakConfigError, match="RULEConfig"):
        rule_unlearn(model, tok, world.qa_items([0]), None, UnlearnConfig())
