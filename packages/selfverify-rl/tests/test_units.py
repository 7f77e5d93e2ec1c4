"""Unit and property tests of the builder, prompts, rewards, buffer, schedule and config."""

from __future__ import annotations

import random

import pytest
from selfverify_rl.prompts import extract_question, generation_prompt, verification_prompt
from selfverify_rl.rewards import (
    extract_boxed,
    generation_reward,
    normalize_answer,
    overlong_penalty,
    parse_verdict,
    verification_reward,
)
from selfverify_rl.sampling import Rollout, VerificationBuffer, build_verification_samples


def group(pid: str, n_right: int, n: int = 8, n_invalid: int = 0) -> list[Rollout]:
    out = []
    for j in range(n):
        if j < n_invalid:
            out.append(Rollout(pid, pid, f"no box {pid}{j}", 0.0, False))
            continue
        right = j - n_invalid < n_right
        ans = "5" if right else "6"
        out.append(Rollout(pid, pid, f"work {pid}{j} \\boxed{{{ans}}}", float(right), True))
    return out


def test_builder_mixed_groups_exact():
    """Spec unit 1: A 3/8, B 8/8, C 0/8, D 1/8 -> 2 Yes (A, D) + 2 No (A, D); C unused."""
    rollouts = group("A", 3) + group("B", 8) + group("C", 0) + group("D", 1)
    for seed in range(20):
        out = build_verification_samples(rollouts, 8, rng=random.Random(seed))
        assert sorted((s.label, s.problem_id) for s in out) == [
            ("No", "A"), ("No", "D"), ("Yes", "A"), ("Yes", "D"),
        ]  # fmt: skip
        st = out.stats
        assert (st.n_groups, st.all_wrong_rate, st.all_right_rate) == (4, 0.25, 0.25)
        rates = {s.problem_id: s.pass_rate for s in out}
        assert rates == {"A": 3 / 8, "D": 1 / 8}
        for s in out:  # candidates come from the right class of rollout
            assert rollouts[s.source_index].reward == (1.0 if s.label == "Yes" else 0.0)
            assert rollouts[s.source_index].problem_id == s.problem_id


def test_builder_missing_class_is_unbalanced_and_logged(caplog):
    """Groups 7/8, 8/8, 0/8, 8/8: half=2 but one wrong candidate exists -> 2 Yes + 1 No."""
    rollouts = group("A", 7) + group("B", 8) + group("C", 0) + group("D", 8)
    with caplog.at_level("INFO", logger="selfverify_rl.sampling"):
        out = build_verification_samples(rollouts, 8, rng=random.Random(0))
    labels = [s.label for s in out]
    assert labels.count("Yes") == 2 and labels.count("No") == 1
    assert not out.stats.balanced
    assert "unbalanced" in caplog.text


def test_builder_pass_rate_denominator_is_n_and_invalid_dropped():
    rollouts = group("A", 2, n_invalid=4)  # 4 invalid, 2 right, 2 wrong
    out = build_verification_samples(rollouts, 8, rng=random.Random(0))
    assert out.stats.n_invalid == 4 and out.stats.n_groups == 1
    assert all(s.pass_rate == 2 / 8 for s in out)
    assert all(rollouts[s.source_index].valid for s in out)
    # one group -> half = 0 -> nothing; two such groups -> one of each
    two = build_verification_samples(rollouts + group("B", 2, n_invalid=4), 8)
    assert sorted(s.label for s in two) == ["No", "Yes"]


def test_judge_modes_show_answer_or_response():
    """Spec unit 2: judge_answer never shows the reasoning; judge_response shows it verbatim."""
    rollouts = group("A", 4) + group("B", 4)
    for s in build_verification_samples(rollouts, 8, "judge_answer"):
        src = rollouts[s.source_index].completion
        assert "work" not in s.prompt and src not in s.prompt
        assert s.candidate in ("5", "6")
    for s in build_verification_samples(rollouts, 8, "judge_response"):
        assert rollouts[s.source_index].completion in s.prompt


def test_prompt_styles_and_question_extraction():
    q = "12+34"
    assert extract_question(generation_prompt(q)) == q
    assert "34" in verification_prompt(q, "46") and "46" in verification_prompt(q, "46")


