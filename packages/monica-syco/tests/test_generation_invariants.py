"""Invariants of the generation loop (section 6): monitoring never changes outputs, streaming
SDS equals the offline score, no extra forward passes, edits on every fed generated token and
no prompt token (CAA's first-token off-by-one, KV-cache indexing), hooks removed, batching."""

from __future__ import annotations

import pytest
import torch
from monica_syco import attach, monica_generate, score_trajectory
from monica_syco.errors import MonicaConfigError
from monica_syco.generate import block_names, encode_prompts


def _prompts(world, n=4):
    kinds = ("strong", "clean", "weak", "correct")
    return [world.item(world.entities[i], 0, kinds[i % 4]).chat() for i in range(n)]


def _plain(model, tok, prompts, **kw):
    enc = encode_prompts(tok, prompts, "cpu")
    calls = []
    h = model.register_forward_pre_hook(lambda m, a, k: calls.append(1), with_kwargs=True)
    try:
        with torch.no_grad():
            seq = model.generate(**enc, pad_token_id=tok.pad_token_id, **kw)
    finally:
        h.remove()
    return seq, len(calls)


def _hook_count(model):
    mods = [model] + [model.get_submodule(n) for n in block_names(model)]
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in mods)


@pytest.mark.parametrize("variant", ["no_calibrator", "threshold_1", "alpha_0"])
def test_monitoring_never_changes_greedy_outputs(model_tok, world, fitted, variant):
    model, tok = model_tok
    mon, cal, _ = fitted
    prompts = _prompts(world)
    plain, n_plain = _plain(model, tok, prompts, do_sample=False, max_new_tokens=72)
    c = {
        "no_calibrator": None,
        "threshold_1": cal.with_(threshold=1.0, alpha_max=8.0),
        "alpha_0": cal.with_(threshold=0.0, alpha_min=0.0, alpha_max=0.0),
    }[variant]
    out = monica_generate(model, tok, prompts, mon, c, do_sample=False, max_new_tokens=72)
    assert torch.equal(out.sequences, plain)
    assert out.n_forward == n_plain
    assert all(len(s) >= 3 for s in out.sds)  # the monitor did score steps
    if variant == "alpha_0":
        assert any(out.interventions)  # it triggered, with zero strength


def test_streaming_sds_equals_offline_single_pass(model_tok, world, fitted):
    model, tok = model_tok
    mon, _, _ = fitted
    prompts = _prompts(world)
    out = monica_generate(model, tok, prompts, mon, None, do_sample=False, max_new_tokens=72)
    enc = encode_prompts(tok, prompts, "cpu")
    P = enc["input_ids"].shape[1]
    worst = 0.0
    for b in range(len(prompts)):
        pid = enc["input_ids"][b][enc["attention_mask"][b].bool()].tolist()
        gen = out.sequences[b, P:].tolist()
        if tok.eos_token_id in gen:
            gen = gen[: gen.index(tok.eos_token_id) + 1]
        steps, sds = score_trajectory(model, tok, mon, pid, gen)
        assert steps == out.steps[b]
        assert len(sds) == len(out.sds[b])
        worst = max([worst] + [abs(a - c) for a, c in zip(sds, out.sds[b], strict=True)])
    assert worst < 1e-4, worst


def test_no_extra_forward_passes_and_edits_on_every_fed_token(model_tok, world, fitted):
    model, tok = model_tok
    mon, cal, _ = fitted
    prompts = _prompts(world, 2)
    N = 20
    kw = {"do_sample": False, "max_new_tokens": N, "min_new_tokens": N}
    _, n_plain = _plain(model, tok, prompts, **kw)
    out = monica_generate(model, tok, prompts, mon, cal.with_(alpha_max=1.0), policy="always", **kw)
    assert out.n_forward == n_plain == N
    # every generated token that is fed back (all but the last sampled one) is edited once
    # per row; the prompt (prefill pass) never is
    assert out.edited_tokens == [N - 1, N - 1]
    assert out.prompt_edits == 0


def test_first_fed_token_is_steered_and_prompt_is_not(model_tok, world, fitted):
    """Record the edited block's downstream input: identical to the plain run on the prompt
    pass, different on the first decode pass (no first-token off-by-one)."""
    model, tok = model_tok
    mon, cal, _ = fitted
    prompts = _prompts(world, 1)
    names = block_names(model)
    layer = cal.layers[-1]
    nxt = names[min(layer + 1, len(names) - 1)] if layer + 1 < len(names) else "model.norm"
    kw = {"do_sample": False, "max_new_tokens": 3, "min_new_tokens": 3}

    def record(calibrator, policy):
        seen = []
        mod = model.get_submodule(nxt)
        h = mod.register_forward_pre_hook(
            lambda m, a, k: seen.append((a[0] if a else k["hidden_states"]).clone()),
            with_kwargs=True,
        )
        try:
            monica_generate(model, tok, prompts, mon, calibrator, policy=policy, **kw)
        finally:
            h.remove()
        return seen

    base = record(None, "never")
    steered = record(cal.with_(alpha_max=4.0), "always")
    assert torch.equal(base[0], steered[0])  # prefill: prompt states untouched
    assert not torch.allclose(base[1], steered[1])  # first fed generated token is edited


