"""The hypernetwork receives gradients."""

from __future__ import annotations

import copy

import torch
from conftest import logits, small_cfg
from nara_peft import get_nara_model
from nara_peft.synth import SynthSpec, masked_ce, task_batch


def test_every_mapper_parameter_gets_gradient(base):
    torch.manual_seed(0)
    model = get_nara_model(copy.deepcopy(base), small_cfg(c_scale=0.1))
    tuner = model.base_model
    mapper_params = list(tuner.nara_mapper.parameters())
    assert mapper_params and all(p.requires_grad for p in mapper_params)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert all(id(p) in trainable for p in mapper_params)  # marked by identity, not by name
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    spec = SynthSpec()
    gen = torch.Generator().manual_seed(0)
    model.train()
    # zero_last init: step 0 moves only B (C's gradient is 0 while B = 0), step 1 moves the last
    # mapper layer, so from step 2 on every mapper parameter must receive a gradient.
    for step in range(3):
        x, noisy, masked, t = task_batch(16, spec, gen)
        loss = masked_ce(model, x, noisy, masked, t, True)
        assert float(loss.detach()) > 0
        opt.zero_grad()
        loss.backward()
        if step == 2:
            for name, p in tuner.nara_mapper.named_parameters():
                assert p.grad is not None and p.grad.abs().sum() > 0, name
        opt.step()
    # the update changed C away from I
    c = tuner.core_matrix(torch.tensor([0.2, 0.8]))
    assert (c - torch.eye(4)).abs().max() > 0


def test_train_flags_freeze_by_identity(base):
    model = get_nara_model(copy.deepcopy(base), small_cfg(train_mapper=False, train_a=False))
    tuner = model.base_model
    assert not any(p.requires_grad for p in tuner.nara_mapper.parameters())
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all("nara_B" in n for n in names)


def test_stage1_is_plain_lora(base, batch):
    from conftest import randomize_b, randomize_mapper_last
    from nara_peft import stage1

    model = get_nara_model(copy.deepcopy(base), small_cfg())
    randomize_b(model)
    randomize_mapper_last(model)
    with stage1(model):
        a, b = logits(model, batch, 0.1), logits(model, batch, 0.9)
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert (logits(model, batch, 0.1) - logits(model, batch, 0.9)).abs().max() > 1e-4


def test_smoothness_penalty(base):
    from conftest import randomize_mapper_last
    from nara_peft import smoothness_penalty

    model = get_nara_model(copy.deepcopy(base), small_cfg())
    pen0 = smoothness_penalty(model, torch.tensor([0.3, 0.99])).detach()
    assert float(pen0) == 0.0  # C == I at init
    randomize_mapper_last(model)
    pen = smoothness_penalty(model, torch.tensor([0.3, 0.99]))
    assert float(pen.detach()) > 0
    pen.backward()
    assert model.base_model.nara_mapper["default"]["shared"][-1].weight.grad is not None
