"""Verification: binomial decision values, determinism, signature round trip, bad settings."""

from __future__ import annotations

import pytest
from circuitprint.errors import SignatureError, VerificationError
from circuitprint.triggers import Signature
from circuitprint.verify import Suspect, binomial_p, verify


def test_binomial_decision_values():
    assert binomial_p(7, 32, 0.05) == pytest.approx(8.7e-4, rel=0.02)
    assert binomial_p(6, 32, 0.05) == pytest.approx(4.6e-3, rel=0.02)
    assert binomial_p(7, 32, 0.05) <= 1e-3 < binomial_p(6, 32, 0.05)


class _Table:
    """A suspect whose answers come from a table (the black box is a lookup)."""

    tokenizer = None

    def __init__(self, answers: dict[str, str]) -> None:
        self.backend = self
        self.answers = answers

    def generate(self, prompts, params):
        class C:
            def __init__(self, t):
                self.text = t

        return [[C(" " + self.answers.get(p, "x"))] for p in prompts]

    def score(self, pairs):
        from llmcore.errors import BackendError

        raise BackendError("no prompt log-probs")


def _sig(n: int) -> Signature:
    trig = [{"id": k, "prompt": f"p{k}", "answer": "y", "trigger_prompt": f"t{k}",
             "shifted_answer": "z", "supernode": "s", "family": "f",
             "protected_logprobs": {"clean": -3.0, "trigger": -0.1}} for k in range(n)]  # fmt: skip
    return Signature(trig, {"name": "m"}, {"vocab_hash": "h"}, {})


@pytest.mark.parametrize(("matches", "verdict"), [(7, "independent"), (16, "derived"),
                                                  (32, "derived")])  # fmt: skip
def test_tmr_rule_dominates_binomial(matches, verdict):
    sig = _sig(32)
    ans = {f"p{k}": "y" for k in range(32)} | {f"t{k}": "z" for k in range(matches)}
    s = Suspect(_Table(ans))
    v = verify(sig, s)
    assert v.verdict == verdict and v.n_usable == 32 and v.tmr == matches / 32
    assert v.exit_code == (0 if verdict == "derived" else 1)


def test_inconclusive_and_bad_settings(tmp_path):
    sig = _sig(8)
    v = verify(sig, Suspect(_Table({})))
    assert v.verdict == "inconclusive" and v.exit_code == 2
    s = Suspect(_Table({f"p{k}": "y" for k in range(8)}))
    with pytest.raises(VerificationError, match="r0"):
        verify(sig, s, reference_tmr=0.6)
    with pytest.raises(VerificationError, match="p_max"):
        verify(sig, s, p_max=1.5)
    with pytest.raises(VerificationError, match="log-probs"):
        verify(sig, s, mode="logprob")
    sig.save(tmp_path / "s.json")
    assert Signature.load(tmp_path / "s.json") == sig
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SignatureError, match="not a circuitprint signature"):
        Signature.load(tmp_path / "bad.json")


def test_tokenizer_mismatch_is_inconclusive():
    sig = _sig(4)
    for t in sig.triggers:
        t["trigger_ids"] = [1, 2, 3]

    class Tok:
        def __call__(self, text):
            return {"input_ids": [9, 9]}

    s = Suspect(_Table({f"p{k}": "y" for k in range(4)} | {f"t{k}": "z" for k in range(4)}),
                Tok())  # fmt: skip
    v = verify(sig, s)
    assert v.verdict == "inconclusive" and "tokenizer" in v.message
