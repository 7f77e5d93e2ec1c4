"""The demo entry and the fixture registration."""

from __future__ import annotations

import pytest


def test_fixtures_registered():
    from llmcore.fixtures import discover

    names = set(discover())
    assert {"edit-collapse-world", "edit-collapse-sessions"} <= names


@pytest.mark.slow
def test_demo_runs_on_tiny_llama():
    from edit_collapse.demo import run

    out = run()
    for m in ("ft-m", "rome", "memit", "alphaedit", "retrieval"):
        assert 0.0 <= out[f"{m}_rel"] <= 1.0 and 0.0 <= out[f"{m}_loc"] <= 1.0
    assert out["retrieval_arith_kept"] is not None
