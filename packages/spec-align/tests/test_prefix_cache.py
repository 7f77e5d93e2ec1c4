"""Prefix KV reuse in the HF backend: per conversation across Align3 / MoreThink stages (this
package), and a batch's shared prompt prefix in chat calls (llmcore)."""

from __future__ import annotations

import pytest
from spec_align.backends import HFBackend
from spec_align.prompts import TINY_TEMPLATES
from spec_align.ttd import Align3, MoreThink, Vanilla

T = TINY_TEMPLATES


@pytest.fixture(scope="module")
def no_reuse(tiny):
    """The same tiny model without prefix reuse (every stage re-prefills its prompt)."""
    return HFBackend(
        tiny.core.model, tiny.tokenizer, prepend_bos=True, prefix_cache=False, max_new_tokens=160
    )


def _texts(res):
    return [[c["text"] for c in r.trace] for r in res]


def _prefill(res):
    return sum(r.usage["prefill_tokens"] for r in res)


def _tokens(backend, text):
    return len(backend.tokenizer(text, add_special_tokens=False)["input_ids"])


def test_align3_reuse_exact_and_prefill(tiny, no_reuse, synth):
    items = synth.items  # 6 safe + 6 unsafe
    on = Align3(templates=T).run_batch(items, synth, tiny)
    assert not tiny._kv  # finished items released their caches
    off = Align3(templates=T).run_batch(items, synth, no_reuse)
    assert _texts(on) == _texts(off)  # greedy: identical stage by stage
    assert [r.response for r in on] == [r.response for r in off]
    van = _prefill(Vanilla(T).run_batch(items, synth, no_reuse))
    p_on, p_off = _prefill(on), _prefill(off)
    print(f"align3 prefill x vanilla: reuse {p_on / van:.2f}, no reuse {p_off / van:.2f}")
    assert p_on < p_off
    # With reuse, stages 2-3 prefill only their injected stage text (plus the few tokens where
    # the completion is re-tokenized differently at the join), never the prompt again.
    _, s2, s3 = T.stages(synth)
    injected = sum(_tokens(tiny, "\n\n" + x) for x in (s2, s3))
    stage1 = sum(r.usage["prompt_tokens"] for r in on)
    assert stage1 <= p_on <= stage1 + len(on) * (injected + 2 * 4)


def test_more_think_reuse_exact(tiny, no_reuse, synth):
    items = synth.items[:3] + synth.items[-3:]
    on = MoreThink(3, templates=T).run_batch(items, synth, tiny)
    off = MoreThink(3, templates=T).run_batch(items, synth, no_reuse)
    assert _texts(on) == _texts(off)
    assert _prefill(on) < _prefill(off)


def test_prefill_count_is_what_the_model_ran(tiny, synth):
    """``prefill_tokens`` equals the tokens the model actually embedded before decoding."""
    seen: list[int] = []
    emb = tiny.core.model.get_input_embeddings()
    hook = emb.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[1]))
    try:
        m = Vanilla(T).messages(synth.items[0], synth)
        a = tiny.continue_assistant(m, "<think>", ["</think>"])
        seen.clear()
        # Diverges from the cached completion after a few characters: the cache is cropped.
        b = tiny.continue_assistant(m, "<think>" + a.text[:3] + "x", ["</think>"])
        assert seen[0] == b.prefill_tokens < b.prompt_tokens
        assert all(n == 1 for n in seen[1:])
        ref = HFBackend(
            tiny.core.model, tiny.tokenizer, prepend_bos=True, prefix_cache=False
        ).continue_assistant(m, "<think>" + a.text[:3] + "x", ["</think>"], max_new_tokens=160)
        assert b.text == ref.text and b.prefill_tokens < ref.prefilled == ref.prompt_tokens
    finally:
        hook.remove()
        tiny.release([m])


def test_cache_is_bounded(tiny, synth):
    b = HFBackend(
        tiny.core.model, tiny.tokenizer, prepend_bos=True, prefix_cache_size=2, max_new_tokens=8
    )
    msgs = [Vanilla(T).messages(it, synth) for it in synth.items[:3]]
    b.continue_many(msgs, ["<think>"] * 3)
    assert [k for k, _, _ in b._kv.values()] == [b.render(m) for m in msgs[1:]]
    b.release(msgs)
    assert not b._kv
    with pytest.raises(ValueError, match="prefix_cache_size"):
        HFBackend(tiny.core.model, tiny.tokenizer, prefix_cache_size=0)


def test_chat_uses_llmcore_shared_prefix_exactly(tiny, no_reuse, synth):
    """Chat calls go through llmcore's shared-prefix reuse: a batch's common prompt prefix (here
    a system prompt) is prefilled once, and the replies equal those without reuse."""
    system = T.refine_feedback_system.format(query="a question", specs=T.specs_block(synth))
    msgs = [
        [{"role": "system", "content": system}, {"role": "user", "content": it.prompt}]
        for it in synth.items[:4]
    ]
    on = tiny.chat_many(msgs, max_new_tokens=24)
    assert tiny.core.last_prefix_lengths[0] >= 8
    off = no_reuse.chat_many(msgs, max_new_tokens=24)
    assert [c.text for c in on] == [c.text for c in off]
    assert all(c.prefilled < c.prompt_tokens for c in on)
    assert all(c.prefilled == c.prompt_tokens for c in off)
