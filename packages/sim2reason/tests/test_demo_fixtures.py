"""The demo, the registered fixtures and the method entry."""

from __future__ import annotations


def test_demo_runs_the_pipeline_and_checker():
    from sim2reason.demo import run

    out = run()
    assert out["scenes"] == 19 * 5 and out["dropped_scenes"] == 0  # every scene type simulates
    assert out["questions_after_filter_and_dedup"] > 100
    assert out["rewards"] == {"exact": 1.0, "4% off": 1.0, "10% off": 0.0, "no box": 1.0}


def test_registered():
    from llmcore.fixtures import discover
    from llmcore.registry import get_method

    names = set(discover())
    assert {"sim2reason-warm", "sim2reason-grpo-arm"} <= names
    assert get_method("sim2reason").demo == "sim2reason.demo:run"
