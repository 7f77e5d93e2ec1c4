"""Reward 1/0 (no ``ans=`` -> 0, never raises) and the enrichment rate of the identification
analysis checked by Monte-Carlo REINFORCE."""

from __future__ import annotations

import pytest
from compgen_rl.hlsm import Program
from compgen_rl.rewards import exact_match_reward, step_accuracy, trl_reward_funcs
from compgen_rl.theory import enrichment_rate, reinforce_gradient_mc


def test_exact_match_reward():
    assert exact_match_reward(
        ["h1=ab\nans=ba\n", "ans=ba   ", "ans=bb", "ba", "", None, 3], ["ba"] * 7
    ) == [
        1.0,
        1.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ]
    assert exact_match_reward([[{"role": "assistant", "content": "ans=x"}]], ["x"]) == [1.0]


def test_step_accuracy():
    p = Program((("chain", "rev"), ("chain", "inc"))).to_json()
    assert step_accuracy(["h1=dcba\nh2=edcb\nans=edcb"], [p], input=["abcd"]) == [1.0]
    assert step_accuracy(["h1=dcba\nh2=zzzz\nans=edcb"], [p], ["x=abcd p=r0.k0 r0.k2\n"]) == [0.5]
    assert step_accuracy(["garbage"], ["not json"], input=["abcd"]) == [0.0]


def test_trl_reward_funcs_never_raise():
    funcs, weights = trl_reward_funcs()
    assert weights == [1.0, 0.0]
    em, sa = funcs
    assert em(["p"], ["ans=a"], answer=["a"], trainer_state=None) == [1.0]
    assert em(["p"], [object()], answer=[None]) == [0.0]
    assert sa(["p"], ["h1=a"], program=["{bad"], input=["ab"]) == [0.0]


def test_reinforce_matches_enrichment_rate():
    p0, r_e, r_not = 0.3, 0.75, 0.25
    expected = enrichment_rate(p0, r_e - r_not)
    assert expected == pytest.approx(0.3 * 0.7 * 0.5)
    est = reinforce_gradient_mc(p0, r_e, r_not, n=10**6, seed=0)
    assert abs(est - expected) <= 0.03 * expected


@pytest.mark.parametrize("p0", [0.0, 1.0])
def test_no_enrichment_when_unreachable_or_saturated(p0):
    assert enrichment_rate(p0, 0.5) == 0.0
    assert reinforce_gradient_mc(p0, 0.9, 0.1, n=10_000) == 0.0


def test_no_enrichment_without_reward_information():
    assert enrichment_rate(0.4, 0.0) == 0.0


def test_fast_reward_path_agrees_with_parser():
    from compgen_rl.hlsm import extract_answer

    texts = ["ans=a", "h1=b\nans=a \n", "xans=q\n", "ans=a\nans=b", "ans=a\r\nans=b\r\n", "ans=a\u2028ans=c",
             "no answer", '{"output": "z"}', "h1=a\nans=\n", "ans=a\nh2=b\n"]  # fmt: skip
    for t in texts:
        gold = extract_answer(t)
        if gold is None:
            assert exact_match_reward([t], ["a"]) == [0.0]
        else:
            assert exact_match_reward([t], [gold]) == [1.0], t
