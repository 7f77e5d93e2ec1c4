"""Bad input gets clear errors naming the bad value and the fix."""

from __future__ import annotations

import pytest
from pfa_learnability import (
    PFA,
    BinError,
    CustomProperty,
    MaxLengthError,
    NonTightAutomatonError,
    PFAValidationError,
    PropertyError,
    count_distribution,
    sample_conditioned,
    sample_corpus,
)
from pfa_learnability.errors import PFALearnabilityError


def test_error_hierarchy():
    from llmcore.errors import LLMCoreError

    assert issubclass(PFALearnabilityError, LLMCoreError)
    assert issubclass(NonTightAutomatonError, ValueError)
    assert issubclass(MaxLengthError, RuntimeError)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(arcs=[(0, "a", 0, 0.6)], final=[0.5]), "state 0 is not normalised"),
        (dict(arcs=[(0, "a", 0, -0.1)], final=[1.1]), "negative"),
        (dict(arcs=[(0, "a", 3, 0.5)], final=[0.5]), "unknown state 3"),
        (dict(arcs=[(0, "z", 0, 0.5)], final=[0.5]), "'z' outside the alphabet"),
        (dict(alphabet=[], arcs=[], final=[1.0]), "empty alphabet"),
        (dict(initial=[0.5], arcs=[], final=[1.0]), "initial weights sum"),
    ],
)
def test_malformed_automata(kwargs, match):
    base = dict(n_states=1, alphabet=["a"], initial=[1.0])
    with pytest.raises(PFAValidationError, match=match):
        PFA(**{**base, **kwargs})


def test_non_tight_names_the_scc():
    arcs = [(0, "a", 1, 0.5), (1, "a", 2, 1.0), (2, "b", 1, 1.0)]
    with pytest.raises(NonTightAutomatonError, match=r"\[1, 2\]"):
        PFA(3, ["a", "b"], [1, 0, 0], arcs, [0.5, 0, 0])


def test_bins_and_properties():
    p = PFA.random(seed=3)
    with pytest.raises(BinError, match="B must be an integer >= 1"):
        count_distribution(p, "sym:b", 0)
    with pytest.raises(PropertyError, match="matches no arc"):
        count_distribution(p, "enter:0", 4)  # nothing re-enters the start state here
    with pytest.raises(PropertyError, match="cannot parse"):
        count_distribution(p, "state:3", 4)
    with pytest.raises(PropertyError, match="not in"):
        count_distribution(p, "sym:zz", 4)
    with pytest.raises(PropertyError, match="negative increment"):
        count_distribution(p, CustomProperty(lambda q, a, q2: -1), 4)


def test_zero_mass_bin_names_achievable_bins():
    one = PFA(2, ["a"], [1, 0], [(0, "a", 1, 1.0)], [0.0, 1.0])  # exactly one "a"
    with pytest.raises(BinError, match=r"bin 0 has zero probability mass.*achievable bins: \[1\]"):
        sample_conditioned(one, "sym:a", 0, B=3, n=5)


def test_tilt_out_of_reach():
    one = PFA(2, ["a"], [1, 0], [(0, "a", 1, 0.5)], [0.5, 1.0])  # at most one "a"
    with pytest.raises(BinError, match="out of reach"):
        sample_corpus(one, "sym:a", f=3.0, n=5)
    p = PFA.random(seed=3)
    with pytest.raises(BinError, match="larger B"):
        sample_corpus(p, "sym:b", f=4.0, n=5, B=2, tilt_method="bins")
    with pytest.raises(BinError, match="never occurs"):
        sample_corpus(p, "enter:2", f=2.0, n=5)  # state 2 is unreachable in this automaton
    with pytest.raises(BinError, match="positive"):
        sample_corpus(p, "sym:b", f=-1.0, n=5)


def test_max_length_raises_with_state_trace():
    slow = PFA(1, ["a"], [1.0], [(0, "a", 0, 0.999)], [0.001])
    with pytest.raises(MaxLengthError, match=r"max_length=20.*last states"):
        slow.sample(50, seed=0, max_length=20)


def test_bad_sampling_mode():
    with pytest.raises(BinError, match="cannot parse sampling mode"):
        sample_corpus(PFA.random(seed=3), "sym:b", mode="sometimes", n=5)
