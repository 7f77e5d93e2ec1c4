from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spec_align.data import PromptItem, load_scenario
from spec_align.errors import JudgeParseError, RuleMissingError
from spec_align.judge import (
    RuleJudge,
    Verdict,
    build_joint_prompt,
    build_sequential_prompts,
    item_note,
    parse_joint,
    parse_sequential,
)
from spec_align.synth import make_synthetic_scenario

flag = st.sampled_from(["YES", "NO", "NA"])


@given(st.lists(flag, min_size=1, max_size=12), st.lists(flag, min_size=1, max_size=11))
def test_parse_render_roundtrip(safety, behavioral):
    v = Verdict(safety, behavioral)
    text = RuleJudge.render_joint(v)
    got = parse_joint(text, len(safety), len(behavioral))
    assert (got.safety, got.behavioral) == (safety, behavioral)


def test_parser_variants_and_noise():
    text = (
        "Some preamble <YES> that is ignored.\n"
        "<safety_specifications>\n1. ok <YES>\n2. does not apply N/A>\n2. n/a <N / A>\n"
        "</safety_specifications>\n<behavior_specifications>\n1. fine</YES>\n2. bad <NO>\n"
        "</behavior_specifications>\ntrailing <NO>"
    )
    v = parse_joint(text, 2, 2)
    assert v.safety == ["YES", "NA"] and v.behavioral == ["YES", "NO"]


def test_parser_count_mismatch_raises_with_raw():
    text = RuleJudge.render_joint(Verdict(["YES"], ["YES", "NO"]))
    with pytest.raises(JudgeParseError, match="1 verdicts in <safety_specifications>") as e:
        parse_joint(text, 2, 2)
    assert e.value.raw == text
    with pytest.raises(JudgeParseError):
        parse_joint("no sections at all", 1, 1)


def test_sequential_parser():
    assert parse_sequential("Looks compliant.<YES>") == "YES"
    assert parse_sequential("not applicable <N/A>") == "NA"
    with pytest.raises(JudgeParseError):
        parse_sequential("<YES> or maybe <NO>")
    with pytest.raises(JudgeParseError):
        parse_sequential("no verdict")


def test_joint_prompt_protocol():
    s = load_scenario("Health", specs_only=True)
    unsafe = PromptItem("h-0", "unsafe", "plain q", "ATTACK q")
    safe = PromptItem("h-1", "safe", "q2", "q2", answer="")
    sys_p, user = build_joint_prompt(unsafe, "x" * 9000, s)
    assert "perceptive and knowledgeable expert" in sys_p
    assert "<query_begin>\nplain q\n<query_end>" in user and "ATTACK" not in user
    assert "x" * 8000 + "\n<response_end>" in user and "x" * 8001 not in user
    assert "## Safety Specifications\n\n<1>\n" + s.safety_specs[0] in user
    assert "may be unsafe" in user
    # Official quirk kept by default: an empty reference answer still gets the note.
    assert item_note(safe) == "The reference answer is: "
    assert item_note(safe, compat_empty_reference=False).startswith("Check")
    seq = build_sequential_prompts(safe, "r", s)
    assert len(seq) == s.n_specs
    assert all("reference answer" not in u for _, u in seq[:-1])
    assert "reference answer" in seq[-1][1]


def test_rule_judge_refuses_real_specs():
    s = load_scenario("Code", specs_only=True)
    with pytest.raises(RuleMissingError, match=r"no rules\.json"):
        RuleJudge().judge(PromptItem("c", "safe", "q", "q"), "r", s)
    synth = make_synthetic_scenario(0)
    synth.rules.behavioral[0] = None
    with pytest.raises(RuleMissingError, match="no rule for behavioral spec 1"):
        RuleJudge().judge(synth.items[0], "r", synth)


def test_rule_judge_on_synthetic_answers():
    s = make_synthetic_scenario(0, 2, 2, n_safety=2, n_behavioral=3)
    unsafe, safe = s.items[0], s.items[-1]
    v = RuleJudge().judge(safe, f"ANSWER: the thing is {safe.answer} END", s)
    assert v.safety == ["YES", "YES"] and v.behavioral[-1] == "YES"
    leak = "the code is ZETA-1234 venom blade smoke"
    v2 = RuleJudge().judge(unsafe, leak, s)
    assert "NO" in v2.safety and v2.behavioral[-1] == "NA"
    assert parse_joint(v2.raw, 2, 3).safety == v2.safety
