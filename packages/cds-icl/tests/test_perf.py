"""Perf tier (wall-clock and cost targets; run serially): CDS ordering time and prefill reuse."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.perf


def test_ordering_time_targets():
    """Ours: n = 128 < 2 s and n = 256 < 15 s on one core (10 starts)."""
    import time

    import numpy as np
    from cds_icl.tsp import cds_order

    for n, limit in ((128, 2.0), (256, 15.0)):
        E = np.random.default_rng(n).normal(size=(n, 64))
        t = time.perf_counter()
        cds_order(E)
        assert time.perf_counter() - t < limit


def test_prefill_reuse_at_k64(tiny):
    """Fixed-block selectors prefill >= 5x fewer tokens per query than KATE at k = 64."""
    from cds_icl.bench import bench_prefill
    from cds_icl.runner import load_task

    model, tok = tiny
    res = bench_prefill(model, tok, load_task("synthetic", n_pool=64), k_time=4, n_queries=16)
    assert res["prefill_ratio"] >= 5, res
