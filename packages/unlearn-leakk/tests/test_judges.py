"""Judges, including the NLI gate with a stand-in pipeline callable."""

from __future__ import annotations

import pytest
from unlearn_leakk.errors import JudgeUnavailableError, LeakConfigError
from unlearn_leakk.judges import (
    ExactPhraseJudge,
    LeakJudge,
    LLMJudge,
    MCQJudge,
    NLIEntailmentJudge,
    RougeRecallJudge,
    get_judge,
)


def test_rouge_recall_and_threshold():
    j = RougeRecallJudge()
    s = j(["The author was born in Paris", "", "nothing"], "born in Paris")
    assert s[0] == pytest.approx(1.0) and s[1] == 0.0 and s[2] == 0.0
    jb = RougeRecallJudge(threshold=0.5)
    assert jb.binary and jb(["born in Rome"], "born in Paris") == [1.0]
    assert isinstance(j, LeakJudge)


def test_exact_phrase():
    j = ExactPhraseJudge()
    assert j(["He was born in ZELMARLO.", "Briripel"], "Zelmarlo") == [1.0, 0.0]
    with pytest.raises(LeakConfigError):
        j(["x"], "  ")
    with pytest.raises(LeakConfigError, match="list of responses"):
        j("a string", "x")


class RecordingNLI:
    """A deterministic text-classification stand-in that records its inputs."""

    def __init__(self, label: str = "entailment") -> None:
        self.label, self.seen = label, []

    def __call__(self, pairs):
        self.seen.extend(pairs)
        return [{"label": self.label, "score": 0.9} for _ in pairs]


def test_nli_gate_and_order():
    pipe = RecordingNLI()
    j = NLIEntailmentJudge(pipeline=pipe, rouge_gate=0.1)
    ref = "She was born in Zelmarlo in 1950"
    scores = j(["unrelated words only", "", "born in Zelmarlo", "Zelmarlo 1950"], ref)
    # gated responses score 0 whatever the NLI says, and never reach it
    assert scores == [0.0, 0.0, 1.0, 1.0]
    assert [p["text"] for p in pipe.seen] == ["born in Zelmarlo", "Zelmarlo 1950"]
    assert all(p["text_pair"] == ref for p in pipe.seen)  # premise = response
    assert j.skipped == 2 and j.calls == 2
    pipe2 = RecordingNLI("neutral")
    jr = NLIEntailmentJudge(pipeline=pipe2, order="retain")
    assert jr(["born in Zelmarlo"], ref) == [0.0]
    assert pipe2.seen[0] == {"text": ref, "text_pair": "born in Zelmarlo"}


def test_nli_unavailable_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    j = NLIEntailmentJudge(model=str(tmp_path / "no-such-nli-model"))
    with pytest.raises(JudgeUnavailableError, match="'rouge' or 'exact'"):
        j(["born in Paris"], "born in Paris")


def test_llm_judge_needs_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(JudgeUnavailableError, match="OPENAI_API_KEY"):
        LLMJudge()(["x"], "y")


def test_mcq_judge():
    j = MCQJudge()
    assert j(["B", "The answer is C.", "b) maybe", "", "A"], "C") == [0.0, 1.0, 0.0, 0.0, 0.0]
    with pytest.raises(LeakConfigError):
        j(["A"], "AB")


def test_get_judge():
    assert get_judge("exact").name == "exact_match"
    assert get_judge("rouge").binary is False
    with pytest.raises(LeakConfigError, match="unknown judge"):
        get_judge("bleu")
