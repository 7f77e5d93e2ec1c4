"""Throughput targets (``perf``, never in parallel): data generation >= 20k examples/s,
exact-match reward >= 50k completions/s."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.perf


def test_throughput_targets():
    from compgen_rl.bench import throughput

    t = throughput(20_000)
    print(t)
    assert t["data_examples_per_s"] >= 20_000
    assert t["reward_completions_per_s"] >= 50_000
