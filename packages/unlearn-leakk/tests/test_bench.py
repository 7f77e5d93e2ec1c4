"""Bench building blocks (the full bench runs from the CLI; see the README)."""

from __future__ import annotations

import math

import pytest
from unlearn_leakk.bench import _clean, estimator_cost, throughput


def test_throughput_measures_both_modes(world_model, world):
    model, tok = world_model
    r = throughput(model, tok, world.qa_items([0])[:2], n=4, max_new_tokens=6)
    for mode in ("batched", "loop"):
        assert r[f"{mode}_samples_per_s"] > 0 and r[f"{mode}_tokens_per_s"] > 0
    assert math.isclose(r["speedup"], r["batched_samples_per_s"] / r["loop_samples_per_s"])


def test_clean():
    assert _clean({"a": [float("nan"), 1.0]}) == {"a": [None, 1.0]}


@pytest.mark.perf
def test_estimator_cost():
    assert estimator_cost() < 1.0
