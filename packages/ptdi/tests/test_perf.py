"""Wall-clock targets (``nox -s perf``, run alone): selection and evaluation speed."""

from __future__ import annotations

import pytest
from ptdi.bench import bench_evaluate, bench_select


@pytest.mark.perf
def test_select_speed():
    """ptdi_select for n = 1e5, m = 1e6 under 2 s on one core; its BH stage within 2x of
    statsmodels' multipletests on the same p-values (same selection, checked in the bench)."""
    r = bench_select()
    print(f"\n{r}")
    assert r["ptdi_select_s"] < 2.0
    assert r["bh_select_s"] <= 2 * r["statsmodels_s"]


@pytest.mark.perf
def test_evaluate_speed():
    r = bench_evaluate(1000, 2000)
    print(f"\n{r}")
    assert r["evaluate_s"] < 5.0