def test_chat_style_without_template_errors(tiny_tok):
    from selfverify_rl.errors import SelfVerifyConfigError

    class NoTemplate:
        chat_template = None

    with pytest.raises(SelfVerifyConfigError, match="style='plain'"):
        generation_prompt("1+1", "chat", NoTemplate())
    p = generation_prompt("1+1", "chat", tiny_tok)
    assert p != generation_prompt("1+1") and "1+1" in p
    assert extract_question(p, tiny_tok) == "1+1"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("\\boxed{Yes}", "Yes"),
        ("\\boxed{ yes }", "Yes"),
        ("\\boxed{NO}", "No"),
        ("\\boxed{Yes} then \\boxed{No}", "No"),
        ("\\boxed{\\text{Yes}}", "Yes"),
        ("\\boxed{maybe}", None),
        ("Yes", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_verdict(text, verdict):
    """Spec unit 3: last boxed wins, case/space tolerant, anything else None (reward 0)."""
    assert parse_verdict(text) == verdict
    r = verification_reward([""], [text], task=["verify"], label=["Yes"], pass_rate=[1.0])
    assert r == [0.5 if verdict == "Yes" else 0.0]


def test_rewards_none_on_other_task_rows():
    """Spec unit 4: None exactly on the other task's rows; lengths always match."""
    comps = ["\\boxed{5}", "\\boxed{Yes}", "junk", "\\boxed{No}", "\\boxed{6}"]
    tasks = ["gen", "verify", "gen", "verify", "gen"]
    kw = dict(task=tasks, answer=["5", None, "5", None, "5"], label=[None, "Yes", None, "Yes", None],
              pass_rate=[None, 0.25, None, 0.9, None])  # fmt: skip
    g = generation_reward([""] * 5, comps, **kw)
    v = verification_reward([""] * 5, comps, **kw)
    assert g == [1.0, None, 0.0, None, 0.0]
    assert v == [None, 0.25, None, 0.0, None]
    assert [x is None for x in g] == [t != "gen" for t in tasks]
    assert [x is None for x in v] == [t != "verify" for t in tasks]


@pytest.mark.parametrize("bad", [None, 3, b"\\boxed{5}", "\\boxed{", "\\boxed{" * 500, [{"x": 1}]])
def test_rewards_never_raise(bad):
    assert generation_reward([""], [bad], task=["gen"], answer=["5"]) == [0.0]
    assert verification_reward([""], [bad], task=["verify"], label=["Yes"], pass_rate=[0.5]) == [
        0.0
    ]


def test_chat_completions_are_read():
    msgs = [[{"role": "assistant", "content": "so \\boxed{5}"}]]
    assert generation_reward([""], msgs, task=["gen"], answer=["5"]) == [1.0]


def test_pass_rate_weighting_cancels_in_group_advantages():
    """Spec unit 5: the min(p, 0.5) factor leaves std-normalised group advantages unchanged."""
    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(200):
        g = int(rng.integers(2, 17))
        verdicts = rng.choice(["\\boxed{Yes}", "\\boxed{No}", "none"], size=g).tolist()
        label, p = str(rng.choice(["Yes", "No"])), float(rng.uniform(0.05, 1.0))
        kw = dict(task=["verify"] * g, label=[label] * g, pass_rate=[p] * g)
        a = np.array(verification_reward([""] * g, verdicts, pass_rate_weighting=True, **kw))
        b = np.array(verification_reward([""] * g, verdicts, pass_rate_weighting=False, **kw))

        def adv(r):  # trl's scale_rewards="group": (r - mean) / (std + 1e-4)
            return (r - r.mean()) / (r.std(ddof=1) + 1e-4)

        if b.std() > 0:
            assert np.abs(adv(a) - adv(b)).max() < 1e-2 * (1 / min(p, 0.5))
            assert np.allclose(adv(a), adv(b), atol=1e-4 / min(p, 0.5) * 10)
            # exactly equal up to the epsilon: compare with eps -> 0
            assert np.allclose((a - a.mean()) / a.std(), (b - b.mean()) / b.std(), atol=1e-4)


def test_schedule_and_buffer_flush():
    """Spec unit 6: interval 5, looplen 1 -> G,G,G,G,G,V,G,...; buffer empty after each V."""
    from selfverify_rl.trainer import RoundSchedule

    sched = RoundSchedule("alternate", interval=5, looplen=1)
    kinds = "".join("G" if sched.kind(s) == "gen" else "V" for s in range(13))
    assert kinds == "GGGGGVGGGGGVG"
    buf = VerificationBuffer()
    rollouts = group("A", 3) + group("B", 5)
    for step in range(18):
        if sched.kind(step) == "gen":
            buf.append(build_verification_samples(rollouts, 8))
        else:
            buf.shuffle(random.Random(step))
            assert len(buf.chunk(2)) == 2
        if sched.flush_after(step):
            buf.flush()
            assert len(buf) == 0
    assert [RoundSchedule("alternate", 2, 2).kind(s) for s in range(4)] == [
        "gen", "gen", "verify", "verify",
    ]  # fmt: skip
    st = RoundSchedule("stagewise", stagewise_verify_steps=2)
    assert [st.kind(s) for s in range(4)] == ["verify", "verify", "gen", "gen"]


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("1,000", "1000"), ("x = 5", "5"), ("\\text{5}", "5"), ("\\boxed{42}", "42"),
     ("$7$", "7"), ("\\frac12", "\\frac{1}{2}"), ("12 cm", "12"), ("a=b=3", "3")],
)  # fmt: skip
def test_normalisation_table(raw, norm):
    """Spec unit 7 (normalisation)."""
    assert normalize_answer(raw) == norm


