"""The reward table (spec test 5) and the parser."""

from __future__ import annotations

import pytest
from sim2reason.rewards import (
    check_answer,
    eval_reward,
    extract_last_boxed,
    numeric_match,
    sim2reason_reward,
    symbolic_match,
    to_float,
)

TABLE = [
    (2.5, r"\boxed{2.4}", 1.0),
    (2.5, "2.3", 0.0),
    (9.81, "-9.81", 1.0),
    (0.005, "0.04", 1.0),  # absolute branch below thr = 0.01: a documented leniency
    (1000.0, r"1.02 \times 10^{3}", 1.0),
    (7.0, "so the answer is 7", 1.0),
    (7.0, r"\boxed{}", 0.0),
    (0.5, r"\boxed{\frac{1}{2}}", 1.0),
]


@pytest.mark.parametrize(("gt", "pred", "expected"), TABLE)
def test_reward_table(gt, pred, expected):
    assert sim2reason_reward([pred], [gt]) == [expected]


def test_eval_mode_one_percent():
    assert eval_reward(["2.47"], [2.5]) == [0.0]
    assert eval_reward(["2.48"], [2.5]) == [1.0]
    assert sim2reason_reward(["2.47"], [2.5]) == [1.0]


@pytest.mark.parametrize(
    ("text", "value"),
    [("3", 3.0), ("-4.5", -4.5), ("1e-3", 1e-3), (r"\dfrac{3}{4}", 0.75), ("3/4", 0.75),
     (r"2.5 \cdot 10^{-2}", 0.025), (r"9.8\ \text{m/s}^2", 9.8), ("9.8 m/s^2", 9.8),
     (r"x = 12 N", 12.0), (r"$4.9$", 4.9), (r"\sqrt{2}", 2**0.5), ("1,000", 1000.0),
     ("abc", None), ("", None), (r"\frac{1}{0}", None), ("nan", None), ("1e999", None)],
)  # fmt: skip
def test_to_float(text, value):
    got = to_float(text)
    assert (got is None) if value is None else got == pytest.approx(value)


def test_last_box_wins_and_nesting():
    assert extract_last_boxed(r"\boxed{1} then \boxed{\frac{2}{3}}") == r"\frac{2}{3}"
    assert extract_last_boxed("no box 5") == "no box 5"
    assert sim2reason_reward([r"\boxed{2} ... \boxed{5}"], [5.0]) == [1.0]


def test_magnitude_rule_edges():
    assert numeric_match(0.0, 0.0)
    assert numeric_match(0.04, 0.0) and not numeric_match(0.06, 0.0)
    assert not numeric_match(float("nan"), 1.0) and not numeric_match(float("inf"), 1.0)
    assert not numeric_match(None, 1.0)


def test_symbolic_substitution():
    m = {"m_{a}": 2.0, "F_{a}": 6.0, "t": 1.5, r"\theta_{b}": 30.0}
    assert symbolic_match(r"\frac{F_{a} t}{m_{a}}", 4.5, m)
    assert symbolic_match(r"\frac{F_a t}{m_a}", 4.5, m)
    assert symbolic_match(r"g \sin(\theta_{b})", 9.81 / 2, m)  # degrees -> radians
    assert not symbolic_match(r"\frac{F_{a} t}{m_{z}}", 4.5, m)  # unknown symbol: 0
    assert not symbolic_match(r"\frac{F_{a} t}{m_{a}}", 4.5, None)
    rows = sim2reason_reward([r"\boxed{F_{a} t / m_{a}}", r"\boxed{__import__('os')}"],
                             [4.5, 4.5], ["symbolic", "symbolic"], [m, m])  # fmt: skip
    assert rows == [1.0, 0.0]


def test_reward_never_raises():
    bad = [None, 12, [{"role": "assistant"}], r"\boxed{" * 50, "x" * 10_000, r"\boxed{1/0}"]
    out = sim2reason_reward(bad, [1.0] * len(bad))
    assert out == [0.0] * len(bad)
    assert check_answer("3", "not a number")["parse_error"]
    info = check_answer(r"\boxed{3}", 3.0)
    assert info == {"reward": 1.0, "has_boxed": True, "parse_error": False, "pred": 3.0}


def test_chat_completions():
    comp = [[{"role": "assistant", "content": r"so \boxed{4.9}"}]]
    assert sim2reason_reward(comp, [4.905]) == [1.0]


def test_math_verify_fallback():
    pytest.importorskip("math_verify")
    # Not a plain number for the built-in reader; math-verify decides (pi/2 vs 1.5707963...).
    assert check_answer(r"\boxed{\frac{\pi}{2}}", 1.5707963, math_verify=True)["reward"] == 1.0