def test_zero_token_delay_after_trigger(model_tok, world, fitted):
    """threshold=0: the first boundary triggers; tokens through the boundary token equal the
    plain run and the very next token is sampled under calibration."""
    model, tok = model_tok
    mon, cal, _ = fitted
    prompts = _prompts(world, 1)
    plain = monica_generate(model, tok, prompts, mon, None, do_sample=False, max_new_tokens=40)
    out = monica_generate(
        model,
        tok,
        prompts,
        mon,
        cal.with_(threshold=0.0, alpha_min=30.0, alpha_max=30.0),
        do_sample=False,
        max_new_tokens=40,
    )
    assert out.interventions[0][0]["step"] == 0
    a, b = plain.sequences[0].tolist(), out.sequences[0].tolist()
    first_diff = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
    P = encode_prompts(tok, prompts, "cpu")["input_ids"].shape[1]
    text_before = tok.decode(a[P:first_diff], skip_special_tokens=False)
    # everything up to the first blank line (end of step 0) is shared, nothing after it
    assert text_before.count("\n\n") == 1 and text_before.rstrip(" ").endswith("\n\n")


def test_hooks_removed_on_exit_and_on_exception(model_tok, world, fitted):
    model, tok = model_tok
    mon, cal, _ = fitted
    before = _hook_count(model)
    monica_generate(model, tok, _prompts(world, 2), mon, cal, do_sample=False, max_new_tokens=8)
    assert _hook_count(model) == before
    enc = encode_prompts(tok, _prompts(world, 2), "cpu")
    with pytest.raises(RuntimeError, match="boom"), attach(model, tok, mon, cal):
        assert _hook_count(model) > before
        raise RuntimeError("boom")
    assert _hook_count(model) == before
    calls = []

    def fail_on_third_pass(module, args, output):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("failure inside generation")

    h = model.get_submodule(block_names(model)[0]).register_forward_hook(fail_on_third_pass)
    try:
        with pytest.raises(RuntimeError, match="inside generation"), attach(model, tok, mon, cal):
            model.generate(**enc, max_new_tokens=8, pad_token_id=tok.pad_token_id)
    finally:
        h.remove()
    assert _hook_count(model) == before


def test_batched_equals_unbatched(model_tok, world, fitted):
    model, tok = model_tok
    mon, cal, _ = fitted
    prompts = _prompts(world, 4)
    kw = {"do_sample": False, "max_new_tokens": 72}
    batched = monica_generate(model, tok, prompts, mon, cal, **kw)
    ties = []
    for b, p in enumerate(prompts):
        one = monica_generate(model, tok, [p], mon, cal, **kw)
        if one.texts[0] != batched.texts[b]:
            ties.append(b)  # reported, not failed, only when the logit margin is a tie
            continue
        assert len(one.sds[0]) == len(batched.sds[b])
        assert max(abs(x - y) for x, y in zip(one.sds[0], batched.sds[b], strict=True)) < 1e-4
    assert not ties, f"rows {ties} differ between batched and unbatched generation"


def test_peft_model_is_hooked_on_the_base_blocks(world_entry, world, fitted):
    peft = pytest.importorskip("peft")
    mon, _, _ = fitted
    model, tok = world_entry.load()  # a private copy: LoRA injection edits the modules
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    names = block_names(lora)
    assert len(names) == 4 and names[0].endswith("layers.0")
    prompts = _prompts(world, 2)
    out = monica_generate(lora, tok, prompts, mon, None, do_sample=False, max_new_tokens=40)
    base = monica_generate(model, tok, prompts, mon, None, do_sample=False, max_new_tokens=40)
    assert out.texts == base.texts and out.sds == base.sds  # LoRA B = 0 at init: same model


def test_persistent_session_equals_one_attach_per_generate_call(model_tok, world, fitted):
    """``attach(persistent=True)`` over several ``generate`` calls (a library making staged
    calls) = one ``attach`` per call: same tokens, step scores and interventions per call;
    without it a second call in one session is refused."""
    model, tok = model_tok
    mon, cal, _ = fitted
    calls = [_prompts(world, 4), _prompts(world, 2)[::-1]]
    kw = {"do_sample": False, "max_new_tokens": 48, "pad_token_id": tok.pad_token_id}
    separate = [monica_generate(model, tok, p, mon, cal, **kw) for p in calls]
    assert any(any(o.interventions) for o in separate)  # the calibrator does act here
    before = _hook_count(model)
    seqs = []
    # inference_mode, as llmcore's and spec-align's backends run generate
    with attach(model, tok, mon, cal, persistent=True) as session, torch.inference_mode():
        for p in calls:
            seqs.append(model.generate(**encode_prompts(tok, p, "cpu"), **kw))
    assert _hook_count(model) == before
    assert len(session.generations) == len(calls)
    for one, many, seq in zip(separate, session.generations, seqs, strict=True):
        assert torch.equal(seq, one.sequences)
        assert many.steps == one.steps and many.interventions == one.interventions
        assert many.n_forward == one.n_forward and many.edited_tokens == one.edited_tokens
        for a, b in zip(many.sds, one.sds, strict=True):
            assert len(a) == len(b) and all(abs(x - y) < 1e-5 for x, y in zip(a, b, strict=True))
    assert session.outputs().sds == session.generations[-1].sds
    # rows still reasoning when the block exits: their last step is flushed and scored
    with attach(model, tok, mon, cal, persistent=True) as short, torch.inference_mode():
        model.generate(**encode_prompts(tok, calls[0], "cpu"), **{**kw, "max_new_tokens": 8})
    assert len(short.generations) == 1 and all(len(x) >= 1 for x in short.generations[0].sds)
    refused = pytest.raises(MonicaConfigError, match="persistent=True")
    with refused, attach(model, tok, mon, cal), torch.no_grad():
        for p in calls:
            model.generate(**encode_prompts(tok, p, "cpu"), **kw)
