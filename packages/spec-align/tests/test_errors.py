"""Bad input: clear errors naming the value and what to do."""

from __future__ import annotations

import pytest
from spec_align.backends import GenParams, OpenAICompatBackend, get_backend
from spec_align.errors import BackendCapabilityError
from spec_align.judge import LLMJudge, get_judge
from spec_align.pipeline import evaluate
from spec_align.prompts import TINY_TEMPLATES
from spec_align.ttd import Align3


def test_no_chat_template_is_a_capability_error(tiny, synth):
    tok = tiny.tokenizer
    saved = tok.chat_template
    tok.chat_template = None
    try:
        with pytest.raises(BackendCapabilityError, match="no chat template"):
            Align3(templates=TINY_TEMPLATES).run(synth.items[0], synth, tiny)
    finally:
        tok.chat_template = saved


def test_completions_prefill_needs_a_tokenizer():
    b = OpenAICompatBackend("http://127.0.0.1:9/v1", "m", prefill="completions")
    with pytest.raises(BackendCapabilityError, match="tokenizer="):
        b.continue_assistant([{"role": "user", "content": "x"}], "<think>")


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda: get_backend("gpt4"), "valid: hf:"),
        (lambda: get_backend("openai:model-without-url"), "openai:MODEL@BASE_URL"),
        (lambda: get_judge("gpt4"), "valid: rule"),
        (lambda: OpenAICompatBackend("127.0.0.1:8000", "m"), "http://"),
        (lambda: OpenAICompatBackend("http://x/v1", "m", prefill="raw"), "prefill="),
        (lambda: GenParams(temperature=-1), "temperature"),
        (lambda: LLMJudge(None, mode="pairwise"), "joint, sequential"),
    ],
)
def test_bad_options(fn, match):
    with pytest.raises(ValueError, match=match):
        fn()


def test_bad_alpha_and_failure_policy(synth):
    rec = [{"data": synth.items[0].to_official(), "response": "x"}]
    from spec_align.judge import RuleJudge

    with pytest.raises(ValueError, match="alpha"):
        evaluate(rec, synth, RuleJudge(), alpha=2.0, progress=False)
    with pytest.raises(ValueError, match="on_failure"):
        evaluate(rec, synth, RuleJudge(), on_failure="ignore", progress=False)


def test_missing_think_close_is_flagged(tiny, synth):
    # With a 2-token budget the model cannot close its thinking after stage 3.
    r = Align3(templates=TINY_TEMPLATES).run(synth.items[0], synth, tiny, max_new_tokens=2)
    assert r.missing_think_close and r.thought == ""
    assert r.response == r.trace[-1]["text"]
