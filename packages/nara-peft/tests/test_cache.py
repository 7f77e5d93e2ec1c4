"""The pre-trained tiny model is one llmcore zoo entry, keyed by what determines it."""

from __future__ import annotations

from dataclasses import replace


def test_pretrained_model_is_a_zoo_entry():
    from nara_peft.fixtures import build_pretrained
    from nara_peft.synth import SynthSpec
    from nara_peft.tiny import ENTRY_NAME, WEIGHTS, pretrain_material

    from llmcore import zoo

    entry = build_pretrained()
    assert entry.name == ENTRY_NAME
    assert (entry.path / WEIGHTS).is_file() and (entry.path / "zoo.json").is_file()
    again = zoo.lookup(ENTRY_NAME, pretrain_material(SynthSpec()))
    assert again is not None and again.path == entry.path and again.from_cache


def test_key_material_covers_pretraining_only():
    from nara_peft.synth import SynthSpec
    from nara_peft.tiny import pretrain_material

    spec = SynthSpec()
    base = pretrain_material(spec)
    assert len(base["code"]) == 16
    # fine-tuning / evaluation settings reuse the same pre-trained model ...
    assert pretrain_material(replace(spec, finetune_steps=3, eval_n=20, arms=("x",))) == base
    # ... pre-training settings do not
    assert pretrain_material(replace(spec, pretrain_steps=999)) != base
    assert pretrain_material(replace(spec, perm_seed=1)) != base
