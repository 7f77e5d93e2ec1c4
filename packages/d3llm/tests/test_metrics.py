"""AUP and TPF: golden values from the official leaderboard data, invariances, bad input."""

from __future__ import annotations

import math

import pytest
from d3llm.errors import D3LLMConfigError
from d3llm.metrics import aup, aup_table, aup_weight, read_points, tpf, write_points
from hypothesis import given, settings
from hypothesis import strategies as st

GOLDEN = [
    ([(1, 74.02), (9.11, 73.09)], 74.98, 637.6549),
    ([(1, 74.0), (5.14, 72.63)], 74.98, 358.1422),
    ([(1, 74.79), (2.77, 74.68)], 74.98, 205.7811),
    ([(1, 72.55)], 74.98, 72.55),
    ([(1, 80), (2, 80), (4, 78)], 80, 312.3640),
    ([(1, 80), (3, 70)], 80, 80.0),
]


@pytest.mark.parametrize("pts,y_max,expected", GOLDEN)
def test_aup_golden(pts, y_max, expected):
    rho, y = zip(*pts, strict=True)
    assert aup(rho, y, y_max) == pytest.approx(expected, abs=1e-4)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.5, 20), st.floats(60, 100)),
        min_size=1,
        max_size=6,
        unique_by=lambda p: p[0],
    ),
    st.randoms(use_true_random=False),
)
def test_aup_order_invariant(pts, rnd):
    rho, y = zip(*pts, strict=True)
    shuffled = list(pts)
    rnd.shuffle(shuffled)
    r2, y2 = zip(*shuffled, strict=True)
    assert aup(rho, y, 100.0) == pytest.approx(aup(r2, y2, 100.0), rel=1e-12)


def test_aup_single_point_and_weight_cap():
    assert aup([2.5], [40.0], 90.0) == pytest.approx(100.0)
    assert aup_weight(85.0, 80.0) == 1.0
    assert aup_weight(40.0, 80.0) == pytest.approx(math.exp(-1.5))


def test_aup_raise_mode_and_bad_input():
    with pytest.raises(D3LLMConfigError, match="drops"):
        aup([1, 3], [80, 70], 80, on_large_drop="raise")
    with pytest.raises(D3LLMConfigError, match="rho has 2 points"):
        aup([1, 2], [50.0], 80)
    with pytest.raises(D3LLMConfigError, match="at least one"):
        aup([], [], 80)
    with pytest.raises(D3LLMConfigError, match="> 0"):
        aup([0.0], [50.0], 80)
    with pytest.raises(D3LLMConfigError, match=r"\[0, 100\]"):
        aup([1.0], [150.0])
    with pytest.raises(D3LLMConfigError, match="y_max"):
        aup([1.0, 2.0], [50.0, 60.0], 55.0)
    with pytest.raises(D3LLMConfigError, match="alpha"):
        aup([1.0], [50.0], 60, alpha=0)
    with pytest.warns(UserWarning, match="0-1 scale"):
        aup([1.0, 2.0], [0.7, 0.68], 0.7)


def test_tpf_and_points_roundtrip(tmp_path):
    assert tpf([10, 6], [4, 4]) == 2.0
    assert tpf([99, 10, 6], [1, 4, 4], skip=1) == 2.0
    with pytest.raises(D3LLMConfigError):
        tpf([1], [1, 2])
    pts = {"gsm8k": {"d3LLM": [[1, 74.02], [9.11, 73.09]], "LLaDA": [[1, 74.98]]}}
    p = write_points(tmp_path / "points.yaml", pts)
    assert read_points(p) == {k: {m: [[float(a), float(b)] for a, b in v] for m, v in d.items()}
                              for k, d in pts.items()}  # fmt: skip
    table = aup_table(read_points(p))
    assert table["gsm8k"]["d3LLM"] == pytest.approx(637.6549, abs=1e-4)
    (tmp_path / "bad.yaml").write_text("gsm8k: {m: [[1, 2, 3]]}\n")
    with pytest.raises(D3LLMConfigError, match="rho, acc"):
        read_points(tmp_path / "bad.yaml")
