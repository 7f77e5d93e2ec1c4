"""Unlearning losses and trainers: invariants and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from unlearn_leakk.config import UnlearnConfig
from unlearn_leakk.errors import LeakConfigError, UnlearnError
from unlearn_leakk.trainers import (
    METHODS,
    UnlearnResult,
    _pad,
    encode_items,
    make_reference,
    nll_loss,
    npo_loss,
    unlearn,
    unlearning_loss,
)


def _batch(tok, items):
    return _pad(encode_items(tok, items, chat_template=False, max_length=64), tok.pad_token_id)


def test_graddiff_alpha0_is_negative_nll(world_model, world):
    model, tok = world_model
    forget = world.qa_items([0])
    retain = world.qa_items([9], split="retain")
    inputs = {"forget": _batch(tok, forget), "retain": _batch(tok, retain)}
    cfg = UnlearnConfig("GradDiff", alpha=0.0)
    loss, _ = unlearning_loss(cfg, model, None, inputs)
    labels = inputs["forget"]["labels"]
    hf = model(
        input_ids=inputs["forget"]["input_ids"],
        attention_mask=inputs["forget"]["attention_mask"],
        labels=labels,
    ).loss
    assert loss.item() == pytest.approx(-hf.item(), rel=1e-5)
    assert nll_loss(model, inputs["forget"]).item() == pytest.approx(hf.item(), rel=1e-5)


def test_npo_at_reference_is_2_log2_over_beta(world_model, world):
    model, tok = world_model
    ref = make_reference(model)
    b = _batch(tok, world.qa_items([1]))
    for beta in (0.5, 2.0):
        assert npo_loss(model, ref, b, beta).item() == pytest.approx(
            2 / beta * math.log(2), rel=1e-6
        )


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_runs_and_changes_weights(world_model, world, method):
    model, tok = world_model
    before = [p.detach().clone() for p in model.parameters()]
    cfg = UnlearnConfig(
        method,
        lr=1e-3,
        max_steps=2,
        batch_size=5,
        grad_accum=1,
        rmu_layer=2,
        warmup_epochs=0.0,
        retain_loss_type="KL" if method == "GradDiff" else "NLL",
    )
    res = UnlearnResult()
    unlearn(
        model, tok, world.qa_items([0]), world.qa_items([8, 9], split="retain"), cfg, result=res
    )
    assert res.steps == 2 and len(res.losses) >= 2
    assert all(math.isfinite(x["forget_loss"]) for x in res.losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_bad_unlearn_inputs(world_model, world):
    model, tok = world_model
    forget = world.qa_items([0])
    with pytest.raises(UnlearnError, match="needs a non-empty retain set"):
        unlearn(model, tok, forget, [], UnlearnConfig("GradDiff"))
    with pytest.raises(LeakConfigError, match="rmu_layer=7 is out of range: the model has 4"):
        unlearn(model, tok, forget, world.qa_items([9]), UnlearnConfig("RMU", rmu_layer=7))
    with pytest.raises(LeakConfigError, match="forget_weights has 2 entries"):
        unlearn(model, tok, forget, None, UnlearnConfig("GradAscent"), forget_weights=[1, 2])


def test_lora_needs_the_peft_extra(world_model, world, monkeypatch):
    """Without peft installed, LoRA unlearning names the extra to install."""
    from llmcore.errors import MissingExtraError

    model, tok = world_model
    monkeypatch.setitem(__import__("sys").modules, "peft", None)  # import peft -> ImportError
    cfg = UnlearnConfig("GradAscent", max_steps=1, peft_config={"r": 2})
    with pytest.raises(MissingExtraError, match=r"pip install 'unlearn-leakk\[peft\]'"):
        unlearn(model, tok, world.qa_items([0]), None, cfg)


def test_lora_unlearning_trains_only_adapters(world_model, world):
    pytest.importorskip("peft")
    model, tok = world_model
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = UnlearnConfig(
        "GradAscent",
        lr=1e-2,
        max_steps=2,
        batch_size=5,
        grad_accum=1,
        warmup_epochs=0.0,
        peft_config={"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]},
    )
    res = UnlearnResult()
    out = unlearn(model, tok, world.qa_items([0]), None, cfg, result=res)
    assert res.steps == 2
    names = [n for n, p in out.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    lora_b = [p for n, p in out.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in lora_b)  # B starts at zero: the adapters trained
    merged = out.merge_and_unload()
    changed = [n for n, p in merged.named_parameters() if not torch.equal(p, base[n])]
    assert changed and all(("q_proj" in n or "v_proj" in n) for n in changed)
