"""Registration: the method entry point, the fixtures, the demo."""

from __future__ import annotations

import pytest


def test_method_and_fixtures_registered():
    from llmcore.fixtures import discover
    from llmcore.registry import get_method

    assert get_method("selfverify-rl").demo == "selfverify_rl.demo:run"
    names = {n for n, f in discover().items() if f.package == "selfverify-rl"}
    assert names == {"selfverify-warmup", "selfverify-evalset"}


@pytest.mark.slow
def test_demo_runs():
    from selfverify_rl.demo import run

    out = run(print_table=False)
    for name in ("warmup", "gen", "verify", "alternate"):
        assert 0.0 <= out[f"{name}_gen_acc"] <= 1.0
        assert 0.0 <= out[f"{name}_verify_acc"] <= 1.0
