"""Registration: method entry point, fixtures, demo."""

from __future__ import annotations

import pytest


def test_method_and_fixtures_are_registered():
    from llmcore.fixtures import discover
    from llmcore.registry import get_method

    assert get_method("sink-probe").demo == "sink_probe.demo:run"
    mine = [f for f in discover().values() if f.package == "sink-probe"]
    assert {f.name for f in mine} == {
        "sink-probe-suppress-massive",
        "sink-probe-suppress-massive-zero-value",
    }
    assert sum(f.cold_seconds for f in mine) <= 6 * 60 * 2  # measured under 2x load


@pytest.mark.slow
def test_demo_runs_on_tiny_llama():
    from sink_probe.demo import run

    out = run(print_table=False)
    assert out["n_texts"] == 32
    # zeroing the sink's value removes the sink token's outsized residual entries
    assert out["zero_sink_value_L3_top1_median"] < out["plain_L3_top1_median"]
