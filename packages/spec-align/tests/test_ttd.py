"""Call structure and degenerate equivalences, counted on the real tiny HF backend."""

from __future__ import annotations

import pytest
from spec_align.bench import _reward_for
from spec_align.judge import RuleJudge
from spec_align.prompts import TINY_TEMPLATES
from spec_align.ttd import (
    TPO,
    Align3,
    BestOfN,
    MoreThink,
    SelfRefine,
    Vanilla,
    ZeroThink,
    get_method,
    split_thought,
)

T = TINY_TEMPLATES


def _calls(backend, fn):
    before = backend.calls
    out = fn()
    return out, backend.calls - before


def test_align3_three_calls_with_staged_prefixes(tiny, synth):
    items = synth.items[:2] + synth.items[-2:]
    res, calls = _calls(tiny, lambda: Align3(templates=T).run_batch(items, synth, tiny))
    assert calls == 3 * len(items)
    s1, s2, s3 = T.stages(synth)
    assert s1.startswith("<think>") and all(x.endswith("So") for x in (s1, s2, s3))
    # Behavioral specs in stage 1, safety specs only from stage 2 on.
    assert all(b in s1 for b in synth.behavioral_specs)
    assert not any(x in s1 for x in synth.safety_specs)
    assert all(x in s2 for x in synth.safety_specs)
    assert all(x in s3 for x in [*synth.safety_specs, *synth.behavioral_specs])
    for r in res:
        assert r.calls == 3
        (a, b, c) = r.trace
        assert a["prefix"] == s1 and a["stop"] == ["</think>"]
        assert b["prefix"] == s1 + a["text"].rstrip() + "\n\n" + s2 and b["stop"] == ["</think>"]
        assert c["prefix"] == b["prefix"] + b["text"].rstrip() + "\n\n" + s3 and c["stop"] is None
        assert "</think>" not in a["text"] + b["text"]
        if not r.missing_think_close:
            assert r.thought.startswith(c["prefix"])
            assert r.response == split_thought(c["text"])[1]
        # Prompt tokens are counted once (stage 1); prefill counts every stage.
        assert r.usage["prompt_tokens"] < r.usage["prefill_tokens"]


def test_more_think_calls_and_wait_joins(tiny, synth):
    items = synth.items[:2]
    res, calls = _calls(tiny, lambda: MoreThink(3, templates=T).run_batch(items, synth, tiny))
    assert calls == 6
    for r in res:
        a, b, c = r.trace
        assert a["prefix"] == "<think>"
        assert b["prefix"] == "<think>" + a["text"].rstrip() + "\n\n" + T.rethink
        assert (
            c["prefix"] == b["prefix"] + b["text"].rstrip() + "\n\n" + T.rethink
            and c["stop"] is None
        )


def test_zero_think_prefix(tiny, synth):
    r, calls = _calls(tiny, lambda: ZeroThink(templates=T).run(synth.items[0], synth, tiny))
    assert calls == 1 and r.trace[0]["prefix"] == "<think>\n</think>" and r.thought == "<think>\n"


def test_self_refine_calls_and_history(tiny, synth):
    m = SelfRefine(max_iters=2, max_history_length=1, templates=T)
    r, calls = _calls(tiny, lambda: m.run(synth.items[0], synth, tiny))
    assert calls == 5 and r.calls == 5 and r.thought == ""
    kinds = [t["kind"] for t in r.trace]
    assert kinds == ["chat", "feedback", "refine", "feedback", "refine"]
    last_refine = r.trace[-1]["messages"][1]["content"]
    assert "<RESPONSE_1>" in last_refine and "<RESPONSE_2>" not in last_refine
    # The query shown is the (adversarial) generation prompt, not the augmented one.
    assert synth.items[0].adversarial_prompt in r.trace[1]["messages"][0]["content"]
    assert "Recall the specs" not in r.trace[1]["messages"][0]["content"]
    m2 = SelfRefine(max_iters=2, max_history_length=2, templates=T)
    r2 = m2.run(synth.items[0], synth, tiny)
    assert "<RESPONSE_2>" in r2.trace[-1]["messages"][1]["content"]


def test_degenerate_equivalences(tiny, synth):
    items = synth.items[:3] + synth.items[-3:]
    van = Vanilla(T).run_batch(items, synth, tiny, temperature=1.0, seed=5)
    sr0 = SelfRefine(max_iters=0, templates=T).run_batch(
        items, synth, tiny, temperature=1.0, seed=5
    )
    assert [r.response for r in sr0] == [r.response for r in van]
    reward = _reward_for(RuleJudge(), synth)
    bon = BestOfN(1, reward, templates=T).run_batch(items, synth, tiny, temperature=1.0, seed=5)
    assert [r.response for r in bon] == [r.response for r in van]
    mt1 = MoreThink(1, templates=T).run_batch(items, synth, tiny)
    direct = tiny.continue_many(
        [Vanilla(T).messages(i, synth) for i in items], ["<think>"] * len(items)
    )
    assert [split_thought("<think>" + c.text)[1] for c in direct] == [r.response for r in mt1]


def test_tpo_keeps_best_and_counts_calls(tiny, synth):
    reward = _reward_for(RuleJudge(), synth)
    m = TPO(n_samples=3, max_iters=1, reward_fn=reward, templates=T)
    r, calls = _calls(tiny, lambda: m.run(synth.items[-1], synth, tiny, temperature=1.0, seed=1))
    assert calls == 3 * 2 + 2 and r.calls == 8
    initial = [t["reward"] for t in r.trace if t["kind"] == "sample" and t["round"] == 0]
    assert reward(synth.items[-1], r.response) >= max(initial)
    assert r.trace[-1]["reward"] == max(
        t["reward"] for t in r.trace if "reward" in t and t["kind"] == "sample"
    )


@pytest.mark.parametrize(
    ("name", "kw", "match"),
    [
        ("nope", {}, "valid: raw, vanilla"),
        ("more_think", {"rethink_count": 0}, "rethink_count"),
        ("self_refine", {"max_iters": -1}, "max_iters"),
        ("best_of_n", {"n": 0, "reward_fn": lambda i, r: 0.0}, "n=0"),
        ("best_of_n", {}, "needs reward_fn"),
        ("tpo", {}, "needs reward_fn"),
    ],
)
def test_bad_method_config(name, kw, match):
    with pytest.raises(ValueError, match=match):
        get_method(name, **kw)


def test_cli_method_list_matches_the_methods():
    """The CLI keeps its own copy of the method names (``--help`` must not import the methods'
    dependencies); it must list exactly the methods ``get_method`` knows."""
    from spec_align.cli import METHODS
    from spec_align.ttd import METHOD_NAMES, get_method

    assert tuple(METHODS) == tuple(METHOD_NAMES)
    for name in METHODS:
        cfg = {"reward_fn": lambda item, response: 0.0} if name in ("best_of_n", "tpo") else {}
        assert get_method(name, **cfg).name == name