@pytest.mark.parametrize(
    ("length", "expected"), [(100, 0.0), (512, 0.0), (768, -0.5), (1024, -1.0), (900, -0.7578125)]
)
def test_overlong_penalty_values(length, expected):
    """Spec unit 7 (overlong): L_max 1024, buffer 512, factor 1."""
    assert overlong_penalty(length, 1024, 512, 1.0) == pytest.approx(expected)
    r = generation_reward([""], ["\\boxed{5}"], task=["gen"], answer=["5"],
                          completion_ids=[[0] * length], max_completion_length=1024,
                          overlong_buffer=512)  # fmt: skip
    assert r == [pytest.approx(1.0 + expected)]


def test_extract_boxed_tail_only():
    assert extract_boxed("\\boxed{1}" + "x" * 400) is None
    assert extract_boxed("x" * 400 + "\\boxed{2}") == "2"
    assert extract_boxed("\\boxed{1} pad \\boxed{3}") == "3"


def test_buffer_chunk_and_flush():
    buf = VerificationBuffer()
    buf.append(build_verification_samples(group("A", 3) + group("B", 5), 8))
    n = len(buf)
    assert len(buf.chunk(1)) == 1 and len(buf) == n - 1
    assert buf.flush() == n - 1 and len(buf) == 0


def test_sft_marker_is_the_prompt_newline(tiny_tok):
    """The warm-up's completion-only loss starts after the prompt's newline (id 206)."""
    from selfverify_rl.experiments import _newline_id
    from selfverify_rl.warmup import WarmupSpec, warmup_corpus

    assert tiny_tok("\n", add_special_tokens=False)["input_ids"] == [_newline_id()]
    for doc in warmup_corpus(WarmupSpec(n_docs=50)):
        prompt, _, response = doc.partition("\n")
        assert response and "\n" not in response and prompt.endswith((".", "No."))


def test_arithmetic_task_and_scratchpad():
    from selfverify_rl.tasks import ArithmeticTask, scratchpad

    assert scratchpad(936 - 7, 7) == "9+7=16 c1|2+0+1=3|9+0=9|"
    assert ArithmeticTask.solution("47+89") == "7+9=16 c1|4+8+1=13 c1|c1|\\boxed{136}"
    rows = ArithmeticTask(digits=2, seed=1).problems(50)
    assert len({r["question"] for r in rows}) == 50
    assert all(int(r["answer"]) == sum(map(int, r["question"].split("+"))) for r in rows)
