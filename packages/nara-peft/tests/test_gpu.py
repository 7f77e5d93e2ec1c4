"""CUDA / bf16 path (skipped without a GPU): mapper stays float32, outputs keep the base dtype."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import randomize_b, randomize_mapper_last, small_cfg
from nara_peft import get_nara_model


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_cuda_forward_backward(base):
    model = get_nara_model(copy.deepcopy(base).to("cuda", torch.bfloat16), small_cfg())
    randomize_b(model)
    randomize_mapper_last(model)
    tuner = model.base_model
    assert all(p.dtype == torch.float32 for p in tuner.nara_mapper.parameters())
    assert all(p.device.type == "cuda" for p in tuner.nara_mapper.parameters())
    x = torch.randint(0, 16, (3, 16), device="cuda")
    out = model(input_ids=x, noise_level=torch.tensor([0.1, 0.5, 0.9])).logits
    assert out.dtype == torch.bfloat16
    out.float().pow(2).mean().backward()
    assert all(p.grad is not None for p in tuner.nara_mapper.parameters())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_generate_on_cuda_with_a_cpu_generator(base):
    """Sampling on CUDA with Gumbel noise and random remasking accepts the CPU generator the
    CLI passes (it is re-seeded on the model's device)."""
    from nara_peft import generate
    from nara_peft.synth import MASK_ID

    model = get_nara_model(copy.deepcopy(base).to("cuda"), small_cfg())
    prompt = torch.randint(0, 16, (2, 4), device="cuda")
    out = [
        generate(
            model,
            prompt,
            mask_token_id=MASK_ID,
            steps=4,
            gen_length=4,
            block_length=4,
            temperature=0.7,
            remasking="random",
            cfg_scale=0.5,
            generator=torch.Generator().manual_seed(0),
        )
        for _ in range(2)
    ]
    assert torch.equal(out[0], out[1]) and out[0].device.type == "cuda"
    assert torch.equal(out[0][:, :4], prompt) and out[0].shape == (2, 8)
