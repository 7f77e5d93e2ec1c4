"""Registration (method, fixtures) and the demo on the demo-size teacher."""

from __future__ import annotations

import pytest


def test_method_and_fixtures_registered():
    from importlib.metadata import entry_points

    import d3llm
    from d3llm.fixtures import FIXTURES

    eps = {e.name: e for e in entry_points(group="llmcore.methods")}
    assert eps["d3llm"].load() is d3llm.METHOD
    assert d3llm.METHOD.demo == "d3llm.demo:run"
    names = [f.name for f in FIXTURES]
    assert names == [
        "d3llm-teacher",
        "d3llm-trajectories",
        "d3llm-student",
        "d3llm-demo-teacher",
        "d3llm-demo-student",
    ]
    assert all(f.cold_seconds > 0 for f in FIXTURES)


@pytest.mark.slow
def test_demo_runs_and_decoders_agree_on_parallelism():
    """The demo decodes 32 prompts three ways: vanilla is one position per forward, the
    parallel decoders need fewer forwards."""
    from d3llm.demo import run

    out = run(print_table=False)
    assert out["vanilla_tpf"] <= 1.0 < out["multiblock-0.5_tpf"]
    assert out["vanilla_tpf"] < out["confidence-0.9_tpf"]
    for k in ("vanilla", "confidence-0.9", "multiblock-0.5"):
        assert 0.0 <= out[f"{k}_accuracy"] <= 1.0
